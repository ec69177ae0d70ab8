"""The report renders in a real browser, offline: headless Chromium on a file:// URL.

Needs Debian's `chromium` (/usr/bin/chromium; CI installs it with apt); skipped without it.
Name resolution is disabled in the browser, so a figure that needed the network would not draw.
"""

from __future__ import annotations

import json
import re
import runpy
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from r2bench.report.html import build_report
from r2bench.tables.build import rebuild
from tests.support import paths
from tests.support.quickstart_capture import copy_quickstart
from tests.support.sample_sweep import SampleConfig, write_sample_sweep

DATA = paths.DATA / "nccl-tests"
CHECK = paths.REPO / "scripts" / "report-browser-check.py"
CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)
# The browser flags scripts/report-browser-check.py uses (one list for the script and the tests).
FLAGS = [*runpy.run_path(str(CHECK))["FLAGS"]]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


def chromium(profile: Path, *args: str) -> str:
    proc = subprocess.run(
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos : pos + 4]), data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert (depth, interlace) == (8, 0) and colour in (2, 6)
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        unfilter(kind, line, prev, bpp)
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def unfilter(kind: int, line: bytearray, prev: bytearray, bpp: int) -> None:
    """Undo one PNG scanline filter in place."""
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        up = prev[i]
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + up) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + (left + up) // 2) & 0xFF
        elif kind == 4:
            upleft = prev[i - bpp] if i >= bpp else 0
            p = left + up - upleft
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - upleft)
            pred = left if pa <= pb and pa <= pc else up if pb <= pc else upleft
            line[i] = (line[i] + pred) & 0xFF


def distinct_colours(rows: list[bytes], bpp: int = 3, step: int = 3) -> int:
    colours = set()
    for row in rows[::step]:
        for x in range(0, len(row) - bpp + 1, bpp * step):
            colours.add(row[x : x + 3])
    return len(colours)


@pytest.fixture(scope="module")
def report_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    results = tmp_path_factory.mktemp("results")
    cfg = SampleConfig(modes=(None, "0", "1", "2"), repeats=2, sizes=30, iterations=20)
    store = write_sample_sweep(results, DATA, cfg)
    out = results / "report.html"
    figures = build_report(store.sweep_dir, rebuild(store.sweep_dir), out)
    return out, [f.id for f in figures if f.spec["data"]]


def test_plotly_draws_every_figure_offline(
    report_file: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, figure_ids = report_file
    dom = chromium(tmp_path / "profile", "--dump-dom", path.as_uri())
    assert len(figure_ids) >= 5
    for fig_id in figure_ids:
        div = re.search(rf'<div id="plot-{re.escape(fig_id)}"[^>]*>', dom)
        assert div and "js-plotly-plot" in div.group(0), fig_id
    assert dom.count('class="main-svg"') >= len(figure_ids)
    assert dom.count("js-plotly-plot") >= len(figure_ids)
    assert 'class="shapelayer"' in dom  # the fault windows


def test_screenshot_is_not_blank(report_file: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, _ = report_file
    shot = tmp_path / "report.png"
    chromium(tmp_path / "profile", f"--screenshot={shot}", "--window-size=1400,3000", path.as_uri())
    data = shot.read_bytes()
    assert len(data) > 50_000
    width, height, rows = png_pixels(data)
    assert (width, height) == (1400, 3000)
    bpp = len(rows[0]) // width
    assert distinct_colours(rows, bpp) > 200  # lines, markers, shading, text: not a blank page


def test_hostile_strings_stay_text_in_the_browser(tmp_path: Path) -> None:
    host = "<script>alert(1)</script>"
    cfg = SampleConfig(modes=("1",), repeats=1, sizes=20, iterations=4, hostname=host)
    store = write_sample_sweep(tmp_path / "results", DATA, cfg)
    out = tmp_path / "report.html"
    build_report(store.sweep_dir, rebuild(store.sweep_dir), out)
    dom = chromium(tmp_path / "profile", "--dump-dom", out.as_uri())
    assert "<script>alert(1)</script>" not in dom  # no such element was created
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom  # the hostname is shown as text
    assert dom.count("js-plotly-plot") >= 3


def test_mixed_import_report_draws_in_the_browser(tmp_path: Path) -> None:
    from r2bench.analysis.importer import import_dir

    import_dir(DATA, tmp_path / "results", "mixed")
    sweep = tmp_path / "results" / "mixed"
    out = sweep / "report.html"
    figures = build_report(sweep, rebuild(sweep), out)
    drawn = [f.id for f in figures if f.spec["data"]]
    assert len([i for i in drawn if i.startswith("busbw")]) == 6  # one per collective
    dom = chromium(tmp_path / "profile", "--dump-dom", out.as_uri())
    for fig_id in drawn:
        div = re.search(rf'<div id="plot-{re.escape(fig_id)}"[^>]*>', dom)
        assert div and "js-plotly-plot" in div.group(0), fig_id
    assert "No valid baseline" in dom
    assert 'class="legendtext"' in dom


@pytest.fixture(scope="module")
def quickstart_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of the captured quickstart sweep (tests/data/quickstart-sweep/)."""
    sweep = copy_quickstart(tmp_path_factory.mktemp("qs"))
    out = sweep / "report.html"
    build_report(sweep, rebuild(sweep), out)
    return out


def _check(page: Path, *args: str) -> tuple[int, dict[str, object]]:
    proc = subprocess.run(
        [sys.executable, str(CHECK), str(page), *args],
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_quickstart_report_reads_right_at_1400_px(quickstart_page: Path, tmp_path: Path) -> None:
    """The answer is on the first screen, nothing runs off the side, every figure draws."""
    shot = tmp_path / "first-screen.png"
    code, found = _check(quickstart_page, "--screenshot", str(shot))
    assert code == 0, found["problems"]
    assert isinstance(found["summary_top"], float) and found["summary_top"] < 1000
    assert isinstance(found["summary_bottom"], float) and found["summary_bottom"] < 1000
    assert found["scroll_width"] <= 1400 and found["too_wide"] == []
    assert found["plots"] == found["drawn"] and int(str(found["plots"])) >= 10
    width, height, rows = png_pixels(shot.read_bytes())
    assert (width, height) == (1400, 1000)
    assert distinct_colours(rows, len(rows[0]) // width) > 20  # the table's tints, not blank


def test_the_browser_check_names_what_does_not_hold(quickstart_page: Path) -> None:
    """A window too small for the summary and too narrow for its table: both are named."""
    code, found = _check(quickstart_page, "--width", "600", "--height", "120")
    assert code == 1
    problems = " ".join(str(p) for p in found["problems"])  # type: ignore[attr-defined]
    assert "below the first screen (120)" in problems
    assert "px wide in a 600 px window" in problems
