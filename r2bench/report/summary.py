"""The answer a report opens with: per library and mode, under each fault scenario, what
happened, as one `SummaryRow` each, built from the runs and windows tables.

A row holds the runs of one library, R2CC_MODE and scenario: their outcomes, the fault they
were under (from the windows table) and one `Measure` per `SummaryColumn` (a runs-table column:
the recovery metrics of `analysis.metrics`, the average busbw). `SummaryRow.sentence()` says the
row in plain words. The page (`report.summary_html`) draws rows and columns as they come, so a
new workload adds its numbers as columns (a `SummaryColumn` naming its runs-table column, e.g.
a training job's time lost) and its runs as rows, with no HTML of its own.

Training runs add `TRAINING_COLUMNS`, read from the `training_checks` table (joined onto their
runs): the update the fault hit, its step time, the median step against the baseline run's,
and whether the run is bit-identical to the baseline run (or from which update it differs).
`summary_columns` picks a sweep's columns: the collective ones where it has collective runs
(else only those a training run has a value of), then the training ones where it has any.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from statistics import median
from typing import Any

import pandas as pd

from r2bench.report import numbers
from r2bench.report.charts import human_size
from r2bench.report.series import BASELINE_SCENARIO, MODE_ENV, is_cpu, is_stock
from r2bench.tables.build import Tables

R2CCL_RECIPES = frozenset({"r2ccl", "emulated-lib"})
"""Recipes of R-2CCL and of its emulation (their runs are named R-2CCL in the summary)."""
GOOD, BAD, MIXED = "good", "bad", "mixed"


@dataclass(frozen=True)
class SummaryColumn:
    """One number per summary row: a runs-table column, how it reads in the table and in a
    sentence. Each phrase ("detected in {}") takes the value with its unit: `phrase` of runs
    that survived their fault, `failed_phrase` of runs that did not, `fault_free_phrase` of
    runs without a fault ('' leaves the number out of that sentence)."""

    key: str
    header: str
    unit: str
    phrase: str = ""
    failed_phrase: str = ""
    fault_free_phrase: str = ""
    faulted_only: bool = True
    """Left blank on fault-free rows (a stall without a fault means nothing)."""
    number: Callable[[Any], str] = numbers.significant
    text: bool = False
    """Its values are words (`bit-identical`), not numbers: the most common is said."""
    words: Callable[[Any], str] | None = None
    """How a sentence says a value (default: `number` and the unit)."""
    note: str = ""
    """What it means, said under the table when the column is shown."""

    def said(self, value: float | str) -> str:
        """The value with its unit, as a sentence says it."""
        if self.words is not None:
            return self.words(value)
        return f"{self.number(value)} {self.unit}".strip()


SUMMARY_COLUMNS: tuple[SummaryColumn, ...] = (
    SummaryColumn("detect_s", "detected after (s)", "s", "detected in {}",
                  failed_phrase="its first error came {} after the fault"),
    SummaryColumn("stall_s", "longest stall (s)", "s", "stalled {}"),
    SummaryColumn("degraded_ratio", "busbw during the fault ÷ before", "",
                  "then ran at {} of its pre-fault busbw"),
    SummaryColumn("failback_ratio", "busbw after the link came back ÷ before", "",
                  "{} after the link came back"),
    SummaryColumn("avg_busbw_gbps", "average busbw (GB/s)", "GB/s",
                  fault_free_phrase="average busbw {}", faulted_only=False, number=numbers.gbps),
)  # fmt: skip
"""The summary's numbers, in column order (see the module docstring to add one)."""


def _whole(value: Any) -> str:
    """An update number: `21`."""
    return str(int(value))


def _signed(value: Any) -> str:
    """A change in %, signed: `+4.73`, `-0.5`, `0`."""
    text = numbers.significant(value)
    return text if text.startswith("-") or text in ("", "0") else f"+{text}"


_TO_BASELINE = " to the baseline run"


