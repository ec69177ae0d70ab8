#!/usr/bin/env python3
"""Check a report page in headless Chromium at a given window size (default 1400 x 1000).

    python3 scripts/report-browser-check.py results/quickstart/report.html [--screenshot OUT.png]

Loads a copy of the page with a probe script added, after the page's own scripts ran, and
prints what it measured as JSON: where the summary table starts (its top must be within the
first screen), whether the page is wider than the window (horizontal overflow, and the widest
elements that cause it), and how many figures plotly drew of those the page holds. Exit 0
when all holds, 1 when something does not (each problem is named), 2 when Chromium is
missing or fails. Offline: name resolution is disabled, so a figure that needed the network
would not draw.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--virtual-time-budget=8000",
)
PROBE = """
<script>
window.addEventListener('load', function () { setTimeout(function () {
  var table = document.getElementById('summary-table');
  var box = table ? table.getBoundingClientRect() : null;
  var plots = document.querySelectorAll('.r2-plot'), drawn = 0;
  plots.forEach(function (p) {
    if (p.classList.contains('js-plotly-plot') && p.querySelector('.main-svg')) { drawn++; }
  });
  var width = window.innerWidth, wide = [];
  document.querySelectorAll('body *').forEach(function (el) {
    var r = el.getBoundingClientRect();
    if (r.right > width + 1) { wide.push([el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
      + (el.className && el.className.baseVal === undefined ? '.' + el.className : ''),
      Math.round(r.right)]); }
  });
  var out = {summary_top: box ? box.top + window.scrollY : null,
             summary_bottom: box ? box.bottom + window.scrollY : null,
             scroll_width: document.documentElement.scrollWidth, viewport_width: width,
             page_height: document.documentElement.scrollHeight,
             plots: plots.length, drawn: drawn, too_wide: wide.slice(0, 5)};
  var pre = document.createElement('pre');
  pre.id = 'r2-probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 300); });
</script>
"""
PROBE_RE = re.compile(r'<pre id="r2-probe">(.*?)</pre>', re.S)


def chromium(profile: Path, width: int, height: int, *args: str) -> str:
    """Run headless Chromium with a fresh profile; its stdout (raises on failure)."""
    proc = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr[-1500:]}")
    return proc.stdout


def measure(page: Path, width: int, height: int) -> dict[str, object]:
    """The probe's measurements of `page` at `width` x `height`."""
    with tempfile.TemporaryDirectory(prefix="r2-browser-") as tmp:
        probed = Path(tmp) / page.name
        text = page.read_text()
        at = text.rindex("</body>")
        probed.write_text(text[:at] + PROBE + text[at:])
        dom = chromium(Path(tmp) / "profile", width, height, "--dump-dom", probed.as_uri())
    found = PROBE_RE.search(dom)
    if not found:
        raise RuntimeError("the probe did not run: the page's scripts failed or never loaded")
    result: dict[str, object] = json.loads(found.group(1).replace("&quot;", '"'))
    return result


def problems(found: dict[str, object], height: int) -> list[str]:
    """What does not hold: the summary within the first screen, no horizontal overflow, every
    figure drawn."""
    out = []
    top = found.get("summary_top")
    if not isinstance(top, (int, float)):
        out.append("no summary table (#summary-table) on the page")
    elif top >= height:
        out.append(f"the summary table starts at {top:.0f} px, below the first screen ({height})")
    if int(str(found["scroll_width"])) > int(str(found["viewport_width"])):
        out.append(
            f"the page is {found['scroll_width']} px wide in a {found['viewport_width']} px "
            f"window; widest: {found['too_wide']}"
        )
    if found["drawn"] != found["plots"]:
        out.append(f"plotly drew {found['drawn']} of {found['plots']} figures")
    return out


def main() -> int:
    """Check one page; print the measurements and any problem."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("page", type=Path)
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=1000)
    parser.add_argument("--screenshot", type=Path, help="also write the first screen as PNG")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        print(f"{CHROMIUM} is missing: apt-get install chromium", file=sys.stderr)
        return 2
    try:
        found = measure(args.page.resolve(), args.width, args.height)
        if args.screenshot:
            with tempfile.TemporaryDirectory(prefix="r2-shot-") as tmp:
                shot = f"--screenshot={args.screenshot.resolve()}"
                chromium(Path(tmp), args.width, args.height, shot, args.page.resolve().as_uri())
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"{args.page}: {exc}", file=sys.stderr)
        return 2
    found["problems"] = problems(found, args.height)
    print(json.dumps(found, indent=1))
    return 1 if found["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
