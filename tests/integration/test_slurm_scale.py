"""A testbed of a Slurm allocation at the node list's cap (100,000 hosts) is written and read
back by r2bench itself: neither the config size cap nor the alias-expansion cap refuses the
file r2bench wrote, and a name given twice is still found (in one pass: the check was
quadratic, 84 s at this size). Time is measured by benchmarks/bench_slurm_testbed.py."""

from __future__ import annotations

import pytest

from r2bench.config.errors import name_list
from r2bench.config.source import parse_yaml
from r2bench.config.testbed import Testbed
from r2bench.config.validate import validate_model
from r2bench.testbeds.slurm import MAX_HOSTS, slurm_testbed
from r2bench.testbeds.yamlio import testbed_text as yaml_of

ALLOCATION = {"SLURM_JOB_NODELIST": f"gpu[1-{MAX_HOSTS}]", "SLURM_GPUS_ON_NODE": "8"}


@pytest.fixture(scope="module")
def written() -> str:
    """The testbed file `testbed from-slurm` writes for the largest allocation."""
    return yaml_of(slurm_testbed(ALLOCATION))


def test_the_largest_allocations_testbed_reads_back(written: str) -> None:
    """Before: the file (4.7 MB with GPUs) was over the 4 MiB config cap, and its 400,000
    values over the 100,000 of the alias-expansion cap."""
    assert len(written) > 4 * 1024 * 1024
    again = validate_model(Testbed, parse_yaml(written, "slurm.yaml"))
    assert len(again.nodes) == MAX_HOSTS and again.nodes[-1].gpus == 8
    assert again.nodes[-1].name == f"gpu{MAX_HOSTS}"


def test_a_host_named_twice_among_100000_is_named_by_both_entries(written: str) -> None:
    text = written.replace("- name: gpu99999\n", "- name: gpu7\n", 1)
    with pytest.raises(Exception, match=r"node name 'gpu7' appears twice \(entries 6 and 99998\)"):
        validate_model(Testbed, parse_yaml(text, "slurm.yaml"))


def test_a_long_list_of_names_in_a_hint_is_cut() -> None:
    names = [f"gpu{i}" for i in range(MAX_HOSTS)]
    assert name_list(names).endswith(", gpu19, ... (100000 in all)")
    assert name_list(names[:3]) == "gpu0, gpu1, gpu2"