def _identity_cell(value: Any) -> str:
    """`bit-identical before update 21` of `bit-identical to the baseline run before ...`."""
    return str(value).replace(_TO_BASELINE, "")


TRAINING_COLUMNS: tuple[SummaryColumn, ...] = (
    SummaryColumn("hit_update", "update the fault hit", "", "the fault hit update {}",
                  failed_phrase="the fault hit update {}", number=_whole),
    SummaryColumn("hit_step_s", "that update's step (s)", "s", "it took {}",
                  note="that update's step: the slowest rank's step time of the update the "
                  "fault hit (R-2CCL's artifact test 09 saw about 1.4 s against 0.5 s)"),
    SummaryColumn("overhead_pct", "median step vs the baseline run's (%)", "%",
                  "median step {} against the baseline run's",
                  failed_phrase="median step {} against the baseline run's until it stopped",
                  fault_free_phrase="median step {} against the baseline run's",
                  faulted_only=False, number=_signed,
                  note="median step vs the baseline run's: the run's median step time against "
                  "that of the fault-free run of the experiment's training.baseline library"),
    SummaryColumn("identity", "against the baseline run", "", "{}", failed_phrase="{}",
                  fault_free_phrase="{}", faulted_only=False, number=_identity_cell, text=True,
                  words=str,
                  note="bit-identical: every update's loss and grad norm and every parameter "
                  "digest both logged equal bit for bit (under a fault: every update before "
                  "the one it hit)"),
)  # fmt: skip
"""A training run's answers, from the `training_checks` table (`analysis.training`)."""
TRAINING_KEYS = frozenset(c.key for c in TRAINING_COLUMNS)


@dataclass(frozen=True)
class Measure:
    """One column's values over the runs of a row (where defined) and why the others have
    none (the most common reason the runs table gives)."""

    values: tuple[float, ...] = ()
    missing: str = ""
    texts: tuple[str, ...] = ()
    """A text column's values (`SummaryColumn.text`)."""

    @property
    def defined(self) -> bool:
        """Whether any run of the row has a value."""
        return bool(self.values or self.texts)

    @property
    def text(self) -> str:
        """A text column's most common value ('' when none)."""
        return Counter(self.texts).most_common(1)[0][0] if self.texts else ""

    @property
    def median(self) -> float:
        """The median over the runs that have a value (NaN when none has)."""
        return float(median(self.values)) if self.values else float("nan")

    def cell(self, column: SummaryColumn) -> str:
        """Table text: the median, and the range over runs when there are several (a text
        column: its value, or each value with its count of runs when they differ)."""
        if self.texts:
            counts = Counter(self.texts).most_common()
            if len(counts) == 1:
                return counts[0][0]
            return "; ".join(f"{text} ({n} runs)" for text, n in counts)
        if not self.values:
            return ""
        text = column.number(self.median)
        if len(self.values) > 1:
            lo, hi = column.number(min(self.values)), column.number(max(self.values))
            text += f" ({lo}–{hi}, {len(self.values)} runs)"
        return text


@dataclass(frozen=True)
class Outcome:
    """How a group of runs ended, in the summary's words: `survived`, `crashed`, `hung`, ..."""

    word: str
    verb: str
    """How a sentence says it of a fault: `crashed under`, `hung under` (timed out)."""
    tone: str


