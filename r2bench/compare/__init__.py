"""`r2bench compare`: noise-aware regression verdicts between two sweeps, or a sweep and a
stored reference (ReFrame-style YAML, kept as data).

- `samples`: cells (collective x size x library/mode x scenario x ...) and their samples, per run
- `stats`: the seeded hierarchical bootstrap and the decision rule
- `policy`: minimum effects per metric, rules, xfail entries
- `reference`: the reference file (read, write from a sweep)
- `verdict`: the comparison itself; `explain`: the gate's verdict in words (why, and what
  gets a decision); `terminal`: the rich table, fitted to the width; `output`: markdown,
  JUnit XML and the row texts they share
- `provenance`: whether both sides share testbed, nccl-tests and library versions

The command itself (options, printing, exit codes) is `r2bench.commands.compare`.
"""
