"""The run-folder layout: the names of a run folder's files and its format version.

Layout of a run folder (written by `runfolder.store`, read by `runfolder.runmodel`):

```
spec.json          the RunSpec (with its run_id) and the folder's `format` (RUN_FORMAT)
provenance.json    versions, commits, hosts, environment (secrets dropped), re-run command
stdout.txt         the launcher's stdout (nccl-tests text output)
stderr.txt         the launcher's stderr (NCCL logs, mpirun messages)
stdout.times       (sweeps) the launch node's epoch time each stdout line was written, one per
                   line of stdout.txt ($EPOCHREALTIME there: microseconds)
stderr.times       (sweeps) the same for stderr.txt
result.json        nccl-tests -J output, when there is one
node/<node>/...    files collected from the nodes (logs, counters, clocks)
events.jsonl       typed log events (parse.models.Event), one per line
faults.jsonl       fault events (FaultEvent): inject/revert/verify with node-side timestamps
outcome.json       parse.models.Outcome plus exit code and start/end times
attempts.jsonl     (restart, shrink, ... runs) each start of the job: launch and end on the
                   controller clock, exit code (runfolder.attempts.AttemptEvent); a restarted job's
                   outputs follow one another in stdout.txt/stderr.txt
COMPLETE           the marker: the run folder is whole (written last)
```

spec.json's `format` says which layout the folder was written in, so that an older r2bench
refuses a folder it would misread instead of reporting wrong numbers (`format_problem`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

RUN_FORMAT = 1
"""The run-folder format this r2bench writes (spec.json's `format`) and the newest it reads.
Bump it when a change would make an older r2bench misread a folder: a file or field renamed,
removed or given another meaning, unit or type. Adding a file or a field that older readers may
ignore does not bump it. Folders written before the field existed have none: format 0, the
same layout as format 1."""
FORMAT_FIELD = "format"
SPEC = "spec.json"
PROVENANCE = "provenance.json"
STDOUT = "stdout.txt"
STDERR = "stderr.txt"
STDOUT_TIMES = "stdout.times"
STDERR_TIMES = "stderr.times"
RESULT_JSON = "result.json"
EVENTS = "events.jsonl"
FAULTS = "faults.jsonl"
OUTCOME = "outcome.json"
ATTEMPTS = "attempts.jsonl"
COMPLETE = "COMPLETE"
NODE_DIR = "node"
TABLES_DIR = "tables"


def run_format(spec: dict[str, Any]) -> object:
    """The format a spec.json says its folder is in: 0 when it names none (written before the
    field existed), else its value as written (check it with `format_problem`)."""
    return spec.get(FORMAT_FIELD, 0)


def format_problem(path: Path, spec: dict[str, Any]) -> str | None:
    """Why a run folder whose spec.json (at `path`) holds `spec` cannot be read by this
    r2bench: its format is newer than RUN_FORMAT, or no format at all. None when it can.
    A newer folder is refused whole rather than read field by field: its fields may mean
    something else now, and a wrong number in a table is worse than a run marked invalid."""
    value = run_format(spec)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= RUN_FORMAT:
        return None
    fix = "written by a newer r2bench; upgrade r2bench to read it"
    if isinstance(value, int) and not isinstance(value, bool) and value > RUN_FORMAT:
        why = f"newer than the newest run-folder format this r2bench reads ({RUN_FORMAT})"
    else:
        why = f"not a run-folder format this r2bench knows (an integer from 0 to {RUN_FORMAT})"
    return f"{path}: {FORMAT_FIELD}: {value!r} is {why}; {fix}"
