"""The run store: writes one folder per run under `results/<sweep>/<run-id>/`, the source
of truth, and lists a sweep's run folders.

Every file of a run folder is written to a temporary name and renamed into place
(`safeio.atomic_write`), so a reader never sees half a file; `COMPLETE` is written last. The
layout and its format version are `runfolder.runformat`; reading a folder back is
`runfolder.runmodel`.

A folder without `COMPLETE` is a crashed or interrupted run: it is listed as incomplete and
kept. `RunStore.create` never overwrites one; it moves it aside to `<run-id>.incomplete-<n>`.
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

from pydantic import BaseModel

from r2bench.errors import InputError
from r2bench.parse.models import Event
from r2bench.plan.runspec import RunSpec
from r2bench.runfolder.provenance import Provenance
from r2bench.runfolder.runformat import (
    COMPLETE,
    EVENTS,
    FAULTS,
    FORMAT_FIELD,
    NODE_DIR,
    OUTCOME,
    PROVENANCE,
    RESULT_JSON,
    RUN_FORMAT,
    SPEC,
    STDERR,
    STDOUT,
    TABLES_DIR,
)
from r2bench.runfolder.runmodel import (
    FaultEvent,
    RunEnd,
    RunRecord,
    load_end,
    load_run,
    part,
    stays_in,
)
from r2bench.safeio import atomic_write, inside, writable

_SAFE_PART_RE = re.compile(r"^[A-Za-z0-9_.@:+-][A-Za-z0-9_.@:+ -]{0,199}$")
# Sweep and run folder names: letters and digits of any script (`résultats`, a folder a user
# named), never a control, a separator or a character that reorders text.
_FOLDER_RE = re.compile(r"^[\w.@:+-][\w.@:+ -]{0,199}$")
_INCOMPLETE_RE = re.compile(r"\.incomplete-[0-9]+$")


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
        return stays_in(self.sweep_dir, path) and part(path, COMPLETE) is not None

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
            if stays_in(self.sweep_dir, path):
                yield path

    def links_out(self) -> list[str]:
        """A line for each would-be run folder that is a link leading outside the sweep."""
        return [
            f"{path}: a link that leads outside the sweep folder; refusing to read it"
            for path in self._children()
            if not stays_in(self.sweep_dir, path)
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

    def end(self, run_id: str) -> RunEnd | None:
        """How one run ended (its outcome.json alone; None when not written or unusable)."""
        return load_end(self.run_dir(run_id))

    def records(self, include_incomplete: bool = False) -> Iterator[RunRecord]:
        """Every complete run (and the incomplete ones when asked), sorted by folder name."""
        for path in self._run_dirs():
            complete = (path / COMPLETE).is_file()
            if complete or include_incomplete:
                yield load_run(path)


def is_moved_aside(name: str) -> bool:
    """True for a `<run-id>.incomplete-<n>` folder name."""
    return bool(_INCOMPLETE_RE.search(name))