_FAULTED_OUTCOMES: Mapping[str, Outcome] = {
    "ok": Outcome("survived", "survived", GOOD),
    "crashed": Outcome("crashed", "crashed under", BAD),
    "timeout": Outcome("hung", "hung (timed out) under", BAD),
    "wrong_results": Outcome("wrong results", "gave wrong results under", BAD),
    "fault_without_effect": Outcome(
        "fault touched no traffic", "ran on: the fault touched no traffic, so nothing survived",
        MIXED,
    ),
    "fault_not_injected": Outcome("fault not injected", "ran without its fault", MIXED),
    "fault_missed": Outcome("fault missed", "ran on: the fault missed a running collective",
                            MIXED),
    "wrong_library": Outcome("another NCCL ran", "ran another NCCL under", BAD),
}  # fmt: skip
_FAULT_FREE_OUTCOMES: Mapping[str, Outcome] = {
    "ok": Outcome("ok", "ended ok", GOOD),
    "crashed": Outcome("crashed", "crashed", BAD),
    "timeout": Outcome("hung", "hung (timed out)", BAD),
    "wrong_results": Outcome("wrong results", "gave wrong results", BAD),
    "wrong_library": Outcome("another NCCL ran", "ran another NCCL", BAD),
}


def outcome_of(status: str, faulted: bool) -> Outcome:
    """The summary's words for a run outcome, under a fault or without one."""
    known = (_FAULTED_OUTCOMES if faulted else _FAULT_FREE_OUTCOMES).get(status)
    if known:
        return known
    words = status.replace("_", " ")
    return Outcome(words, f"ended {words}", MIXED)


@dataclass(frozen=True)
class SummaryRow:
    """The runs of one library, mode and scenario, and what they show."""

    subject: str
    """`stock NCCL`, `R-2CCL mode 0`, or the library's own name."""
    library: str
    """The library as the experiment named it (`r2ccl-m0`)."""
    scenario: str
    fault: str
    """What the fault was, in words (`node1's nic1 going down`); '' without a fault."""
    outcomes: tuple[tuple[str, int], ...]
    """(run outcome, runs), most runs first."""
    measures: Mapping[str, Measure] = field(default_factory=dict)
    cpu: bool = False

    @property
    def runs(self) -> int:
        """How many runs the row holds."""
        return sum(n for _, n in self.outcomes)

    @property
    def faulted(self) -> bool:
        """Whether the row's runs had a fault."""
        return bool(self.fault)

    @property
    def outcome(self) -> Outcome:
        """The row's outcome; mixed outcomes are counted (`survived 2/3, crashed 1/3`)."""
        if len(self.outcomes) == 1:
            return outcome_of(self.outcomes[0][0], self.faulted)
        parts = [f"{outcome_of(s, self.faulted).word} {n}/{self.runs}" for s, n in self.outcomes]
        text = ", ".join(parts)
        return Outcome(text, text, MIXED)

    def sentence(self, columns: tuple[SummaryColumn, ...] = SUMMARY_COLUMNS) -> str:
        """The row in one plain sentence, e.g. `R-2CCL mode 0 survived node1's nic1 going down:
        detected in 0.468 s, stalled 0.944 s, then ran at 0.783 of its pre-fault busbw`."""
        outcome = self.outcome
        if not self.faulted:
            said = self._said(columns, "fault_free_phrase")
            how = f"{outcome.verb} without a fault" if len(self.outcomes) == 1 else outcome.word
            return f"{self.subject} {how}" + (f": {said}." if said else ".")
        if len(self.outcomes) > 1:  # the numbers are over all its runs: said after a `;`
            said = self._said(columns, "phrase")
            head = f"{self.subject} under {self.fault}: {outcome.word}"
            return head + (f"; {said}." if said else ".")
        said = self._said(columns, "phrase" if outcome.tone == GOOD else "failed_phrase")
        head = f"{self.subject} {outcome.verb} {self.fault}"
        return head + (f": {said}." if said else ".")

    def _said(self, columns: tuple[SummaryColumn, ...], which: str) -> str:
        """The columns' phrases of one kind (`phrase`, `failed_phrase`...), joined."""
        parts = []
        for column in columns:
            phrase = getattr(column, which)
            measure = self.measures.get(column.key)
            if phrase and measure and measure.defined:
                value = measure.text if column.text else measure.median
                parts.append(phrase.format(column.said(value)))
        return ", ".join(parts)


# --------------------------------------------------------------------------- from the tables

