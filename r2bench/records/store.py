"""The run store: one folder per run under `results/<sweep>/<run-id>/`, the source of truth.

Layout of a run folder (every file written to a temporary name and renamed into place, so a
reader never sees half a file; `COMPLETE` is written last):

```
spec.json          the RunSpec (with its run_id)
provenance.json    versions, commits, hosts, environment (secrets dropped), re-run command
stdout.txt         the launcher's stdout (nccl-tests text output)
stderr.txt         the launcher's stderr (NCCL logs, mpirun messages)
stdout.times       (sweeps) the launch node's epoch time each stdout line was written, one per
                   line of stdout.txt ($EPOCHREALTIME there: microseconds)
stderr.times       (sweeps) the same for stderr.txt
result.json        nccl-tests -J output, when there is one
node/<node>/...    files collected from the nodes (logs, counters, clocks)
events.jsonl       typed log events (records.models.Event), one per line
faults.jsonl       fault events (FaultEvent): inject/revert/verify with node-side timestamps
outcome.json       records.models.Outcome plus exit code and start/end times
COMPLETE           the marker: the run folder is whole (written last)
```

A folder without `COMPLETE` is a crashed or interrupted run: it is listed as incomplete and
kept. `RunStore.create` never overwrites one; it moves it aside to `<run-id>.incomplete-<n>`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from r2bench.plan.runspec import RunSpec
from r2bench.records.models import Event, Outcome
from r2bench.records.provenance import Provenance

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
COMPLETE = "COMPLETE"
NODE_DIR = "node"
TABLES_DIR = "tables"

_SAFE_PART_RE = re.compile(r"^[A-Za-z0-9_.@:+-][A-Za-z0-9_.@:+ -]{0,199}$")
_INCOMPLETE_RE = re.compile(r"\.incomplete-\d+$")


class FaultEvent(BaseModel):
    """One step of a fault's life, as the node saw it (`time` from `date +%s.%N` there)."""

    model_config = ConfigDict(frozen=True)

    action: Literal["inject", "revert", "verify", "lease_expired", "heal"]
    fault: int = Field(description="index of the fault in the run's scenario")
    kind: str
    node: str
    nic: str = ""
    tag: str = ""
    time: float | None = Field(default=None, description="node-side epoch seconds")
    controller_time: float | None = Field(default=None, description="controller epoch seconds")
    ok: bool = True
    detail: str = ""
    cycle: int = Field(default=0, description="flap cycle (0 for a single fault)")
    planned_at: float | None = Field(default=None, description="controller epoch, as scheduled")
    requested_at: float | None = Field(default=None, description="controller epoch, request sent")
    applied_at: float | None = Field(default=None, description="node epoch, change made")
    verified_at: float | None = Field(default=None, description="node epoch, state seen")
    clock_offset_s: float | None = Field(
        default=None, description="node clock minus controller clock, measured before the run"
    )

    @property
    def applied_controller_time(self) -> float | None:
        """When the change was made, on the controller's clock."""
        if self.applied_at is None or self.clock_offset_s is None:
            return None
        return self.applied_at - self.clock_offset_s


class RunEnd(BaseModel):
    """What `outcome.json` holds: the classified outcome plus how the launch ended."""

    model_config = ConfigDict(frozen=True)

    outcome: Outcome
    exit_code: int | None = None
    started_at: float | None = Field(default=None, description="epoch seconds, job launch")
    ended_at: float | None = Field(default=None, description="epoch seconds, job end")


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as out:
            out.write(raw)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process umask, read without changing it (mkstemp files are 0600 otherwise)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _jsonl(models: Iterable[BaseModel]) -> str:
    return "".join(m.model_dump_json() + "\n" for m in models)


def _safe_part(part: str) -> str:
    """A node name or relative path element that cannot leave the run folder."""
    if part in ("", ".", "..") or not _SAFE_PART_RE.match(part):
        raise ValueError(f"unsafe path element {part!r}")
    return part


