"""One run judged as a trial of a fault campaign: the columns the runs table adds for it (pure).

- `trial`, `trials`, `seed`, `drawn_s`, `drawn_update`, `drawn_from`: the campaign trial the
  run was and what its first drawn fault drew (`plan.campaign`); empty outside a campaign.
- `verdict`: its outcome class (`analysis.verdict`).
- `failover`, `armed`, `armed_reason`: which failover it had on and whether it could have
  worked (`analysis.armed`).
- `told`: pre-told, blind or declared (`config.pretold`).
- `detect_textbook_s`, `detect_floor_s`, `detect_bound_textbook`, `detect_bound_floor`: the
  detection time predicted under both IB models (`analysis.detection`), beside `detect_s`.
- `lost_share`, `bound_ratio`, `balance_ratio`, `model_ratio`, `model_schedule`,
  `measured_ratio`, `bound_efficiency`: a degraded run against its lines (`analysis.bounds`);
  measured T/T_nf is 1 / `degraded_ratio` (busbw during the fault over before it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from r2bench.analysis import bounds, detection, r2cc_model
from r2bench.analysis.armed import Armed, Failover, armed, failover_of
from r2bench.analysis.parsedrun import ParsedRun
from r2bench.analysis.verdict import verdict_of
from r2bench.config.pretold import Told, told
from r2bench.config.r2ccl import arms_software_fault, failover_timeout_at
from r2bench.plan.runspec import RunCampaign

NIC_FAULT_KINDS = ("ib_port_down", "link_down", "flow_drop", "route_drop")
"""Faults that take a whole NIC away (a bandwidth cap keeps part of it: its share is not 1/n)."""


def trial_columns(run: ParsedRun, metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The trial columns of one run (`metrics`: its recovery columns, for `degraded_ratio`)."""
    spec = run.record.spec
    env = spec.env
    real_fault = any(f.action == "inject" for f in run.record.faults)
    faulted = real_fault or arms_software_fault(env.get("R2CC_DISCONNECTED_HCA"))
    status = run.outcome.status if run.outcome else None
    recipe = spec.library.recipe if spec.library else None
    failover = failover_of(recipe, env)
    check = armed(
        failover,
        run.failover_lines,
        env,
        data_nics=_data_nics(run),
        transport=run.transport,
    )
    out: dict[str, Any] = {
        **_campaign_columns(spec.model_extra or {}),
        "verdict": verdict_of(status, faulted).value,
        "failover": failover.value,
        "armed": check.state.value if faulted else None,
        "armed_reason": check.text if faulted and check.state is not Armed.NOT_CLAIMED else None,
        "told": told(env, real_fault).value or None,
    }
    out.update(_detection_columns(env, failover, spec.library.ref if spec.library else None))
    out.update(_bound_columns(run, metrics, real_fault, failover is Failover.R2CCL))
    return out


def _campaign_columns(extra: Mapping[str, Any]) -> dict[str, Any]:
    empty = {"trial": None, "trials": None, "seed": None}
    empty |= {"drawn_s": None, "drawn_update": None, "drawn_from": None}
    raw = extra.get("campaign")
    if raw is None:
        return empty
    try:
        campaign = RunCampaign.model_validate(raw)
    except ValidationError:
        return empty  # a record this version cannot read: the columns stay empty
    first = campaign.draws[0] if campaign.draws else None
    return {
        "trial": campaign.trial,
        "trials": campaign.trials,
        "seed": campaign.seed,
        "drawn_s": first.after_s if first else None,
        "drawn_update": first.update if first else None,
        "drawn_from": first.drawn_from if first else None,
    }


def _detection_columns(
    env: Mapping[str, str], failover: Failover, ref: str | None
) -> dict[str, Any]:
    timer = None
    if failover is Failover.R2CCL:
        timer = failover_timeout_at(env, ref).ms / 1000.0
    predicted = detection.predict(env, timer)
    return {
        "detect_textbook_s": predicted.textbook_s,
        "detect_floor_s": predicted.floor_s,
        "detect_bound_textbook": predicted.textbook_bound.value,
        "detect_bound_floor": predicted.floor_bound.value,
    }


def _data_nics(run: ParsedRun) -> int | None:
    """Data NICs of the faulted node: NCCL_IB_HCA's list, else the NICs the counters saw move
    traffic on that node (None: neither says)."""
    listed = (run.record.spec.env.get("NCCL_IB_HCA") or "").strip()
    if listed and not listed.startswith("^"):
        return len([h for h in listed.lstrip("=").split(",") if h.strip()])
    node = run.windows[0].node if run.windows else None
    nics = {t.nic for t in run.traffic if node is None or t.node == node}
    return len(nics) or None


def _bound_columns(
    run: ParsedRun, metrics: Mapping[str, Any], real_fault: bool, modelled: bool
) -> dict[str, Any]:
    """The lines of a degraded run; R-2CCL's model only for a library that runs it."""
    spec = run.record.spec
    empty: dict[str, Any] = {"lost_share": None, "bound_ratio": None, "balance_ratio": None}
    empty |= {"model_ratio": None, "model_schedule": None, "measured_ratio": None}
    empty["bound_efficiency"] = None
    env = spec.env
    state = told(env, real_fault)
    x: float | None = None
    measured: float | None = None
    mode = (env.get("R2CC_MODE") or "").strip() or None
    if real_fault and run.windows and run.windows[0].kind in NIC_FAULT_KINDS:
        degraded = metrics.get("degraded_ratio")
        if mode not in (None, r2cc_model.HEALTHY_MODE) or not isinstance(degraded, float):
            # A run that went on degraded from a healthy start: modes 1-3 simulate a failure
            # from the start (their "before" is degraded already), a crashed run has no "after".
            return empty
        nics = _data_nics(run)
        x = bounds.one_nic_share(nics) if nics else None
        measured = 1.0 / degraded if degraded > 0 else None
    elif state is Told.DECLARED:
        x = r2cc_model.failed_share(env)
    nodes = len(spec.nodes) or len({d.host for d in run.parsed.devices})
    if x is None or nodes < 2:
        return empty
    ranks = run.parsed.processes or run.parsed.ranks or nodes
    lines = bounds.degraded_lines(
        nodes,
        ranks,
        x,
        mode=mode,
        k=r2cc_model.stage2_chunks(env),
        size_bytes=None,
        measured=measured,
        after_repair=env.get("R2CC_AR_AFTER_REPAIR"),
    )
    return {
        "lost_share": x,
        "bound_ratio": lines.bound,
        "balance_ratio": lines.balance,
        "model_ratio": lines.model.ratio if lines.model and modelled else None,
        "model_schedule": lines.model.schedule if lines.model and modelled else None,
        "measured_ratio": measured,
        "bound_efficiency": lines.efficiency,
    }
