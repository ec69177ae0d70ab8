"""r2bench: fault-injection and benchmarking harness for R2CCL and NCCL."""

__version__ = "0.1.0"


def version_line() -> str:
    """What `r2bench --version` prints."""
    return f"r2bench {__version__}"
