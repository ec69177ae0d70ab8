"""`r2bench parse` and `r2bench import` command functions, on the real captures."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from r2bench.commands.parse import parse_command
from tests.support.captures import DATA


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
