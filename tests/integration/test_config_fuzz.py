"""Random input never makes the config loader raise anything but ConfigError."""

from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from r2bench.config.errors import ConfigError
from r2bench.plan.build import load_inputs, make_plan
from tests.support import paths

TESTBED = paths.CORPUS / "testbed.yaml"
PAPER = paths.REPO / "experiments" / "paper" / "one-nic-down.yaml"

KEYS = [
    "name",
    "libraries",
    "recipe",
    "sweep",
    "matrix",
    "zip",
    "exclude",
    "scenarios",
    "faults",
    "kind",
    "node",
    "nic",
    "trigger",
    "after_s",
    "sizes",
    "begin",
    "end",
    "R2CC_MODE",
    "env",
    "deadline_s",
    "collectives",
    "nodes",
    "options",
    "duration_s",
    "repeats",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**12),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.sampled_from(["r2ccl", "node1", "mlx5_1", "all_reduce", "8G", "$(x)"]),
)
documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), children, max_size=5),
    ),
    max_leaves=30,
)


def _check(tmp_path: Path, text: str) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        make_plan(load_inputs(path, TESTBED))
    except ConfigError as error:
        assert error.issues and all(issue.file == str(path) for issue in error.issues)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(documents)
def test_random_structures_never_raise_tracebacks(tmp_path: Path, document: object) -> None:
    _check(tmp_path, yaml.safe_dump(document))


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=300))
def test_random_text_never_raises_tracebacks(tmp_path: Path, text: str) -> None:
    _check(tmp_path, text)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.integers(0, 2000),
    st.sampled_from(
        ["", "\t", ":", "- ", "[", "{", "'", "\x00", "*a", "&a ", "!!python/object:os.system "]
    ),
)
def test_mutated_real_experiment_never_raises(tmp_path: Path, position: int, insert: str) -> None:
    text = PAPER.read_text()
    position %= len(text)
    _check(tmp_path, text[:position] + insert + text[position:])