@dataclass(frozen=True)
class RunFolder:
    """Writer of one run folder. Each `write_*` replaces that file atomically."""

    path: Path

    @property
    def run_id(self) -> str:
        """The run id (the folder's name)."""
        return self.path.name

    def write_spec(self, spec: RunSpec) -> None:
        """spec.json: the RunSpec, with its run_id."""
        atomic_write(self.path / SPEC, spec.model_dump_json(indent=2))

    def write_provenance(self, provenance: Provenance) -> None:
        """provenance.json."""
        atomic_write(self.path / PROVENANCE, provenance.model_dump_json(indent=2))

    def write_stdout(self, data: str | bytes) -> None:
        """stdout.txt (for streaming, write to `stream_path(STDOUT)` and rename yourself)."""
        atomic_write(self.path / STDOUT, data)

    def write_stderr(self, data: str | bytes) -> None:
        """stderr.txt."""
        atomic_write(self.path / STDERR, data)

    def write_result_json(self, data: str | bytes) -> None:
        """result.json: the nccl-tests -J output as it was written (bytes kept)."""
        atomic_write(self.path / RESULT_JSON, data)

    def write_node_file(self, node: str, relpath: str, data: str | bytes) -> Path:
        """node/<node>/<relpath>: a file collected from a node."""
        parts = [_safe_part(p) for p in relpath.replace("\\", "/").split("/")]
        target = self.path.joinpath(NODE_DIR, _safe_part(node), *parts)
        atomic_write(target, data)
        return target

    def write_events(self, events: Iterable[Event]) -> None:
        """events.jsonl: one Event per line."""
        atomic_write(self.path / EVENTS, _jsonl(events))

    def write_faults(self, faults: Iterable[FaultEvent]) -> None:
        """faults.jsonl: one FaultEvent per line, in the order they happened."""
        atomic_write(self.path / FAULTS, _jsonl(faults))

    def write_outcome(self, end: RunEnd) -> None:
        """outcome.json."""
        atomic_write(self.path / OUTCOME, end.model_dump_json(indent=2))

    def stream_path(self, name: str) -> Path:
        """A temporary path to stream a large file into; `commit_stream` renames it."""
        return self.path / f".{_safe_part(name)}.partial"

    def commit_stream(self, name: str) -> None:
        """Rename a streamed `stream_path(name)` file to `name`."""
        os.replace(self.stream_path(name), self.path / _safe_part(name))

    def copy_in(self, source: Path, name: str) -> None:
        """Copy a (possibly large) file into the run folder as `name`, atomically."""
        shutil.copyfile(source, self.stream_path(name))
        self.commit_stream(name)

    def mark_complete(self) -> None:
        """Write COMPLETE (last): from now on the run counts as done and is skipped on resume."""
        stamp = datetime.now(timezone.utc).isoformat()
        atomic_write(self.path / COMPLETE, stamp + "\n")


@dataclass(frozen=True)
class RunRecord:
    """A run folder as read back: parsed JSON parts, and paths to the raw text files."""

    run_id: str
    path: Path
    complete: bool
    spec: dict[str, Any]
    provenance: dict[str, Any]
    end: RunEnd | None
    faults: list[FaultEvent]

    def file(self, name: str) -> Path | None:
        """Path of a part of the run folder, or None when it was not written."""
        path = self.path / name
        return path if path.is_file() else None

    def events(self) -> list[Event]:
        """events.jsonl, skipping lines that do not validate (a record is never fatal)."""
        return _read_jsonl(self.path / EVENTS, Event)

    def node_files(self) -> list[Path]:
        """Every file collected from the nodes, sorted."""
        root = self.path / NODE_DIR
        return sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _read_jsonl(path: Path, model: type[Any]) -> list[Any]:
    out: list[Any] = []
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            out.append(model.model_validate_json(line))
        except ValueError:
            continue
    return out


def _read_end(path: Path) -> RunEnd | None:
    try:
        return RunEnd.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return None


