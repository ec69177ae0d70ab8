"""Log lines as people paste them (markdown, chat quotes, autolinks, torchrun rank tags) read as
the plain lines (tests/data/logs-round3/ and tests/data/public/, with their sources)."""

from __future__ import annotations

import pytest

from r2bench.analysis.outcome import classify
from r2bench.parse.events import parse_events
from r2bench.parse.logprefix import LineCleaner, strip_markup
from r2bench.parse.models import OutcomeStatus
from r2bench.parse.nccltests.text import parse_text
from tests.support import paths

DATA = paths.DATA
PUBLIC = DATA / "public"
ROUND3 = DATA / "logs-round3"


# ------------------------------------------------------------------ markdown and chat artefacts


def test_autolinked_source_locations_are_read() -> None:
    plain = parse_events((PUBLIC / "nccl-tests-360-a.txt").read_text())
    linked_text = (ROUND3 / "autolinked-nccl-tests-360-a.txt").read_text()
    linked = parse_events(linked_text)
    assert [(e.kind, e.line, e.message) for e in linked] == [
        (e.kind, e.line, e.message) for e in plain
    ]
    assert linked[0].details["source"] == "misc/socket.cc:502"
    outcome = classify(None, parsed=parse_text(linked_text), events=linked)
    assert outcome.status is OutcomeStatus.CRASHED and outcome.evidence[0].line == 40


@pytest.mark.parametrize(
    ("pasted", "line"),
    [
        ("```bash", ""),
        ("  ~~~", ""),
        ("> # nThread 1 nGpus 1", "# nThread 1 nGpus 1"),
        ("> > vm:1:2 [0] NCCL WARN x", "vm:1:2 [0] NCCL WARN x"),
        (
            "n:1:2 [0] transport/[p2p.cc:783](https://p2p.cc:783/) NCCL WARN x",
            "n:1:2 [0] transport/p2p.cc:783 NCCL WARN x",
        ),
        ("\\# Avg bus bandwidth : 1.5", "# Avg bus bandwidth : 1.5"),
        ("./build/all\\_reduce\\_perf -g 8", "./build/all_reduce_perf -g 8"),
        (
            "  8  2  float  sum  -1  1.0  0.00  0.00  0  1.0  0.00  0.00  0 ```",
            "  8  2  float  sum  -1  1.0  0.00  0.00  0  1.0  0.00  0.00  0 ",
        ),
        ("vm:1:2 [0] NCCL INFO 0 -> 1 via P2P/IPC", "vm:1:2 [0] NCCL INFO 0 -> 1 via P2P/IPC"),
    ],
)
def test_markup_is_stripped(pasted: str, line: str) -> None:
    assert strip_markup(pasted) == line


def test_a_quoted_paste_reads_as_the_plain_one() -> None:
    text = (DATA / "nccl-tests" / "all_reduce_perf.socket.c1.txt").read_text()
    quoted = "".join(f"> {ln}\n" for ln in text.splitlines())
    fenced = "```\n" + text + "```\n"
    plain = parse_text(text)
    for pasted in (quoted, fenced):
        p = parse_text(pasted)
        assert [r.busbw_gbps for r in p.rows] == [r.busbw_gbps for r in plain.rows]
        assert p.concluded and p.collective == "all_reduce"


def test_torchrun_rank_tags_are_prefixes() -> None:
    cleaner = LineCleaner()
    cleaner.decide([])
    text, origin, _ = cleaner.split(
        "[rank3]:[E1206 18:44:12.7 ProcessGroupNCCL.cpp:607] [Rank 3] x"
    )
    assert origin == "3" and text.startswith("[E1206")
