"""What a training workload logged: its `#train-start`, `#train` and `#train-end` lines, and the
NCCL functions a stub library stood in for that the job called.

Both training workloads print one line per optimizer update on rank 0's stdout
(`r2bench.workloads.train_format`); a launcher may put its prefix before each
(`[1,0]<stdout>:`), so a line is searched for its tag, as `parse.verify` finds `#iter`. A stub
library (`r2bench.setup.stubs`) writes `r2bench-nccl-stub: NAME called: ...` on stderr the first
time the job calls a function the NCCL under test lacks.

`parse_training(stdout, stderr)` gives a `TrainingLog`: the start line, the updates in update
order (a repeated update kept once, as first printed; every line as printed too when one was
repeated: a restarted job redoes the updates since its checkpoint), the end line, the recovery
records (`#train-checkpoint`, `-resume`, `-abort`, `-shrink`) and the stubs called; None
when the output holds no training line. The updates are kept as columns of C numbers
(`Updates`), not an object per update: a run of 100,000 updates is read in a fraction of a
second and held in a few MB. Pure, standard library only; never raises on bad input (a line
cut short by a killed job, or holding a value of another type, is counted and skipped).
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from r2bench.workloads.train_format import (
    ABORT_TAG,
    CHECKPOINT_TAG,
    END_TAG,
    RESUME_TAG,
    SHRINK_TAG,
    START_TAG,
    UPDATE_TAG,
    TrainAbort,
    TrainCheckpoint,
    TrainEnd,
    TrainResume,
    TrainShrink,
    TrainStart,
    UpdateLine,
    read_line,
)

TAG = b"#train"
"""What every training line holds (`#train`, `#train-start`, `#train-end`)."""
STUB_MARK = "r2bench-nccl-stub:"
# The line a called stub writes (`r2bench.setup.stubs.CALLED_LINE`, which this floor of the
# package cannot import; tests/unit/test_training_parse.py checks the two read the same lines).
STUB_LINE = re.compile(
    re.escape(STUB_MARK)
    + r" (?P<name>p?nccl[A-Z]\w*) called: the NCCL under test \((?P<provider>.*)\) lacks it"
)
MAX_LINE = 1 << 16
"""A training line longer than this is no line a workload printed: skipped."""
_INT64 = 1 << 63
_FLOATS = ("start", "end", "step_s", "tokens_per_s")
_UPDATE_HEAD = (UPDATE_TAG + " {").encode()
_DECODER = json.JSONDecoder()
RecoveryRecord = TrainCheckpoint | TrainResume | TrainAbort | TrainShrink
"""A recovery record (`#train-checkpoint`, `-resume`, `-abort`, `-shrink`)."""
_DASH_TAGS = tuple(
    (tag + " ").encode()
    for tag in (START_TAG, END_TAG, CHECKPOINT_TAG, RESUME_TAG, ABORT_TAG, SHRINK_TAG)
)
UpdateValues = tuple[
    int, float, float, float, float | None, float, float | None, int, str | None, bool | None
]
"""An update line's values in `UpdateLine`'s field order."""


# --------------------------------------------------------------------------- the updates


@dataclass
class Updates(Sequence[UpdateLine]):
    """The updates of a run as columns, in update order: numbers in C arrays (a loss or grad
    norm the workload wrote as null, a non-finite value, is NaN here and None when read back as
    an `UpdateLine`); the digests, logged every few updates, in two lists."""

    update: array[int] = field(default_factory=lambda: array("q"))
    start: array[float] = field(default_factory=lambda: array("d"))
    end: array[float] = field(default_factory=lambda: array("d"))
    step_s: array[float] = field(default_factory=lambda: array("d"))
    loss: array[float] = field(default_factory=lambda: array("d"))
    tokens_per_s: array[float] = field(default_factory=lambda: array("d"))
    grad_norm: array[float] = field(default_factory=lambda: array("d"))
    allreduce_bytes: array[int] = field(default_factory=lambda: array("q"))
    digest: list[str | None] = field(default_factory=list)
    digests_agree: list[bool | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.update)

    def __getitem__(self, i: int) -> UpdateLine:  # type: ignore[override]
        return UpdateLine(
            self.update[i], self.start[i], self.end[i], self.step_s[i], _opt(self.loss[i]),
            self.tokens_per_s[i], _opt(self.grad_norm[i]), self.allreduce_bytes[i],
            self.digest[i], self.digests_agree[i],
        )  # fmt: skip

    def __iter__(self) -> Iterator[UpdateLine]:
        return (self[i] for i in range(len(self)))

    def append(self, u: UpdateLine) -> None:
        """Add one update at the end."""
        self.add(
            u.update, u.start, u.end, u.step_s, u.loss, u.tokens_per_s, u.grad_norm,
            u.allreduce_bytes, u.digest, u.digests_agree,
        )  # fmt: skip

    def add(
        self, update: int, start: float, end: float, step_s: float, loss: float | None,
        tokens_per_s: float, grad_norm: float | None, allreduce_bytes: int, digest: str | None,
        digests_agree: bool | None,
    ) -> None:  # fmt: skip
        """Add one update at the end, from its values in `UpdateLine`'s order."""
        self.update.append(update)
        self.start.append(start)
        self.end.append(end)
        self.step_s.append(step_s)
        self.loss.append(math.nan if loss is None else loss)
        self.tokens_per_s.append(tokens_per_s)
        self.grad_norm.append(math.nan if grad_norm is None else grad_norm)
        self.allreduce_bytes.append(allreduce_bytes)
        self.digest.append(digest)
        self.digests_agree.append(digests_agree)

    def index_of(self, update: int) -> int | None:
        """Where update number `update` is, or None (not logged)."""
        lo, hi = 0, len(self.update)
        while lo < hi:  # bisection: the numbers are in order
            mid = (lo + hi) // 2
            if self.update[mid] < update:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < len(self.update) and self.update[lo] == update else None

    def ordered(self) -> tuple[Updates, int]:
        """These updates in update order, each number once (the first printed kept), and how
        many repeats were dropped."""
        numbers = self.update
        if all(a < b for a, b in pairwise(numbers)):
            return self, 0
        keep: dict[int, int] = {}
        for i, n in enumerate(numbers):
            keep.setdefault(n, i)
        out = Updates()
        for n in sorted(keep):
            out.append(self[keep[n]])
        return out, len(numbers) - len(keep)

    @classmethod
    def of(cls, lines: Iterable[UpdateLine]) -> Updates:
        """From update lines, in the order given."""
        out = cls()
        for line in lines:
            out.append(line)
        return out


