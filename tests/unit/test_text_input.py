"""One bounded reader for every log: any line end, UTF-8 or UTF-16, gzip/bzip2/xz read, other
forms refused by name, overlong lines cut (counted, located) with the lines after them read.

The logs are made here: a complete nccl-tests all_reduce run of three sizes."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
from pathlib import Path

import pytest

from r2bench.analysis.importer import import_dir
from r2bench.analysis.parseview import read_path
from r2bench.config.errors import ConfigError
from r2bench.config.source import load_data
from r2bench.safeio import InputRefused
from r2bench.textinput import NotText, TextFile, open_text

HEADER = """\
# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   2234 on         vm device  0 [0000:00:06] NVIDIA H200
#  Rank  1 Group  0 Pid   2235 on         vm device  1 [0000:00:07] NVIDIA H200
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
"""
FOOTER = """\
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 2.83
#
# Collective test concluded: all_reduce_perf
#
"""
SIZES = (1048576, 2097152, 4194304)


def row(size: int) -> str:
    """One result row that fits itself (algbw = size / time)."""
    t = size / 2.83e3
    return (
        f"     {size}       {size // 4}     float     sum      -1   {t:.2f}    2.83    2.83"
        f"       0   {t:.2f}    2.83    2.83       0\n"
    )


def log(between: str = "") -> str:
    """The complete run; `between` goes after the first row."""
    rows = [row(s) for s in SIZES]
    return HEADER + rows[0] + between + "".join(rows[1:]) + FOOTER


def _sizes(path: Path) -> list[int]:
    (run,) = read_path(path).runs
    assert run.outcome.status.value == "ok", run.outcome.reason
    return sorted({r.size_bytes for r in run.parsed.rows})


@pytest.mark.parametrize("end", ["\r", "\r\n", "\n"], ids=["CR", "CRLF", "LF"])
def test_every_line_end_reads_the_same_complete_run(tmp_path: Path, end: str) -> None:
    path = tmp_path / "all_reduce_perf.txt"
    path.write_bytes(log().replace("\n", end).encode())
    assert _sizes(path) == list(SIZES)


@pytest.mark.parametrize(
    "encoded",
    [
        lambda t: t.encode("utf-16"),  # with its BOM, as PowerShell's `>` writes
        lambda t: t.encode("utf-16-le"),
        lambda t: t.encode("utf-16-be"),
        lambda t: b"\xef\xbb\xbf" + t.encode(),
    ],
    ids=["utf-16-bom", "utf-16-le", "utf-16-be", "utf-8-bom"],
)
def test_utf16_and_bom_logs_are_read(tmp_path: Path, encoded: object) -> None:
    path = tmp_path / "all_reduce_perf.txt"
    path.write_bytes(encoded(log()))  # type: ignore[operator]
    assert _sizes(path) == list(SIZES)


@pytest.mark.parametrize(
    ("suffix", "pack"), [(".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress)]
)
def test_compressed_logs_are_read(tmp_path: Path, suffix: str, pack: object) -> None:
    path = tmp_path / f"all_reduce_perf.txt{suffix}"
    path.write_bytes(pack(log().encode()))  # type: ignore[operator]
    assert _sizes(path) == list(SIZES)
    with open_text(path) as handle:
        handle.read()
        assert handle.stats.compression in ("gzip", "bzip2", "xz")


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (b"\x28\xb5\x2f\xfd" + b"\0" * 64, "zstd"),
        (b"PK\x03\x04" + b"\0" * 64, "zip"),
        ("# nccl-tests\n".encode("utf-32"), "UTF-32"),
        ("# nccl-tests version 2.19.6\n".encode("utf-32-le"), "UTF-32"),
    ],
)
def test_forms_not_read_are_refused_by_name(tmp_path: Path, data: bytes, named: str) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(data)
    with pytest.raises(NotText, match=named) as refused:
        read_path(path)
    assert isinstance(refused.value, InputRefused)
    assert str(path) in str(refused.value)


def test_broken_gzip_keeps_the_lines_before_the_break(tmp_path: Path) -> None:
    path = tmp_path / "all_reduce_perf.txt.gz"
    packed = gzip.compress(log().encode() * 200)
    path.write_bytes(packed[: len(packed) // 2])
    runs = read_path(path).runs
    assert len(runs) > 10 and all(len(run.parsed.rows) == 6 for run in runs[:10])
    assert any("gzip data breaks off" in w for w in runs[-1].parsed.warnings)


def test_an_overlong_line_is_cut_counted_and_the_rest_read(tmp_path: Path) -> None:
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(log(between="x" * 300_000 + "\n"))
    assert _sizes(path) == list(SIZES)
    (run,) = read_path(path).runs
    cut = [w for w in run.parsed.warnings if "longer than" in w]
    assert cut and cut[0].startswith("line 13:"), run.parsed.warnings


def test_cut_lines_keep_memory_flat_per_line() -> None:
    data = b"a" * 100 + b"\n" + b"b" * 5000 + b"\rnext\n" + b"c" * 70
    reader = TextFile(io.BytesIO(data), "x", line_limit=64)
    lines = list(reader)
    assert [len(x) for x in lines] == [65, 65, 5, 64]
    assert reader.stats.cut_lines == 3
    assert reader.stats.first_cut == 1
    assert "3 such lines" in reader.stats.warnings()[0]


def test_a_cr_split_across_chunks_is_one_line_end() -> None:
    class Chunky(io.RawIOBase):
        def __init__(self) -> None:
            self.parts = [b"one\r", b"\ntwo\r", b"three\n"]

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
            if not self.parts:
                return 0
            part = self.parts.pop(0)
            buffer[: len(part)] = part
            return len(part)

    reader = TextFile(io.BufferedReader(Chunky()), "x")
    assert list(reader) == [b"one\n", b"two\n", b"three\n"]


def test_import_reads_compressed_and_utf16_logs_and_names_archives(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "all_reduce_perf.a.txt.gz").write_bytes(gzip.compress(log().encode()))
    (logs / "all_reduce_perf.b.log.xz").write_bytes(lzma.compress(log().encode()))
    (logs / "all_reduce_perf.c.txt").write_bytes(log().encode("utf-16"))
    (logs / "more.zst").write_bytes(b"\x28\xb5\x2f\xfd" + b"\0" * 16)
    report = import_dir(logs, tmp_path / "results", "s")
    assert len(report.imported) == 3
    assert [why for _, why in report.skipped] == [
        "a zstd archive: not read (unpack it, then import the folder)"
    ]
    assert sorted(report.scenarios.values()) == ["a", "b", "c"]
    for run_id, _ in report.imported:
        stdout = report.sweep_dir / run_id / "stdout.txt"
        assert stdout.read_text().startswith("# nccl-tests version 2.19.6")


@pytest.mark.parametrize(
    "encoded",
    [lambda t: t.encode("utf-16"), lambda t: t.replace("\n", "\r").encode()],
    ids=["utf-16", "CR"],
)
def test_a_config_in_utf16_or_with_cr_line_ends_is_read(tmp_path: Path, encoded: object) -> None:
    path = tmp_path / "data.yaml"
    path.write_bytes(encoded("name: quick\nsizes: [1, 2]\n"))  # type: ignore[operator]
    assert load_data(path) == {"name": "quick", "sizes": [1, 2]}


def test_a_config_in_utf32_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "data.yaml"
    path.write_bytes("name: quick\n".encode("utf-32"))
    with pytest.raises(ConfigError, match="UTF-32"):
        load_data(path)