def load_run(path: Path) -> RunRecord:
    """Read one run folder (complete or not); unreadable parts come back empty, never raise."""
    return RunRecord(
        run_id=path.name,
        path=path,
        complete=(path / COMPLETE).is_file(),
        spec=_read_json(path / SPEC),
        provenance=_read_json(path / PROVENANCE),
        end=_read_end(path / OUTCOME),
        faults=_read_jsonl(path / FAULTS, FaultEvent),
    )


class RunStore:
    """The run folders of one sweep: `<root>/<sweep>/<run-id>/`."""

    def __init__(self, root: Path, sweep: str) -> None:
        self.root = Path(root)
        self.sweep = _safe_part(sweep)

    @classmethod
    def at(cls, sweep_dir: Path) -> RunStore:
        """The store of an existing sweep folder (`results/<sweep>`)."""
        sweep_dir = Path(sweep_dir)
        return cls(sweep_dir.parent, sweep_dir.name)

    @property
    def sweep_dir(self) -> Path:
        """`<root>/<sweep>`."""
        return self.root / self.sweep

    @property
    def tables_dir(self) -> Path:
        """Where the derived tables go."""
        return self.sweep_dir / TABLES_DIR

    def run_dir(self, run_id: str) -> Path:
        """The folder of a run id (which may not exist yet)."""
        return self.sweep_dir / _safe_part(run_id)

    def is_complete(self, run_id: str) -> bool:
        """True when the run has its COMPLETE marker: a resumed sweep skips it."""
        return (self.run_dir(run_id) / COMPLETE).is_file()

    def create(self, run_id: str) -> RunFolder:
        """A fresh, empty folder for a run. A complete run is refused (FileExistsError); an
        incomplete one is moved aside to `<run-id>.incomplete-<n>`, never overwritten."""
        path = self.run_dir(run_id)
        if (path / COMPLETE).is_file():
            raise FileExistsError(f"run {run_id} is already complete: {path}")
        if path.exists():
            self._move_aside(path)
        path.mkdir(parents=True)
        return RunFolder(path)

    def start(self, spec: RunSpec, provenance: Provenance | None = None) -> RunFolder:
        """`create(spec.run_id)`, then write spec.json (and provenance.json when given)."""
        folder = self.create(spec.run_id)
        folder.write_spec(spec)
        if provenance is not None:
            folder.write_provenance(provenance)
        return folder

    def _move_aside(self, path: Path) -> Path:
        n = 1
        while (aside := path.with_name(f"{path.name}.incomplete-{n}")).exists():
            n += 1
        os.rename(path, aside)
        return aside

    def run_dirs(self) -> Iterator[Path]:
        """Every run folder (complete or not, moved-aside ones too), sorted by name."""
        yield from self._run_dirs()

    def _run_dirs(self) -> Iterator[Path]:
        if not self.sweep_dir.is_dir():
            return
        for path in sorted(self.sweep_dir.iterdir()):
            if path.is_dir() and path.name != TABLES_DIR and not path.name.startswith("."):
                yield path

    def complete_runs(self) -> Iterator[str]:
        """Run ids with a COMPLETE marker, sorted."""
        for path in self._run_dirs():
            if (path / COMPLETE).is_file():
                yield path.name

    def incomplete_runs(self) -> list[Path]:
        """Folders without COMPLETE: crashed runs and the ones moved aside."""
        return [p for p in self._run_dirs() if not (p / COMPLETE).is_file()]

    def load(self, run_id: str) -> RunRecord:
        """Read one run back."""
        return load_run(self.run_dir(run_id))

    def records(self, include_incomplete: bool = False) -> Iterator[RunRecord]:
        """Every complete run (and the incomplete ones when asked), sorted by folder name."""
        for path in self._run_dirs():
            complete = (path / COMPLETE).is_file()
            if complete or include_incomplete:
                yield load_run(path)


def is_moved_aside(name: str) -> bool:
    """True for a `<run-id>.incomplete-<n>` folder name."""
    return bool(_INCOMPLETE_RE.search(name))