def _opt(value: float) -> float | None:
    return None if value != value else value


# --------------------------------------------------------------------------- the log


@dataclass(frozen=True)
class TrainingLog:
    """What a training run logged (see the module docstring)."""

    start: TrainStart | None
    updates: Updates
    end: TrainEnd | None
    stubs: tuple[str, ...] = ()
    """NCCL functions a stub stood in for that the job called, in the order first called."""
    unreadable: int = 0
    """Training lines that could not be read (cut short, or a value of another type)."""
    repeated: int = 0
    """Updates printed more than once (each kept once, as first printed)."""
    recovery: tuple[RecoveryRecord, ...] = ()
    """The recovery records, as printed (a restarted job's attempts one after another)."""
    printed: Updates | None = None
    """Every update line as printed, repeats included (a restart redoes the updates since its
    checkpoint); None when no update was printed twice (then it is `updates`)."""

    @property
    def as_printed(self) -> Updates:
        """Every update line in print order, repeats included."""
        return self.printed if self.printed is not None else self.updates

    @property
    def complete(self) -> bool:
        """The workload printed its `#train-end` line: every update it planned was done."""
        return self.end is not None

    @property
    def planned(self) -> int | None:
        """Updates the job was to run (its start line's), None when that line is missing."""
        return self.start.updates if self.start is not None else None

    @property
    def last_update(self) -> int | None:
        """The number of the last update logged (None: none)."""
        return self.updates.update[-1] if len(self.updates) else None

    @property
    def disagreement(self) -> int | None:
        """The first update after which the ranks' parameter digests differed, or None."""
        for i, agree in enumerate(self.updates.digests_agree):
            if agree is False:
                return self.updates.update[i]
        return None

    def progress(self) -> str:
        """`37 of 100 updates` (`37 updates` when the plan is not known)."""
        n, planned = len(self.updates), self.planned
        return f"{n} of {planned} updates" if planned is not None else f"{n} updates"


@dataclass
class _Reader:
    start: TrainStart | None = None
    end: TrainEnd | None = None
    updates: Updates = field(default_factory=Updates)
    recovery: list[RecoveryRecord] = field(default_factory=list)
    unreadable: int = 0

    def update(self, body: bytes) -> None:
        """A `#train` line's JSON (read as it comes: no line is held)."""
        values = _update_values(_document(body))
        if values is None:
            self.unreadable += 1
        else:
            self.updates.add(*values)

    def line(self, text: str) -> None:
        """Any other training line (`read_line`)."""
        record = read_line(text)
        if isinstance(record, UpdateLine):
            self.updates.append(record)
        elif isinstance(record, TrainStart):
            self.start = self.start or record  # a second job's start line: the first job's
        elif isinstance(record, TrainEnd):
            self.end = record
        elif isinstance(record, TrainCheckpoint | TrainResume | TrainAbort | TrainShrink):
            self.recovery.append(record)
        else:
            self.unreadable += 1


