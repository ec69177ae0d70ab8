"""`r2bench revert KIND NODE NIC -t TESTBED.yaml`: revert one fault by hand, with the same
interlocks, tag and lease as a fault of an experiment file (`handfault.py`, shared with
`inject`)."""

from __future__ import annotations

from r2bench.commands.handfault import fault_by_hand

command = fault_by_hand("revert")