_FAULT_PHRASES = {
    "link_down": "{node}'s {nic} going down",
    "ib_port_down": "{node}'s {nic} port going down",
    "route_drop": "traffic leaving {node}'s {nic} being dropped",
    "flow_drop": "{node}'s {nic} being cut at its switch port",
    "bandwidth_cap": "{node}'s {nic} being capped",
    "process_stop": "a rank on {node} being stopped",
    "process_kill": "a rank on {node} being killed",
}


def fault_words(kind: str, node: str, nic: str, cycles: int = 1) -> str:
    """A fault in words: `node1's nic1 going down` (`... (3 times)` for a flap)."""
    template = _FAULT_PHRASES.get(kind, "{kind} on {node}/{nic}")
    text = template.format(kind=kind, node=node, nic=nic)
    return f"{text} ({cycles} times)" if cycles > 1 else text


def subject_of(row: Mapping[str, Any], mode: str) -> str:
    """`stock NCCL`, `R-2CCL mode 0`, or the library's name with its mode."""
    if is_stock(row):
        name = "stock NCCL"
    elif str(row.get("library_recipe") or "") in R2CCL_RECIPES:
        name = "R-2CCL"
    else:
        name = str(row.get("library") or "unknown library")
    return f"{name} mode {mode}" if mode else name


def _text(value: Any) -> str:
    return "" if value is None or value is pd.NA or value != value else str(value)


def faults_by_run(windows: pd.DataFrame) -> dict[str, str]:
    """Each faulted run's fault in words (its first window's kind, node and NIC, and its
    cycles), in the order the runs first appear in the windows table. One pass over the
    whole table: per group of runs it was a groupby each, a fifth of a warm report's time
    on 1,000 runs."""
    if windows.empty:
        return {}
    ordered = windows.sort_values("applied_at", kind="stable").drop_duplicates("run_id")
    cycles = windows.groupby("run_id", sort=False).size()
    first = {
        str(run): fault_words(str(kind), str(node), str(nic), int(cycles[run]))
        for run, kind, node, nic in zip(
            ordered["run_id"], ordered["kind"], ordered["node"], ordered["nic"], strict=True
        )
    }
    return {str(run): first[str(run)] for run in pd.unique(windows["run_id"])}


def _fault_of(runs: pd.DataFrame, faults: dict[str, str]) -> str:
    """The fault of a group's runs in words: the most common over its faulted runs ('' when
    none had a fault)."""
    mine = set(runs["run_id"])
    said = Counter(words for run, words in faults.items() if run in mine)
    return said.most_common(1)[0][0] if said else ""


def _measure(runs: pd.DataFrame, key: str, text: bool = False) -> Measure:
    if key not in runs.columns:
        return Measure(missing=f"no {key} column in the runs table")
    if text:
        said = tuple(_text(v) for v in runs[key] if _text(v))
        reasons = [_text(r) for r in runs.get(f"{key}_reason", []) if _text(r)]
        missing = Counter(reasons).most_common(1)[0][0] if reasons and not said else ""
        return Measure(missing=missing, texts=said)
    values = pd.to_numeric(runs[key], errors="coerce")
    defined = tuple(float(v) for v in values if v == v)
    reasons = runs.get(f"{key}_reason")
    missing = ""
    if reasons is not None:
        undefined = [_text(r) for r, v in zip(reasons, values, strict=True) if v != v and _text(r)]
        missing = Counter(undefined).most_common(1)[0][0] if undefined else ""
    return Measure(defined, missing)


def _order(row: SummaryRow) -> tuple[Any, ...]:
    """Faulted scenarios first, fault-free last; stock NCCL first, then by name and mode."""
    return (not row.faulted, row.scenario, not row.subject.startswith("stock"), row.subject,
            row.library)  # fmt: skip


