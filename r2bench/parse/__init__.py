"""Readers of tool output: nccl-tests, NCCL's log lines, the verification workload,
R-2CCL's artifact logs, build logs, NIC counters, NCCL RAS. Pure: each reads text and
returns the models of `parse.models`; nothing here knows a run folder.
"""
