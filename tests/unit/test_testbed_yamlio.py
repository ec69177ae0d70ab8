"""The comment headers of the testbed files r2bench writes (`cloudlab testbed`, `testbed
from-slurm`): whatever a value holds (a line break of any kind, markup, escapes), it stays in
the comment, and the file reads as the same testbed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from r2bench.config.load import load_testbed
from r2bench.testbeds.yamlio import comment_header
from tests.support import paths
from tests.support.cli_runner import invoke_as_main

CLOUDLAB = paths.DATA / "cloudlab" / "two-nodes-one-lan.xml"
# Every character YAML (1.1, as PyYAML reads it) takes for a line break, and a few that
# terminals do.
BREAKS = ["\n", "\r", "\r\n", "\x85", "\u2028", "\u2029", "\x0b", "\x0c"]
PAYLOAD = "kind: local\nlauncher: {command: sh}\npaths: {work_dir: /}"


# ---- values in the comment headers of written testbed files ---------------------------------


@pytest.mark.parametrize("brk", BREAKS)
def test_comment_header_keeps_any_value_on_its_line(brk: str) -> None:
    text = comment_header(
        "Made from {source}.\nsecond line {out}", source=f"x{brk}{PAYLOAD}", out="o"
    )
    assert yaml.safe_load(text + "name: t\n") == {"name": "t"}
    assert all(line.startswith("#") for line in text.splitlines())
    assert len(text.splitlines()) == 2


@pytest.mark.parametrize("brk", BREAKS)
def test_a_manifest_name_with_line_breaks_stays_in_the_comment(tmp_path: Path, brk: str) -> None:
    manifest = tmp_path / f"m{brk}{PAYLOAD.replace('/', '_')}.xml"
    shutil.copy(CLOUDLAB, manifest)
    plain = tmp_path / "plain.yaml"
    assert invoke_as_main("cloudlab", "testbed", str(CLOUDLAB), "-o", str(plain)).exit_code == 0
    out = tmp_path / "testbed.yaml"
    result = invoke_as_main("cloudlab", "testbed", str(manifest), "-o", str(out))
    assert result.exit_code == 0, result.output
    # The same testbed as from a plainly named copy: the name changed nothing but the comment.
    assert yaml.safe_load(out.read_text()) == yaml.safe_load(plain.read_text())
    assert load_testbed(out) == load_testbed(plain)


@pytest.mark.parametrize("brk", BREAKS)
def test_a_slurm_job_id_with_line_breaks_stays_in_the_comment(tmp_path: Path, brk: str) -> None:
    env = {"SLURM_JOB_NODELIST": "gpu[1-2]", "SLURM_JOB_ID": f"42{brk}{PAYLOAD}"}
    out = tmp_path / "testbed.yaml"
    result = invoke_as_main("testbed", "from-slurm", "-o", str(out), env=env)
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(out.read_text())
    assert set(data) <= {"name", "description", "nodes", "launcher"}, data
    assert data["launcher"] == {"kind": "srun"}
    load_testbed(out)


def test_an_out_path_with_a_line_break_stays_in_the_comment(tmp_path: Path) -> None:
    env = {"SLURM_JOB_NODELIST": "gpu1", "SLURM_JOB_ID": "7"}
    out = tmp_path / "a\npaths: {work_dir: x}\n.yaml"
    result = invoke_as_main("testbed", "from-slurm", "-o", str(out), env=env)
    assert result.exit_code == 0, result.output
    assert "paths" not in yaml.safe_load(out.read_text())


def test_an_out_path_with_markup_and_escapes_is_shown_as_written(tmp_path: Path) -> None:
    env = {"SLURM_JOB_NODELIST": "gpu1", "SLURM_JOB_ID": "7"}
    out = tmp_path / "[red]x[/red]\x1b[2J.yaml"
    result = invoke_as_main("testbed", "from-slurm", "-o", str(out), env=env)
    assert result.exit_code == 0, result.output
    assert "[red]x[/red]\\e[2J.yaml" in result.stderr and "\x1b" not in result.stderr
    result = invoke_as_main("cloudlab", "testbed", str(CLOUDLAB), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "[red]x[/red]\\e[2J.yaml" in result.stderr and "\x1b" not in result.stderr
