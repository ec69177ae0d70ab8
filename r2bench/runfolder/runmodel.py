"""The run model: a run folder read back (`load_run`), never written here.

Every part is read strictly and bounded (`safeio`); a part that cannot be used comes back
empty with a problem naming its file and field, so one bad run never stops a table build. A
folder in a format this r2bench does not know (`runformat.format_problem`) is not read beyond
that. The writer is `runfolder.store`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from r2bench.config.errors import field_problems
from r2bench.errors import InputError
from r2bench.parse.models import Event, Outcome
from r2bench.parse.numbers import INT64_MAX, shown
from r2bench.runfolder.runformat import (
    COMPLETE,
    EVENTS,
    FAULTS,
    NODE_DIR,
    OUTCOME,
    PROVENANCE,
    SPEC,
    format_problem,
)
from r2bench.safeio import (
    JSON_RECORD_LIMIT,
    InputRefused,
    OutsideFolder,
    check_bounded,
    inside,
    read_bytes_bounded,
    read_text_bounded,
)

_Model = TypeVar("_Model", bound=BaseModel)

JSONL_LIMIT = 32 * 1024 * 1024
"""Cap on events.jsonl and faults.jsonl, read whole: a run's typed events and fault steps are
thousands of lines at most; a larger file is refused (the run listed with why), never read."""


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

    def on_controller_clock(self, node_time: float | None, offset: float = 0.0) -> float | None:
        """A node-side time of this step (`time`, `applied_at`, `verified_at`) on the
        controller's clock: minus the clock offset measured for the step (else `offset`)."""
        if node_time is None:
            return None
        return node_time - (self.clock_offset_s or offset)


class RunEnd(BaseModel):
    """What `outcome.json` holds: the classified outcome plus how the launch ended."""

    model_config = ConfigDict(frozen=True)

    outcome: Outcome
    exit_code: int | None = None
    started_at: float | None = Field(default=None, description="epoch seconds, job launch")
    ended_at: float | None = Field(default=None, description="epoch seconds, job end")


@dataclass(frozen=True)
class RunRecord:
    """A run folder as read back: parsed JSON parts, and paths to the raw text files."""

    run_id: str
    path: Path
    complete: bool
    spec: SpecFields
    """spec.json read once, typed (every field at its default when the file is missing or bad)."""
    provenance: dict[str, Any]
    end: RunEnd | None
    faults: list[FaultEvent]
    problems: tuple[str, ...] = ()
    """Why the record cannot be used, each naming its file and field (the run is skipped)."""
    spec_run_id: str | None = None
    """The run id spec.json names, even when the rest of it is bad (None when it names none):
    a copied folder holds its original's id under another folder name."""

    def file(self, name: str) -> Path | None:
        """Path of a part of the run folder, or None when it was not written or is a link that
        leads out of the run folder (never read: `load_run` lists it as a problem)."""
        return part(self.path, name)

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
    return [p for p in _node_files(run_dir) if stays_in(run_dir, p)]


def stays_in(run_dir: Path, path: Path) -> bool:
    """Whether `path` stays inside `run_dir` once links are followed."""
    if path.parent == run_dir and not path.is_symlink():
        return True  # a plain entry of the folder: inside it wherever the folder itself is
    try:
        inside(run_dir, path)
    except OutsideFolder:
        return False
    return True


def part(run_dir: Path, name: str) -> Path | None:
    """`run_dir/name` when it is a file inside the run folder (links followed), else None."""
    path = run_dir / name
    return path if path.is_file() and stays_in(run_dir, path) else None


def _node_files(run_dir: Path) -> list[Path]:
    root = run_dir / NODE_DIR
    if not root.is_dir() or not stays_in(run_dir, root):
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
        if p.is_symlink() and not stays_in(run_dir, p)
    ]


class RecordError(InputError, ValueError):
    """A part of a run record that cannot be used; the message names the file and field.
    Exit 2 (bad input), as `report`, `compare` and `figures` document."""


def _no_constant(name: str) -> float:
    raise ValueError(f"not valid JSON ({name} is no JSON number)")


def _record_int(text: str) -> int:
    """A JSON whole number of a record: r2bench writes none beyond int64 (its tables' type),
    so a larger one is a record edited or corrupt, refused before it reaches a table."""
    value = int(text)
    if abs(value) > INT64_MAX:
        raise ValueError(f"not valid JSON for a run record ({shown(text)} is beyond int64)")
    return value


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
        return json.loads(text, parse_constant=_no_constant, parse_int=_record_int)
    except RecursionError:
        raise RecordError(f"{path}: nested too deeply to read") from None
    except ValueError as exc:
        said = str(exc).startswith("not valid JSON")
        message = str(exc) if said else f"not valid JSON ({exc})"
        raise RecordError(f"{path}: {message}") from None