def summary_rows(
    tables: Tables, columns: tuple[SummaryColumn, ...] = SUMMARY_COLUMNS
) -> list[SummaryRow]:
    """One row per library, R2CC_MODE and scenario of the sweep's runs."""
    runs = tables.runs
    if runs.empty:
        return []
    frame = with_training_checks(runs.copy(), tables.training_checks)
    mode = frame[MODE_ENV] if MODE_ENV in frame.columns else pd.Series([None] * len(frame))
    frame["_mode"] = [_text(v) for v in mode]
    frame["_library"] = [_text(v) for v in frame["library"]]
    frame["_scenario"] = [_text(v) for v in frame["scenario"]]
    frame["_strategy"] = _strategies(frame, tables)
    faults = faults_by_run(tables.windows)
    rows = []
    for (library, mode_text, scenario, strategy), group in frame.groupby(
        ["_library", "_mode", "_scenario", "_strategy"], sort=True
    ):
        first = group.iloc[0].to_dict()
        fault = _fault_of(group, faults)
        if not fault and scenario != BASELINE_SCENARIO and (group["n_faults"] > 0).any():
            fault = f"scenario {scenario}"  # faults without a window row: still faulted
        counts = Counter(str(o) for o in group["outcome"]).most_common()
        rows.append(
            SummaryRow(
                subject=subject_of(first, str(mode_text)) + (f" ({strategy})" if strategy else ""),
                library=str(library),
                scenario=str(scenario),
                fault=fault,
                outcomes=tuple(counts),
                measures={c.key: _measure(group, c.key, c.text) for c in columns},
                cpu=is_cpu(first),
            )
        )
    return sorted(rows, key=_order)


def _strategies(frame: pd.DataFrame, tables: Tables) -> list[str]:
    """Each run's recovery strategy ('' for runs without one): the same job under two
    strategies is two answers, never one mixed count."""
    cost = getattr(tables, "recovery_cost", None)
    if cost is None or cost.empty:
        return [""] * len(frame)
    by_run = dict(zip(cost["run_id"], cost["strategy"], strict=True))
    return [_text(by_run.get(run_id, "")) for run_id in frame["run_id"]]


def summary_columns(tables: Tables) -> tuple[SummaryColumn, ...]:
    """The summary's columns for this sweep: `SUMMARY_COLUMNS` (of a sweep of training runs
    only, those a run has a value of), then `TRAINING_COLUMNS` where it has training runs."""
    checks = tables.training_checks
    if checks.empty:
        return SUMMARY_COLUMNS
    runs = tables.runs
    trained = set(checks["run_id"])
    if not runs["run_id"].isin(trained).all():
        return (*SUMMARY_COLUMNS, *TRAINING_COLUMNS)
    shown = tuple(
        c
        for c in SUMMARY_COLUMNS
        if c.key in runs.columns and pd.to_numeric(runs[c.key], errors="coerce").notna().any()
    )
    return (*shown, *TRAINING_COLUMNS)


def with_training_checks(runs: pd.DataFrame, checks: pd.DataFrame) -> pd.DataFrame:
    """The runs frame with each training run's `TRAINING_COLUMNS` (and why one has none, in
    `<key>_reason`) from its `training_checks` row; unchanged without training runs."""
    if checks.empty:
        return runs
    by_run = {str(r["run_id"]): r for r in checks.to_dict("records")}
    rows = [_training_values(by_run.get(str(run_id))) for run_id in runs["run_id"]]
    for key in sorted(TRAINING_KEYS):
        runs[key] = [r[0].get(key) for r in rows]
        runs[f"{key}_reason"] = [r[1].get(key, "") for r in rows]
    return runs


def _get(row: Mapping[str, Any], key: str) -> Any:
    """A row's value (Any: a table row holds numbers, texts and NA alike)."""
    return row.get(key)