def parse_training(stdout: str | bytes, stderr: str | bytes | None = None) -> TrainingLog | None:
    """The training log of a run's stdout (its `#train...` lines) and stderr (stubs called);
    None when stdout holds no training line."""
    data = stdout.encode("utf-8", "surrogateescape") if isinstance(stdout, str) else stdout
    at = data.find(TAG)
    if at < 0:
        return None
    reader = _Reader()
    while at >= 0:
        stop = data.find(b"\n", at)
        stop = len(data) if stop < 0 else stop
        if stop - at > MAX_LINE:
            reader.unreadable += 1
        elif data.startswith(_UPDATE_HEAD, at):  # the bulk: read straight from the bytes
            reader.update(data[at + len(_UPDATE_HEAD) - 1 : stop])
        elif _is_tag(data, at):
            reader.line(data[at:stop].decode("utf-8", "replace").rstrip())
        at = data.find(TAG, stop)
    if not (reader.start or reader.end or reader.updates or reader.unreadable or reader.recovery):
        return None
    updates, repeated = reader.updates.ordered()
    return TrainingLog(
        reader.start, updates, reader.end, called_stubs(stderr), reader.unreadable, repeated,
        tuple(reader.recovery), reader.updates if repeated else None,
    )  # fmt: skip


def _is_tag(data: bytes, at: int) -> bool:
    """Whether the `#train` at `at` begins a training line's tag (not `#training` in prose)."""
    after = data[at + len(TAG) : at + len(TAG) + 1]
    if after == b"-":
        return data.startswith(_DASH_TAGS, at)
    return after == b" "


def read_training(stdout: Path | None, stderr: Path | None = None) -> TrainingLog | None:
    """The training log of a run's stdout and stderr files; None when there is none or stdout
    cannot be read (a stderr that cannot be read names no stub)."""
    if stdout is None:
        return None
    try:
        data = stdout.read_bytes()
    except OSError:
        return None
    if TAG not in data:
        return None  # most outputs are nccl-tests': one byte search
    errors = None
    if stderr is not None:
        try:
            errors = stderr.read_bytes()
        except OSError:
            errors = None
    return parse_training(data, errors)


def called_stubs(stderr: str | bytes | None) -> tuple[str, ...]:
    """The functions whose stubs said on stderr that they were called, in the order of their
    first line, each once."""
    if not stderr:
        return ()
    mark = STUB_MARK.encode() if isinstance(stderr, bytes) else STUB_MARK
    if mark not in stderr:  # type: ignore[operator]
        return ()
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
    found: dict[str, None] = {}
    for match in STUB_LINE.finditer(text):
        found.setdefault(match["name"], None)
    return tuple(found)


# --------------------------------------------------------------------------- one update line


def _document(body: bytes) -> Any:
    """A line's JSON document (bytes that are not UTF-8 refused), None where it holds none."""
    try:
        return _DECODER.decode(body.decode())  # json.loads less its per-call checks
    except (ValueError, RecursionError):
        return None


def _update_values(doc: Any) -> UpdateValues | None:
    """A `#train` line's JSON document read as `train_format.read_line` reads it (the same
    keys, types and refusals), without its per-field reflection: a long run has 100,000."""
    if not isinstance(doc, dict):
        return None
    try:
        update, size = doc["update"], doc["allreduce_bytes"]
        floats = [_number(doc[name]) for name in _FLOATS]
        loss, norm = _optional(doc.get("loss")), _optional(doc.get("grad_norm"))
        if "loss" not in doc or "grad_norm" not in doc:
            return None
    except (KeyError, _Refused):
        return None
    digest, agree = doc.get("digest"), doc.get("digests_agree")
    if not (_is_int(update) and _is_int(size)):
        return None
    if not (digest is None or type(digest) is str) or not (agree is None or type(agree) is bool):
        return None
    start, end, step_s, tokens = floats
    return (update, start, end, step_s, loss, tokens, norm, size, digest, agree)


class _Refused(Exception):
    """A value of another type than its field's."""


def _is_int(value: Any) -> bool:
    return type(value) is int and -_INT64 < value < _INT64


def _number(value: Any) -> float:
    """A finite number as a float (a whole number too large for one is refused)."""
    if type(value) is float:
        if math.isfinite(value):
            return value
    elif type(value) is int:
        try:
            return float(value)
        except OverflowError:
            pass
    raise _Refused


def _optional(value: Any) -> float | None:
    return None if value is None else _number(value)
