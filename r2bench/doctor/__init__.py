"""`r2bench doctor`: is the testbed ready for a sweep? One table, and how to fix what is not."""

from r2bench.doctor.checks import CheckResult, Status, run_checks
from r2bench.doctor.run import diagnose

__all__ = ["CheckResult", "Status", "diagnose", "run_checks"]
