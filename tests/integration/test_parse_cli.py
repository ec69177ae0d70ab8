"""`r2bench parse` and `r2bench import` command functions, on the real captures.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_parse_cli.py (its pure tests).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from r2bench.commands.parse import parse_command
from tests.support import paths
from tests.support.captures import DATA

CLI = [sys.executable, "-c", "from r2bench.cli import main; main()"]


def test_huge_log_is_streamed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """100 MB of NCCL INFO noise around a real output: parsed, nothing kept in memory."""
    path = tmp_path / "huge.txt"
    noise = b"vm:2537:2554 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/Socket/0 " * 1 + b"\n"
    block = noise * (1 << 14)
    with path.open("wb") as out:
        out.write((DATA / "all_reduce_perf.socket.c1.txt").read_bytes())
        while out.tell() < 100 * (1 << 20):
            out.write(block)
    assert os.path.getsize(path) >= 100 << 20
    assert parse_command([path], as_json=True) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["rows"]) == 24 and doc["outcome"] == "ok"


def test_a_deeply_nested_json_twin_is_a_located_refusal(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    proc = subprocess.run([*CLI, "parse", str(deep)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "nested too deeply" in proc.stderr


def test_an_oversized_json_twin_is_never_read_nor_copied(tmp_path: Path) -> None:
    """A 1 GiB -J twin used to cost 2.1 GB at import and be copied into the sweep; its text
    output is imported alone (the twin's size is checked before it is parsed)."""
    import shutil

    logs = tmp_path / "logs"
    logs.mkdir()
    text = paths.DATA / "nccl-tests" / "all_reduce_perf.p2p.c1.txt"
    shutil.copy(text, logs / "run.txt")
    with (logs / "run.json").open("wb") as twin:
        twin.truncate(1 << 30)  # sparse: a size, no bytes on disk
    results = tmp_path / "results"
    proc = subprocess.run(
        [*CLI, "import", str(logs), "--results", str(results)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 imported" in proc.stdout
    (run,) = [p for p in results.glob("*/*") if (p / "COMPLETE").exists()]
    assert not (run / "result.json").exists()


def test_parse_of_stdin_streams_it(tmp_path: Path) -> None:
    """`parse -` reads stdin in chunks (spooled to a file), as it reads a file: the same result."""
    text = paths.DATA / "nccl-tests" / "all_reduce_perf.p2p.c1.txt"
    from_file = subprocess.run(
        [*CLI, "parse", "--json", str(text)], capture_output=True, timeout=60
    )
    from_stdin = subprocess.run(
        [*CLI, "parse", "--json", "-"], input=text.read_bytes(), capture_output=True, timeout=60
    )
    assert from_stdin.returncode == from_file.returncode == 0, from_stdin.stderr
    rows = [json.loads(line)["rows"] for line in (from_file.stdout, from_stdin.stdout)]
    assert rows[0] == rows[1] and rows[0]
