"""Run store: atomic files, COMPLETE last, resume, incomplete runs kept; provenance.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_store.py (its pure tests).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from r2bench.parse.events import parse_events
from r2bench.plan.runspec import RunSpec
from r2bench.runfolder import runmodel
from r2bench.runfolder import store as st
from r2bench.runfolder.provenance import collect, git_state
from tests.support import paths
from tests.support.store import ok_end, spec

DATA = paths.DATA / "nccl-tests"


def test_a_full_run_round_trips(tmp_path: Path) -> None:
    store = st.RunStore(tmp_path, "sweep")
    s = spec()
    folder = store.start(s, collect({"PATH": "/bin", "GH_TOKEN": "x"}, rerun_command="r2bench x"))
    text = (DATA / "all_reduce_perf.killed.warn.txt").read_text()
    folder.write_stdout(text)
    folder.write_stderr("")
    folder.write_result_json(b"{}")
    folder.write_events(parse_events(text))
    fault = runmodel.FaultEvent(action="inject", fault=0, kind="link_down", node="node1", time=5.0)
    folder.write_faults([fault])
    folder.write_node_file("node1", "counters/mlx5_0.txt", "port_xmit_data 4\n")
    folder.write_outcome(ok_end())
    assert not store.is_complete(s.run_id)
    folder.mark_complete()
    assert store.is_complete(s.run_id)

    rec = store.load(s.run_id)
    assert rec.complete and rec.spec.run_id == s.run_id
    assert (
        RunSpec.model_validate({k: v for k, v in rec.spec.model_dump().items() if k != "run_id"})
        == s
    )
    assert rec.end == ok_end()
    assert rec.faults == [fault]
    assert [e.kind for e in rec.events()] == [e.kind for e in parse_events(text)]
    assert rec.provenance["env"] == {"PATH": "/bin"}
    assert rec.provenance["env_dropped"] == ["GH_TOKEN"]
    assert rec.node_files() == [rec.path / "node" / "node1" / "counters" / "mlx5_0.txt"]
    assert list(store.complete_runs()) == [s.run_id]


def test_provenance_of_this_checkout() -> None:
    prov = collect(dict(os.environ), rerun_command="r2bench sweep e.yaml", nccl_version="2.28.3")
    dumped = json.loads(prov.model_dump_json())
    assert dumped["r2bench_version"]
    assert dumped["r2bench_git"]["commit"] and dumped["r2bench_git"]["dirty"] in (True, False)
    assert dumped["nccl_version"] == "2.28.3"
    assert not any("TOKEN" in k.upper() or "SECRET" in k.upper() for k in dumped["env"])


def test_git_state_outside_a_checkout(tmp_path: Path) -> None:
    assert git_state(tmp_path) is None
