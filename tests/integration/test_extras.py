"""Without the `report` extra (pandas, pyarrow, plotly): plan, doctor, setup and sweep still
import and work; tables and the report are skipped with a note naming the extra."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support import paths

ROOT = paths.REPO

SCRIPT = textwrap.dedent(
    """
    import io, sys
    for name in ("pandas", "pyarrow", "plotly"):
        sys.modules[name] = None  # as if not installed
    from pathlib import Path
    from rich.console import Console
    from typer.testing import CliRunner

    import r2bench.commands.doctor, r2bench.commands.setup, r2bench.commands.sweep as sweep
    from r2bench.cli import app
    from r2bench.extras import MissingExtra, missing_report_packages
    from r2bench.analysis.importer import import_dir
    from r2bench.runfolder.store import RunStore

    root, tmp = Path(sys.argv[1]), Path(sys.argv[2])
    assert missing_report_packages() == ["pandas", "pyarrow", "plotly"]
    runner = CliRunner()
    plan = runner.invoke(app, ["plan", str(root / "experiments/quickstart.yaml"), "-t",
                               str(root / "experiments/testbeds/virtual-example.yaml"), "-c"])
    assert plan.exit_code == 0, plan.output
    assert runner.invoke(app, ["doctor", "--help"]).exit_code == 0
    logs = root / "tests/data/nccl-tests/v2.19.6"
    report = import_dir(logs, tmp, "noextra")
    assert report.imported
    out = io.StringIO()
    sweep.TablesAndReport().write(RunStore.at(tmp / "noextra"), Console(file=out, width=300))
    text = out.getvalue()
    assert "tables or report not written" in text and "pip install pandas pyarrow plotly" in text, text
    assert not (tmp / "noextra" / "report.html").exists()
    rep = runner.invoke(app, ["report", str(tmp / "noextra")])
    assert isinstance(rep.exception, MissingExtra), rep.output
    assert not any(m in sys.modules and sys.modules[m] for m in ("pandas", "pyarrow", "plotly"))
    print("ok")
    """
)


def test_plan_doctor_setup_sweep_work_without_the_report_extra(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(ROOT), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("ok")
