"""r2bench: fault-injection and benchmarking harness for R2CCL and NCCL."""

__version__ = "0.1.0"