def _training_values(check: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, str]]:
    """One run's training values and the reasons for those it lacks."""
    if check is None:
        return {}, {key: "not a training run" for key in TRAINING_KEYS}
    values: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    hit = _get(check, "hit_update")
    if _text(hit):
        values["hit_update"] = int(hit)
        step = _get(check, "hit_step_s")
        if _text(step):
            values["hit_step_s"] = float(step)
        else:
            reasons["hit_step_s"] = f"update {int(hit)} never completed"
    else:
        reasons["hit_update"] = reasons["hit_step_s"] = "the fault hit no update"
    baseline = _text(_get(check, "baseline_run_id"))
    no_baseline = "the baseline run itself, or no baseline run to compare with"
    overhead = _get(check, "overhead_pct")
    if _text(overhead):
        values["overhead_pct"] = float(overhead)
    else:
        reasons["overhead_pct"] = no_baseline if not baseline else "no step time"
    identity = _identity_words(check)
    if identity:
        values["identity"] = identity
    else:
        reasons["identity"] = no_baseline
    return values, reasons


def _identity_words(check: Mapping[str, Any]) -> str:
    """`bit-identical to the baseline run` (`... before update 21` under a fault), `not
    bit-identical to the baseline run from update 37`, or '' without a baseline run."""
    identical = _get(check, "identical")
    if not _text(identical):
        return ""
    if bool(identical):
        hit = _get(check, "hit_update")
        return f"bit-identical{_TO_BASELINE}" + (f" before update {int(hit)}" if _text(hit) else "")
    first = _get(check, "first_difference_update")
    return f"not bit-identical{_TO_BASELINE}" + (
        f" from update {int(first)}" if _text(first) else ""
    )


@dataclass(frozen=True)
class SweepFacts:
    """What ran, for the line above the summary table."""

    runs: int
    most_repeats: int
    collectives: tuple[str, ...]
    sizes: tuple[int, int] | None
    nodes: int | None
    cpu: bool
    training: int = 0
    """Runs of a training job (a row of `training_checks`)."""

    def sentence(self) -> str:
        """`8 runs of all_reduce (1 repeat each), 1 MiB to 32 MiB, on 2 nodes.` (`4 training
        runs (1 repeat each), on 3 nodes.` when every run trained)."""
        many = self.most_repeats != 1
        repeats = f"up to {self.most_repeats} repeats" if many else "1 repeat each"
        what = ", ".join(self.collectives) or "no collective"
        if self.training and self.training == self.runs:
            text = f"{self.runs} training runs ({repeats})"
        elif self.training:
            text = f"{self.runs} runs of {what} ({repeats}; {self.training} of them training runs)"
        else:
            text = f"{self.runs} runs of {what} ({repeats})"
        if self.sizes:
            lo, hi = (human_size(s) for s in self.sizes)
            text += f", {lo}" if lo == hi else f", {lo} to {hi}"
        if self.nodes:
            text += f", on {self.nodes} node{'s' if self.nodes != 1 else ''}"
        return text + "."


def sweep_facts(tables: Tables) -> SweepFacts:
    """The runs, repeats, collectives, message sizes and nodes of a sweep."""
    runs = tables.runs
    sizes = pd.to_numeric(tables.results["size_bytes"], errors="coerce").dropna()
    nodes = pd.to_numeric(runs["n_nodes"], errors="coerce").dropna() if len(runs) else None
    keys = [
        k for k in ("library", MODE_ENV, "scenario", "recovery", "collective") if k in runs.columns
    ]
    repeats = runs.groupby(keys, dropna=False).size().max() if len(runs) else 0
    return SweepFacts(
        runs=len(runs),
        most_repeats=int(repeats),
        collectives=tuple(sorted({_text(c) for c in runs["collective"] if _text(c)})),
        sizes=(int(sizes.min()), int(sizes.max())) if len(sizes) else None,
        nodes=int(nodes.max()) if nodes is not None and len(nodes) else None,
        cpu=bool(len(runs)) and all(is_cpu(r) for r in runs.to_dict("records")),
        training=len(tables.training_checks),
    )
