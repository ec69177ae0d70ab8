"""The field's outcome classes of a run under a fault, beside r2bench's own outcome (pure).

Fault-tolerance studies score each trial as one of TRANSPARENT (the job never noticed),
DECLINED (a clean error), HUNG, SILENT_WRONG (finished with wrong data) or OTHER, and set
aside the trials whose fault missed. r2bench's outcome (`parse.models.OutcomeStatus`) says
more; this maps it onto those classes, the same way for every library:

| outcome                                               | verdict      |
|-------------------------------------------------------|--------------|
| ok                                                    | TRANSPARENT  |
| wrong_results                                         | SILENT_WRONG |
| crashed                                               | DECLINED     |
| timeout                                               | HUNG         |
| incomplete                                            | OTHER        |
| fault_missed, fault_not_injected, fault_without_effect| MISSED       |
| launch_failed, build_failed, interrupted, not_nccl_tests, wrong_library, no outcome | UNSCORED |
| any outcome of a run without a fault                  | NO_FAULT     |

Why these: `ok` under a fault the evidence says hit traffic means the job finished with
every element right and no error (the classifier turns an ok run whose fault touched no
traffic into `fault_without_effect` first). `wrong_results` is the data checker's finding:
the library reported nothing. `crashed` covers every way the job stopped with an error, a
rank's death by signal included: it stopped rather than hang or lie. `incomplete` output ends
short with no sign of why: neither hung (the deadline did not end it) nor declined. A run that
never tested the fault (it did not launch, or was interrupted) is not scored at all.
"""

from __future__ import annotations

from enum import Enum

from r2bench.parse.models import OutcomeStatus


class OutcomeClass(str, Enum):
    """A run's outcome class (the `verdict` column)."""

    TRANSPARENT = "TRANSPARENT"
    DECLINED = "DECLINED"
    HUNG = "HUNG"
    SILENT_WRONG = "SILENT_WRONG"
    OTHER = "OTHER"
    MISSED = "MISSED"
    """The fault did not hit the job: it landed between or after its collectives, on a NIC
    carrying nothing, or never fired."""
    UNSCORED = "UNSCORED"
    """The run never tested the fault: it did not build, launch or finish being run."""
    NO_FAULT = "NO_FAULT"
    """A run without a fault: the classes describe faulted trials only."""


SCORED = (
    OutcomeClass.TRANSPARENT,
    OutcomeClass.DECLINED,
    OutcomeClass.HUNG,
    OutcomeClass.SILENT_WRONG,
    OutcomeClass.OTHER,
    OutcomeClass.MISSED,
)
"""The classes a prediction may state and a confusion table counts."""

_MAPPING: dict[OutcomeStatus, OutcomeClass] = {
    OutcomeStatus.OK: OutcomeClass.TRANSPARENT,
    OutcomeStatus.WRONG_RESULTS: OutcomeClass.SILENT_WRONG,
    OutcomeStatus.CRASHED: OutcomeClass.DECLINED,
    OutcomeStatus.TIMEOUT: OutcomeClass.HUNG,
    OutcomeStatus.INCOMPLETE: OutcomeClass.OTHER,
    OutcomeStatus.FAULT_MISSED: OutcomeClass.MISSED,
    OutcomeStatus.FAULT_NOT_INJECTED: OutcomeClass.MISSED,
    OutcomeStatus.FAULT_WITHOUT_EFFECT: OutcomeClass.MISSED,
    OutcomeStatus.LAUNCH_FAILED: OutcomeClass.UNSCORED,
    OutcomeStatus.BUILD_FAILED: OutcomeClass.UNSCORED,
    OutcomeStatus.INTERRUPTED: OutcomeClass.UNSCORED,
    OutcomeStatus.NOT_NCCL_TESTS: OutcomeClass.UNSCORED,
    OutcomeStatus.WRONG_LIBRARY: OutcomeClass.UNSCORED,  # it tested another library
}


def verdict_of(status: OutcomeStatus | str | None, faulted: bool) -> OutcomeClass:
    """The outcome class of a run that ended with `status` (None: no outcome recorded, the
    run did not finish); `faulted`: whether a fault was applied to it (or declared in
    software, R2CC_DISCONNECTED_HCA)."""
    if not faulted:
        return OutcomeClass.NO_FAULT
    if status is None:
        return OutcomeClass.UNSCORED
    try:
        return _MAPPING[OutcomeStatus(status)]
    except ValueError:
        return OutcomeClass.UNSCORED  # an outcome this version does not know (an older record)


def mapping() -> dict[OutcomeStatus, OutcomeClass]:
    """Every outcome and its class (docs and tests read it; a new outcome must be added)."""
    return dict(_MAPPING)
