"""Workloads run by r2bench.

``ring_allreduce`` is an emulated resilient collective (a ring AllReduce over striped
multi-NIC TCP, with R2CCL-like failover) for testing the harness without GPUs. It is an
emulator of the system under test, not NCCL; its output follows nccl-tests' format.
"""