def validation_problems(path: Path, error: ValidationError) -> str:
    """A pydantic error as `<path>: <field.path>: <message> (got <value>)`, one per field."""
    return "; ".join(
        f"{path}: {problem.describe('(top level)')} (got {repr(problem.given)[:60]})"
        for problem in field_problems(error)
    )


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
    """spec.json as r2bench reads it back: the fields of `RunSpec` that the tables, report and
    compare use, typed and checked, each at its default when a folder (an older or imported
    one) lacks it; the other fields of the file pass unchecked (`model_extra`)."""

    run_id: str | None = None
    experiment: str | None = None
    library_label: str | None = None
    library: _ComponentFields | None = None
    benchmark: _ComponentFields | None = None
    """The workload that ran (nccl-tests, the verifying workload, the emulator)."""
    collective: str | None = None
    scenario: str | None = None
    repeat: int | None = None
    nodes: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    options: _OptionFields | None = None
    testbed: Any = None
    """As written, not checked (compare only tells testbeds apart)."""
    faults: Any = None
    """As written, not checked (`evidence.cap_rates` takes the caps it can read)."""

    @property
    def recovery_strategy(self) -> str | None:
        """A training run's recovery strategy (`recovery.strategy`), None without one."""
        recovery = (self.model_extra or {}).get("recovery")
        strategy = recovery.get("strategy") if isinstance(recovery, dict) else None
        return strategy if isinstance(strategy, str) else None


class ProvenanceFields(_Lenient):
    """provenance.json as the tables and report read it."""

    node_utc_offset_s: float | None = None
    imported_from: str | None = None
    library_basis: str | None = None
    hostnames: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)


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


def _validated(
    path: Path | None, data: dict[str, Any] | None, fields: type[_Model], problems: list[str]
) -> _Model | None:
    """`data` (read from `path`) as `fields` when it validates, else None (and a problem
    naming the field); None for no data."""
    if data is None or path is None:
        return None
    try:
        return fields.model_validate(data)
    except ValidationError as exc:
        problems.append(validation_problems(path, exc))
        return None


def _checked(
    path: Path | None, data: dict[str, Any] | None, fields: type[BaseModel], problems: list[str]
) -> dict[str, Any]:
    """`data` (read from `path`) when its fields validate against `fields`, else {} (and a
    problem naming the field); {} for no data."""
    return data if data is not None and _validated(path, data, fields, problems) else {}


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
        try:  # a whole number beyond int64 (_record_int) skips its line, as any invalid one
            doc = json.loads(line, parse_constant=_no_constant, parse_int=_record_int)
            out.append(model.model_validate(doc))
        except (ValueError, RecursionError):
            continue
    return out


def _read_end(path: Path | None, problems: list[str]) -> RunEnd | None:
    data = _read_json(path, _Lenient, problems)
    return _validated(path, data, RunEnd, problems) if data else None


def load_run(path: Path) -> RunRecord:
    """Read one run folder (complete or not); never raises. Parts that cannot be used (a bad
    spec.json, provenance.json or outcome.json, a link leading out of the folder) come back
    empty and are listed in `problems`, each naming its file and field. A folder in a format
    this r2bench does not know (`format_problem`) is not read beyond that: every part comes
    back empty and the format is its problem."""
    problems = _links_out(path)
    if (events := part(path, EVENTS)) is not None:  # read later, by RunRecord.events
        try:
            check_bounded(events, JSONL_LIMIT, EVENTS)
        except InputRefused as exc:
            problems.append(str(exc))
        except OSError:
            pass
    safe = {
        name: path / name if stays_in(path, path / name) else None
        for name in (SPEC, PROVENANCE, OUTCOME, FAULTS)
    }
    complete = part(path, COMPLETE) is not None
    raw_spec = _read_object(spec_path := safe[SPEC], problems)
    unknown = format_problem(spec_path, raw_spec) if spec_path and raw_spec is not None else None
    if unknown:
        problems.append(unknown)
        return RunRecord(
            path.name, path, complete, SpecFields(), {}, None, [], tuple(problems),
            spec_run_id=_named_run_id(raw_spec),
        )  # fmt: skip
    return RunRecord(
        run_id=path.name,
        path=path,
        complete=complete,
        spec=_validated(spec_path, raw_spec, SpecFields, problems) or SpecFields(),
        provenance=_read_json(safe[PROVENANCE], ProvenanceFields, problems),
        end=_read_end(safe[OUTCOME], problems),
        faults=_read_jsonl(faults, FaultEvent, problems) if (faults := safe[FAULTS]) else [],
        problems=tuple(problems),
        spec_run_id=_named_run_id(raw_spec),
    )


def load_end(run_dir: Path) -> RunEnd | None:
    """A run folder's outcome.json alone, for what only asks how a run ended (None when it
    was not written or cannot be used: `load_run` says why)."""
    path = run_dir / OUTCOME
    return _read_end(path if stays_in(run_dir, path) else None, [])


def _named_run_id(raw_spec: Any) -> str | None:
    """The run id a spec.json document names (None when it names none)."""
    run_id = raw_spec.get("run_id") if isinstance(raw_spec, dict) else None
    return run_id if isinstance(run_id, str) and run_id else None
