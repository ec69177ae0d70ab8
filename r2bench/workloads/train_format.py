"""The training workloads' output: one JSON line per optimizer update, on rank 0's stdout.

Both training workloads (`train_emulated`, numpy over the emulated library; `train_torch`,
PyTorch DDP on a GPU) print the same three kinds of line, so one reader serves both:

- `#train-start {...}`: the job: model, parameters, ranks, seed, updates planned, batch, the
  gradient bytes reduced per update, the library that served it (`library`, its file) and the
  functions a stub library stood in for (`stubbed`);
- `#train {...}`: one update: `update` (from 1), `start`/`end` (rank 0's wall clock, unix s),
  `step_s` (the slowest rank's step), `loss` (mean over ranks, float64 from the float32 loss: it
  round-trips JSON exactly, so two runs' losses compare bit for bit), `tokens_per_s`,
  `grad_norm`, `allreduce_bytes`, and every `digest_every` updates `digest` (SHA-256 of rank 0's
  parameters) with `digests_agree` (every rank's digest equal);
- `#train-end {...}`: updates done and the final (mean of the last 10) and evaluation loss.

And the recovery records (docs/recovery.md, "Recovery strategies"), each at the moment it
happens, `at` on rank 0's wall clock:

- `#train-checkpoint {...}`: a checkpoint of update `update` written (`seconds` it took);
- `#train-resume {...}`: the job started again from the checkpoint of update `update`;
- `#train-abort {...}`: the job's watchdog gave up on update `update`'s collective after
  `waited_s` (the job then exits, for its supervisor to restart it);
- `#train-shrink {...}`: the survivors dropped ranks `dropped` (comma list) after update `update`
  failed and go on with `ranks` ranks.

Standard library only: the workloads run on nodes whose Python has little else.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

START_TAG = "#train-start"
UPDATE_TAG = "#train"
END_TAG = "#train-end"
CHECKPOINT_TAG = "#train-checkpoint"
RESUME_TAG = "#train-resume"
ABORT_TAG = "#train-abort"
SHRINK_TAG = "#train-shrink"


def _finite(value: float | None) -> float | None:
    """JSON has no NaN or infinity: a diverged loss is written as null."""
    return value if value is None or math.isfinite(value) else None


class _Record:
    """A training line: its tag, then its fields as one JSON object (keys in field order)."""

    TAG: ClassVar[str] = ""

    def _doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = asdict(self)  # type: ignore[call-overload]
        return doc

    def text(self) -> str:
        """`<tag> {...}`."""
        return f"{self.TAG} {json.dumps(self._doc())}"


@dataclass(frozen=True)
class TrainStart(_Record):
    """The `#train-start` line: what the job trains, on how many ranks, with which library."""

    TAG = START_TAG

    workload: str
    model: str
    parameters: int
    ranks: int
    seed: int
    updates: int
    batch: int
    seq_len: int
    allreduce_bytes: int
    library: str
    library_path: str = ""
    dtype: str = "float32"
    digest_every: int = 0
    stubbed: str = ""
    """Comma list of the NCCL functions a stub library stands in for (empty: none)."""


@dataclass(frozen=True)
class UpdateLine(_Record):
    """One `#train` line: one optimizer update, as rank 0 saw it."""

    TAG = UPDATE_TAG

    update: int
    start: float
    end: float
    step_s: float
    loss: float | None
    tokens_per_s: float
    grad_norm: float | None
    allreduce_bytes: int
    digest: str | None = None
    digests_agree: bool | None = None

    def _doc(self) -> dict[str, Any]:
        """Times to the microsecond; a non-finite loss or norm becomes null."""
        doc = asdict(self)
        doc["start"], doc["end"] = round(self.start, 6), round(self.end, 6)
        doc["loss"], doc["grad_norm"] = _finite(self.loss), _finite(self.grad_norm)
        return doc


@dataclass(frozen=True)
class TrainEnd(_Record):
    """The `#train-end` line."""

    TAG = END_TAG

    updates: int
    final_loss: float | None
    eval_loss: float | None = None

    def _doc(self) -> dict[str, Any]:
        """A non-finite loss becomes null."""
        doc = asdict(self)
        doc["final_loss"], doc["eval_loss"] = _finite(self.final_loss), _finite(self.eval_loss)
        return doc


@dataclass(frozen=True)
class TrainCheckpoint(_Record):
    """The `#train-checkpoint` line: the state after update `update` is on disk."""

    TAG = CHECKPOINT_TAG

    update: int
    at: float
    seconds: float
    path: str = ""


@dataclass(frozen=True)
class TrainResume(_Record):
    """The `#train-resume` line: this start resumes from the checkpoint of update `update`
    (the next update is `update + 1`); `attempt` counts the job's starts from 1."""

    TAG = RESUME_TAG

    update: int
    at: float
    attempt: int = 1
    path: str = ""


@dataclass(frozen=True)
class TrainAbort(_Record):
    """The `#train-abort` line: the watchdog gave up on update `update` after `waited_s`."""

    TAG = ABORT_TAG

    update: int
    at: float
    waited_s: float
    reason: str = ""


@dataclass(frozen=True)
class TrainShrink(_Record):
    """The `#train-shrink` line: update `update` failed; the survivors dropped `dropped` (a
    comma list of ranks of the old group) and go on with `ranks` ranks, redoing that update."""

    TAG = SHRINK_TAG

    update: int
    at: float
    dropped: str
    ranks: int
    detect_s: float | None = None


TrainRecord = (
    TrainStart | UpdateLine | TrainEnd | TrainCheckpoint | TrainResume | TrainAbort | TrainShrink
)
_TAGS: dict[str, type] = {
    cls.TAG: cls
    for cls in (
        TrainStart,
        UpdateLine,
        TrainEnd,
        TrainCheckpoint,
        TrainResume,
        TrainAbort,
        TrainShrink,
    )
}


def _is_float(value: Any) -> bool:
    """A finite number a float holds (a whole number of 400 digits is not one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


_CHECKS: dict[str, Callable[[Any], bool]] = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool) and abs(v) < 1 << 63,
    "float": _is_float,
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
}


def _typed(cls: type, doc: dict[str, Any]) -> dict[str, Any] | None:
    """The keys `cls` knows, each of its declared type (`float | None` takes null), or None
    where one is not."""
    out: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in doc:
            continue
        value, kinds = doc[f.name], str(f.type).replace(" ", "").split("|")
        if value is None and "None" in kinds:
            out[f.name] = None
        elif any(_CHECKS[k](value) for k in kinds if k in _CHECKS):
            out[f.name] = float(value) if kinds[0] == "float" else value
        else:
            return None
    return out


def read_line(text: str) -> TrainRecord | None:
    """The training record a stdout line holds, or None (another line, or a damaged one:
    a job killed mid-print leaves half a line). Unknown keys are ignored (newer workloads)."""
    tag, _, body = text.strip().partition(" ")
    cls = _TAGS.get(tag)
    if cls is None or not body.startswith("{"):
        return None
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    values = _typed(cls, doc) if isinstance(doc, dict) else None
    try:
        return cls(**values) if values is not None else None
    except TypeError:  # a required key missing
        return None
