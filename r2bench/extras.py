"""Optional parts of r2bench and the packages they need.

Tables (Parquet) and the HTML report need the `report` extra (`pip install 'r2bench[report]'`:
pandas, pyarrow, plotly). Planning, doctor, setup and sweeps do not: a sweep without it runs
every run, records it, and says that no tables or report were written and why.
"""

from __future__ import annotations

import importlib.util

from r2bench.errors import EnvironmentFailure

REPORT_PACKAGES = ("pandas", "pyarrow", "plotly")


class MissingExtra(EnvironmentFailure, ImportError, ValueError):
    """An optional part was used without the packages it needs (a ValueError too, so callers
    that report bad input as one line also report this one)."""


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a blocked or broken package
        return False


def missing_report_packages() -> list[str]:
    """The packages of the `report` extra that cannot be imported."""
    return [name for name in REPORT_PACKAGES if not _importable(name)]


def require_report_extra(what: str) -> None:
    """Raise MissingExtra naming `what` and the missing packages, unless all are there."""
    missing = missing_report_packages()
    if missing:
        # No brackets in the text: callers may print it as rich markup.
        raise MissingExtra(
            f"{what} need{'s' if not what.endswith('s') else ''} {', '.join(missing)}, r2bench's "
            f"`report` extra (pip install {' '.join(missing)})"
        )
