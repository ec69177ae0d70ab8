"""`r2bench inject KIND NODE NIC -t TESTBED.yaml`: inject one fault by hand, with the same
interlocks, tag and lease as a fault of an experiment file (`handfault.py`, shared with
`revert`)."""

from __future__ import annotations

from r2bench.commands.handfault import fault_by_hand

command = fault_by_hand("inject")
