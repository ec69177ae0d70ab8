"""The run store: one folder per run under `results/<sweep>/<run-id>/`, the source of truth.

Layout of a run folder (every file written to a temporary name and renamed into place, so a
reader never sees half a file; `COMPLETE` is written last):

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
events.jsonl       typed log events (records.models.Event), one per line
faults.jsonl       fault events (FaultEvent): inject/revert/verify with node-side timestamps
outcome.json       records.models.Outcome plus exit code and start/end times
COMPLETE           the marker: the run folder is whole (written last)
```

A folder without `COMPLETE` is a crashed or interrupted run: it is listed as incomplete and
kept. `RunStore.create` never overwrites one; it moves it aside to `<run-id>.incomplete-<n>`.

spec.json's `format` says which layout the folder was written in, so that an older r2bench
refuses a folder it would misread instead of reporting wrong numbers (`format_problem`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from r2bench.errors import InputError
from r2bench.plan.runspec import RunSpec
from r2bench.records.models import Event, Outcome
from r2bench.records.provenance import Provenance
from r2bench.safeio import (
    JSON_RECORD_LIMIT,
    InputRefused,
    OutsideFolder,
    atomic_write,
    check_bounded,
    inside,
    read_bytes_bounded,
    read_text_bounded,
    writable,
)

JSONL_LIMIT = 32 * 1024 * 1024
"""Cap on events.jsonl and faults.jsonl, read whole: a run's typed events and fault steps are
thousands of lines at most; a larger file is refused (the run listed with why), never read."""
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
COMPLETE = "COMPLETE"
NODE_DIR = "node"
TABLES_DIR = "tables"

_SAFE_PART_RE = re.compile(r"^[A-Za-z0-9_.@:+-][A-Za-z0-9_.@:+ -]{0,199}$")
# Sweep and run folder names: letters and digits of any script (`résultats`, a folder a user
# named), never a control, a separator or a character that reorders text.
_FOLDER_RE = re.compile(r"^[\w.@:+-][\w.@:+ -]{0,199}$")
_INCOMPLETE_RE = re.compile(r"\.incomplete-[0-9]+$")


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


def _jsonl(models: Iterable[BaseModel]) -> str:
    return "".join(m.model_dump_json() + "\n" for m in models)


class UnsafePath(InputError, ValueError):
    """A folder or file name that could leave its folder or is no name r2bench writes."""


def _safe_part(part: str) -> str:
    """A node name or relative path element that cannot leave the run folder."""
    if part in ("", ".", "..") or not _SAFE_PART_RE.fullmatch(part):
        raise UnsafePath(f"unsafe path element {part!r}")
    return part


def _folder_name(part: str) -> str:
    """A sweep or run folder name: one path element of letters and digits (of any script) and
    `_ . @ : + - ` (space inside)."""
    if part in ("", ".", "..") or not _FOLDER_RE.fullmatch(part):
        raise UnsafePath(
            f"unsafe folder name {part!r}: give one folder name of letters, digits and _.@:+-"
        )
    return part


def sweep_folder(path: Path) -> Path:
    """The sweep folder the user meant by `path`: `.`, `./`, `..` and `SWEEP/RUN/..` are
    resolved to the folder they name (its own name then says which sweep it is); any other
    path is kept as given (a link there is the user's choice)."""
    path = Path(path)
    return path.resolve() if path.name in ("", ".", "..") else path


@dataclass(frozen=True)
class RunFolder:
    """Writer of one run folder. Each `write_*` replaces that file atomically."""

    path: Path

    @property
    def run_id(self) -> str:
        """The run id (the folder's name)."""
        return self.path.name

    def _write(self, target: Path, data: str | bytes) -> None:
        """Every file of the run goes here: atomically, and never through a link out."""
        inside(self.path, target.parent)
        atomic_write(target, data)

    def write_spec(self, spec: RunSpec) -> None:
        """spec.json: the RunSpec, with its run_id, and the folder's format (RUN_FORMAT) first,
        so that a reader knows whether it can read the folder before it reads anything else."""
        data = {FORMAT_FIELD: RUN_FORMAT, **json.loads(spec.model_dump_json())}
        self._write(self.path / SPEC, json.dumps(data, indent=2, ensure_ascii=False))

    def write_provenance(self, provenance: Provenance) -> None:
        """provenance.json."""
        self._write(self.path / PROVENANCE, provenance.model_dump_json(indent=2))

    def write_stdout(self, data: str | bytes) -> None:
        """stdout.txt (for streaming, write to `stream_path(STDOUT)` and rename yourself)."""
        self._write(self.path / STDOUT, data)

    def write_stderr(self, data: str | bytes) -> None:
        """stderr.txt."""
        self._write(self.path / STDERR, data)

    def write_result_json(self, data: str | bytes) -> None:
        """result.json: the nccl-tests -J output as it was written (bytes kept)."""
        self._write(self.path / RESULT_JSON, data)

    def write_node_file(self, node: str, relpath: str, data: str | bytes) -> Path:
        """node/<node>/<relpath>: a file collected from a node."""
        parts = [_safe_part(p) for p in relpath.replace("\\", "/").split("/")]
        target = self.path.joinpath(NODE_DIR, _safe_part(node), *parts)
        self._write(target, data)
        return target

    def write_events(self, events: Iterable[Event]) -> None:
        """events.jsonl: one Event per line."""
        self._write(self.path / EVENTS, _jsonl(events))

    def write_faults(self, faults: Iterable[FaultEvent]) -> None:
        """faults.jsonl: one FaultEvent per line, in the order they happened."""
        self._write(self.path / FAULTS, _jsonl(faults))

    def write_outcome(self, end: RunEnd) -> None:
        """outcome.json."""
        self._write(self.path / OUTCOME, end.model_dump_json(indent=2))

    def stream_path(self, name: str) -> Path:
        """A temporary path to stream a large file into (a link left there is removed, never
        written through); `commit_stream` renames it."""
        return writable(self.path, self.path / f".{_safe_part(name)}.partial")

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
        self._write(self.path / COMPLETE, stamp + "\n")


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
    problems: tuple[str, ...] = ()
    """Why the record cannot be used, each naming its file and field (the run is skipped)."""

    def file(self, name: str) -> Path | None:
        """Path of a part of the run folder, or None when it was not written or is a link that
        leads out of the run folder (never read: `load_run` lists it as a problem)."""
        return _part(self.path, name)

    def events(self) -> list[Event]:
        """events.jsonl, skipping lines that do not validate (a record is never fatal); none
        when it is over JSONL_LIMIT (`load_run` lists that as a problem)."""
        path = self.file(EVENTS)
        return _read_jsonl(path, Event, []) if path else []

    def node_files(self) -> list[Path]:
        """Every file collected from the nodes, sorted (links that lead out of the run folder
        left out)."""
        return node_files(self.path)


def node_files(run_dir: Path) -> list[Path]:
    """Every file collected from the nodes into a run folder (`RunRecord.node_files`)."""
    return [p for p in _node_files(run_dir) if _stays_in(run_dir, p)]


def _stays_in(run_dir: Path, path: Path) -> bool:
    if path.parent == run_dir and not path.is_symlink():
        return True  # a plain entry of the folder: inside it wherever the folder itself is
    try:
        inside(run_dir, path)
    except OutsideFolder:
        return False
    return True


def _part(run_dir: Path, name: str) -> Path | None:
    """`run_dir/name` when it is a file inside the run folder (links followed), else None."""
    path = run_dir / name
    return path if path.is_file() and _stays_in(run_dir, path) else None


def _node_files(run_dir: Path) -> list[Path]:
    root = run_dir / NODE_DIR
    if not root.is_dir() or not _stays_in(run_dir, root):
        return []
    out = []
    for folder, dirs, files in os.walk(root):  # links to folders are not walked into
        out += [Path(folder, f) for f in files]
        out += [Path(folder, d) for d in dirs if Path(folder, d).is_symlink()]
    return sorted(p for p in out if p.is_file())


def _links_out(run_dir: Path) -> list[str]:
    """The run folder's entries (and collected node files) that are links leading out of it."""
    try:
        entries = [*sorted(run_dir.iterdir()), *_node_files(run_dir)]
    except OSError:
        return []
    return [
        f"{p}: a link that leads outside the run folder; refusing to read it"
        for p in entries
        if p.is_symlink() and not _stays_in(run_dir, p)
    ]


class RecordError(ValueError):
    """A part of a run record that cannot be used; the message names the file and field."""


def _no_constant(name: str) -> float:
    raise ValueError(f"not valid JSON ({name} is no JSON number)")


def load_json_record(path: Path) -> Any:
    """A JSON record file read strictly: a regular file within JSON_RECORD_LIMIT, valid JSON
    without NaN or Infinity, nested no deeper than the parser can go. RecordError names the
    file otherwise."""
    try:
        text = read_text_bounded(path, JSON_RECORD_LIMIT, path.name)
    except InputRefused as exc:
        raise RecordError(f"{path}: {str(exc).removeprefix(f'{path}: {path.name} is ')}") from None
    except OSError as exc:
        raise RecordError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise RecordError(f"{path}: nested too deeply to read") from None
    except ValueError as exc:
        message = str(exc) if str(exc).startswith("not valid JSON") else f"not valid JSON ({exc})"
        raise RecordError(f"{path}: {message}") from None


def validation_problems(path: Path, error: ValidationError) -> str:
    """A pydantic error as `<path>: <field.path>: <message> (got <value>)`, one per field."""
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "(top level)"
        got = repr(item.get("input"))[:60]
        parts.append(f"{path}: {where}: {item['msg']} (got {got})")
    return "; ".join(parts)


class _Lenient(BaseModel):
    """The fields of a record that r2bench reads back, strictly typed; other fields pass."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


class _ComponentFields(_Lenient):
    ref: str | None = None
    recipe: str | None = None


class _OptionFields(_Lenient):
    iterations: int | None = None
    check: bool | None = None


class SpecFields(_Lenient):
    """spec.json as the tables, report and compare read it."""

    run_id: str | None = None
    experiment: str | None = None
    library_label: str | None = None
    library: _ComponentFields | None = None
    collective: str | None = None
    scenario: str | None = None
    repeat: int | None = None
    nodes: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    options: _OptionFields | None = None


class ProvenanceFields(_Lenient):
    """provenance.json as the tables and report read it."""

    node_utc_offset_s: float | None = None
    imported_from: str | None = None
    library_basis: str | None = None
    hostnames: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)


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


def _read_object(path: Path | None, problems: list[str]) -> dict[str, Any] | None:
    """A JSON object record; None (and a problem) when it is bad, None alone when it was not
    written or is a link out of its folder (listed already)."""
    if path is None or (not path.exists() and not path.is_symlink()):
        return None
    try:
        data = load_json_record(path)
    except RecordError as exc:
        problems.append(str(exc))
        return None
    if not isinstance(data, dict):
        problems.append(f"{path}: not a JSON object")
        return None
    return data


def _checked(
    path: Path | None, data: dict[str, Any] | None, fields: type[BaseModel], problems: list[str]
) -> dict[str, Any]:
    """`data` (read from `path`) when its fields validate against `fields`, else {} (and a
    problem naming the field); {} for no data."""
    if data is None or path is None:
        return {}
    try:
        fields.model_validate(data)
    except ValidationError as exc:
        problems.append(validation_problems(path, exc))
        return {}
    return data


def _read_json(path: Path | None, fields: type[BaseModel], problems: list[str]) -> dict[str, Any]:
    """A JSON object record checked against `fields`; {} (and a problem) when it is bad,
    {} alone when it was not written or is a link out of its folder (listed already)."""
    return _checked(path, _read_object(path, problems), fields, problems)


def _read_jsonl(path: Path, model: type[Any], problems: list[str]) -> list[Any]:
    """The lines of a JSON Lines record that validate as `model` (others skipped); none, and
    a problem naming the file, when it is not a regular file within JSONL_LIMIT."""
    out: list[Any] = []
    try:
        lines = read_bytes_bounded(path, JSONL_LIMIT, path.name).splitlines()
    except InputRefused as exc:
        problems.append(str(exc))
        return out
    except OSError:
        return out
    for line in lines:
        try:
            out.append(model.model_validate_json(line))
        except ValueError:
            continue
    return out


def _read_end(path: Path | None, problems: list[str]) -> RunEnd | None:
    data = _read_json(path, _Lenient, problems)
    if not data or path is None:
        return None
    try:
        return RunEnd.model_validate(data)
    except ValidationError as exc:
        problems.append(validation_problems(path, exc))
        return None


def load_run(path: Path) -> RunRecord:
    """Read one run folder (complete or not); never raises. Parts that cannot be used (a bad
    spec.json, provenance.json or outcome.json, a link leading out of the folder) come back
    empty and are listed in `problems`, each naming its file and field. A folder in a format
    this r2bench does not know (`format_problem`) is not read beyond that: every part comes
    back empty and the format is its problem."""
    problems = _links_out(path)
    if (events := _part(path, EVENTS)) is not None:  # read later, by RunRecord.events
        try:
            check_bounded(events, JSONL_LIMIT, EVENTS)
        except InputRefused as exc:
            problems.append(str(exc))
        except OSError:
            pass
    safe = {
        name: path / name if _stays_in(path, path / name) else None
        for name in (SPEC, PROVENANCE, OUTCOME, FAULTS)
    }
    complete = _part(path, COMPLETE) is not None
    raw_spec = _read_object(spec_path := safe[SPEC], problems)
    unknown = format_problem(spec_path, raw_spec) if spec_path and raw_spec is not None else None
    if unknown:
        return RunRecord(path.name, path, complete, {}, {}, None, [], (*problems, unknown))
    return RunRecord(
        run_id=path.name,
        path=path,
        complete=complete,
        spec=_checked(spec_path, raw_spec, SpecFields, problems),
        provenance=_read_json(safe[PROVENANCE], ProvenanceFields, problems),
        end=_read_end(safe[OUTCOME], problems),
        faults=_read_jsonl(faults, FaultEvent, problems) if (faults := safe[FAULTS]) else [],
        problems=tuple(problems),
    )


class RunStore:
    """The run folders of one sweep: `<root>/<sweep>/<run-id>/`."""

    def __init__(self, root: Path, sweep: str) -> None:
        self.root = Path(root)
        self.sweep = _folder_name(sweep)

    @classmethod
    def at(cls, sweep_dir: Path) -> RunStore:
        """The store of an existing sweep folder (`results/<sweep>`, or `.`: `sweep_folder`).
        UnsafePath when it names no folder (`/`)."""
        sweep_dir = sweep_folder(sweep_dir)
        if not sweep_dir.name:
            raise UnsafePath(f"{sweep_dir}: not a sweep folder (give results/<sweep>)")
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
        return self.sweep_dir / _folder_name(run_id)

    def is_complete(self, run_id: str) -> bool:
        """True when the run has its COMPLETE marker: a resumed sweep skips it (never one that
        a link out of the sweep folder points at)."""
        path = self.run_dir(run_id)
        return _stays_in(self.sweep_dir, path) and _part(path, COMPLETE) is not None

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

    def _children(self) -> Iterator[Path]:
        if not self.sweep_dir.is_dir():
            return
        for path in sorted(self.sweep_dir.iterdir()):
            if path.is_dir() and path.name != TABLES_DIR and not path.name.startswith("."):
                yield path

    def _run_dirs(self) -> Iterator[Path]:
        """Run folders, leaving out links that lead outside the sweep folder (`links_out`)."""
        for path in self._children():
            if _stays_in(self.sweep_dir, path):
                yield path

    def links_out(self) -> list[str]:
        """A line for each would-be run folder that is a link leading outside the sweep."""
        return [
            f"{path}: a link that leads outside the sweep folder; refusing to read it"
            for path in self._children()
            if not _stays_in(self.sweep_dir, path)
        ]

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


def spec_run_id(run_dir: Path) -> str | None:
    """The run id a run folder's spec.json names (None when it names none or is unreadable)."""
    path = run_dir / SPEC
    if not _stays_in(run_dir, path) or not path.is_file():
        return None
    try:
        data = load_json_record(path)
    except RecordError:
        return None
    run_id = data.get("run_id") if isinstance(data, dict) else None
    return run_id if isinstance(run_id, str) and run_id else None


def is_moved_aside(name: str) -> bool:
    """True for a `<run-id>.incomplete-<n>` folder name."""
    return bool(_INCOMPLETE_RE.search(name))
