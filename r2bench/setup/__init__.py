"""`r2bench setup`: fetch and build every component an experiment needs on every node, cached.

Pure parts: `cache` (keys and stamps), `failures` (what went wrong in a build log), `libcheck`
(which NCCL a benchmark really loaded), `probe` (parsing what a node has), `steps` (the per-node
build commands, rendered by the planner). Effectful parts: `source` (local trees on the
controller) and `builder` (runs everything through the node layer). The command is
`r2bench.commands.setup`.
"""
