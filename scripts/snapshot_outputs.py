"""Snapshot what r2bench makes of kept sweeps, to show that a change leaves it unchanged.

For each sweep folder it rebuilds, on a copy (the kept folder is never touched), the tables
and the HTML report with the r2bench this interpreter imports, and writes into OUT/<name>/:

- every table as its CSV file, byte for byte;
- the report with what legitimately differs between two builds masked: plot positions
  (the numbers inside each embedded figure's JSON), element ids, the build time and the
  temporary folder it was built in;
- `compare` of the sweep against itself (`--all`, markdown and exit code), and, with
  `--compare REF:POLICY:SWEEP`, of a reference against a sweep under its policy.

Run it once on the old code and once on the new one, then `diff -r OLD NEW`:

    PYTHONPATH=/path/to/old python3 scripts/snapshot_outputs.py SWEEP... --out /tmp/old
    python3 scripts/snapshot_outputs.py SWEEP... --out /tmp/new && diff -r /tmp/old /tmp/new
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Keys whose values are figure coordinates or layout: masked as a whole list/number run.
_PLOT_JSON = re.compile(r'(Plotly\.newPlot\(\s*"[^"]*",\s*)(.*?)(\)\s*[;}])', re.S)
_IDS = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_BUILT_AT = re.compile(r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?")
_MAIN = "import sys; from r2bench.cli import main; sys.argv[0] = 'r2bench'; sys.exit(main())"
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")


def _r2bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _MAIN, *args], capture_output=True, text=True, check=False
    )


def _mask_report(html: str, scratch: Path) -> str:
    """The report with plot numbers, ids, build times and the copy's folder replaced by
    placeholders."""
    html = html.replace(str(scratch), "<scratch>")
    html = _PLOT_JSON.sub(lambda m: m.group(1) + _NUMBER.sub("#", m.group(2)) + m.group(3), html)
    html = _IDS.sub("<id>", html)
    return _BUILT_AT.sub("<time>", html)


def _fresh_copy(sweep: Path, into: Path) -> Path:
    copy = into / sweep.name
    shutil.copytree(sweep, copy, symlinks=True)
    for derived in ("tables", "report.html"):
        target = copy / derived
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    for cache in copy.rglob(".rows*"):
        shutil.rmtree(cache) if cache.is_dir() else cache.unlink()
    return copy


def _compare(out: Path, name: str, *args: str) -> None:
    markdown = out / f"{name}.md"
    result = _r2bench("compare", *args, "--all", "--markdown", str(markdown))
    (out / f"{name}.exit").write_text(f"{result.returncode}\n")


def snapshot(sweep: Path, out: Path, scratch: Path) -> None:
    """Write the tables, masked report and self-compare of one sweep into out/<sweep name>."""
    copy = _fresh_copy(sweep, scratch)
    result = _r2bench("report", str(copy))
    target = out / sweep.name
    (target / "tables").mkdir(parents=True)
    (target / "report.exit").write_text(f"{result.returncode}\n")
    for table in sorted((copy / "tables").glob("*.csv")):
        shutil.copyfile(table, target / "tables" / table.name)
    report = copy / "report.html"
    if report.exists():
        (target / "report.masked.html").write_text(_mask_report(report.read_text(), scratch))
    _compare(target, "compare-self", str(copy), str(copy))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweeps", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compare", action="append", default=[], metavar="REF:POLICY:SWEEP")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=False)
    with tempfile.TemporaryDirectory() as tmp:
        for sweep in args.sweeps:
            print(f"snapshot: {sweep}", flush=True)
            snapshot(sweep, args.out, Path(tmp))
        for number, triple in enumerate(args.compare):
            ref, policy, sweep = triple.split(":")
            copy = _fresh_copy(Path(sweep), Path(tmp) / f"compare{number}")
            _compare(args.out, f"compare-{number}", ref, str(copy), "--policy", policy)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
