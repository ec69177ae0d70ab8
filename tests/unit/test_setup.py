"""`r2bench setup`: cache keys and stamps, build-failure extraction, per-node rendering, and the
whole command on a local testbed (LocalNode) with tiny local-source recipes.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_setup.py (those with real processes).
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
import yaml

from r2bench.analysis.decision import JobFacts, decide
from r2bench.analysis.verdict import OutcomeClass, verdict_of
from r2bench.config.recipe import KnownFailure
from r2bench.config.recipes import load_recipes
from r2bench.parse.buildlog import analyze, first_error
from r2bench.parse.library import other_file_loaded, other_library_loaded
from r2bench.parse.models import OutcomeStatus
from r2bench.parse.nccltests.text import parse_text
from r2bench.plan.build import load_inputs
from r2bench.setup import cache
from r2bench.setup.libcheck import header_version, version_text
from r2bench.setup.probe import NodeFacts, parse_facts
from r2bench.setup.source import (
    PACKAGE_ROOT_TOKEN,
    resolve_local_path,
    tree_digest,
    tree_files,
    write_tarball,
)
from r2bench.setup.steps import node_steps
from tests.support import paths

ROOT = paths.REPO
DATA = ROOT / "tests" / "data"
CUDA13_LOG = DATA / "build" / "r2ccl-cuda13-fail.log"
PAPER = ROOT / "experiments" / "paper" / "one-nic-down.yaml"
CLOUDLAB = ROOT / "experiments" / "testbeds" / "dgx-h100-2node.yaml"
QUICKSTART = ROOT / "experiments" / "quickstart.yaml"
VIRTUAL = ROOT / "experiments" / "testbeds" / "virtual-example.yaml"
KEY = cache.BuildKey("nccl-tests", "abc123", ("make -j8",), "12.4", "4.1.6", "22304")


def _bare_cloudlab(tmp_path: Path) -> Path:
    """The CloudLab testbed without CUDA/MPI folders and GPU architectures (to be detected)."""
    data = yaml.safe_load(CLOUDLAB.read_text())
    for key in ("cuda_home", "mpi_home"):
        data["paths"].pop(key, None)
    for node in data["nodes"]:
        node.pop("gpu_arch", None)
    path = tmp_path / "testbed.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


FACTS = NodeFacts("node0", cuda_home="/opt/cuda-12.4", mpi_home="/opt/ompi", gpu_archs=("80",))


# ---- cache keys and stamps -----------------------------------------------------------------
def test_key_digest_is_stable_and_covers_every_field() -> None:
    same = cache.BuildKey("nccl-tests", "abc123", ("make -j8",), "12.4", "4.1.6", "22304")
    assert KEY.digest() == same.digest() and len(KEY.digest()) == cache.KEY_LENGTH
    changed = [
        cache.BuildKey("nccl", "abc123", ("make -j8",), "12.4", "4.1.6", "22304"),
        cache.BuildKey("nccl-tests", "abc124", ("make -j8",), "12.4", "4.1.6", "22304"),
        cache.BuildKey("nccl-tests", "abc123", ("make -j4",), "12.4", "4.1.6", "22304"),
        cache.BuildKey("nccl-tests", "abc123", ("make -j8",), "13.0", "4.1.6", "22304"),
        cache.BuildKey("nccl-tests", "abc123", ("make -j8",), "12.4", "5.0.0", "22304"),
        cache.BuildKey("nccl-tests", "abc123", ("make -j8",), "12.4", "4.1.6", "22809"),
    ]
    assert len({KEY.digest(), *(key.digest() for key in changed)}) == 7


def test_stamp_round_trip_and_currency() -> None:
    stamp = cache.make_stamp(
        KEY, recipe="nccl-tests", node="n0", directory="/w", lib_dir="/l", build_s=1.5
    )
    back = cache.read_stamp(cache.stamp_text(stamp))
    assert back == stamp and back.fields["commands"] == ["make -j8"] and back.lib_dir == "/l"
    assert cache.is_current(back, KEY)
    other = cache.BuildKey("nccl-tests", "zzz", ("make -j8",), "12.4", "4.1.6", "22304")
    assert not cache.is_current(back, other)
    assert not cache.is_current(None, KEY)


@pytest.mark.parametrize("text", ["", "garbage", '{"key": "x"}', '{"key": "x", "fields": {'])
def test_unreadable_stamps_are_none(text: str) -> None:
    assert cache.read_stamp(text) is None


# ---- failures --------------------------------------------------------------------------------
def test_cuda13_log_first_error_and_explanation() -> None:
    log = CUDA13_LOG.read_text()
    known = load_recipes()["r2ccl"].build.known_failures
    failure = analyze(log, known)
    assert failure.first_error is not None
    assert failure.first_error.text.startswith("include/cudawrap.h:69:48: error:")
    assert "PFN_cuDeviceGet" in failure.first_error.text
    assert log.splitlines()[failure.first_error.line - 1].strip() == failure.first_error.text
    assert len(failure.explanations) == 1 and "CUDA 12" in failure.explanations[0]


def test_first_error_skips_warnings_then_falls_back_to_make_and_shell() -> None:
    compiler = "a.c:1: warning: error: looks bad\nmake: *** [all] Error 2\nb.c:2:3: error: real\n"
    assert first_error(compiler).text == "b.c:2:3: error: real"
    assert first_error("x\nmake[1]: *** [Makefile:9: o.o] Error 1\n").line == 2
    assert first_error("sh: 1: nvcc: not found\n").text == "sh: 1: nvcc: not found"
    assert first_error("compiling -Werror flags\nall fine\n") is None
    linker = "/usr/bin/ld: x.o: undefined reference to `f'\ncollect2: error: ld returned 1\n"
    assert "undefined reference" in first_error(linker).text


def test_explanations_use_regex_patterns_and_dedupe() -> None:
    known = [
        KnownFailure(pattern="nvcc: not found|nvcc: No such file", explain="set cuda_home"),
        KnownFailure(pattern="not found", explain="set cuda_home"),
        KnownFailure(pattern="pfn_cu", explain="CUDA 12 needed"),
    ]
    assert analyze("sh: nvcc: not found", known).explanations == ("set cuda_home",)


# ---- library version check ---------------------------------------------------------------------
def test_header_version_and_text() -> None:
    assert header_version("#define NCCL_VERSION_CODE 22304\n") == 22304
    assert (
        header_version("#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 9\n")
        == 22809
    )
    assert header_version("int x;") is None
    assert version_text(22304) == "2.23.4"


def test_a_program_that_loaded_another_nccl_ran_the_wrong_library() -> None:
    text = (DATA / "nccl-tests" / "all_reduce_perf.p2p.c1.txt").read_text()
    parsed = parse_text(text)
    assert parsed.nccl_library == 22803 and parsed.nccl_headers == 22803
    assert other_library_loaded(parsed) is None
    assert decide(parsed, [], job=JobFacts(0.0, exit_code=0)).status is OutcomeStatus.OK
    # Built against R-2CCL's 2.23.4, the system's 2.28.3 loaded (LD_LIBRARY_PATH not first).
    swapped = parse_text(text.replace("nccl-headers=22803", "nccl-headers=22304"))
    error = other_library_loaded(swapped)
    assert error is not None and "loaded NCCL 2.28.3" in error and "against 2.23.4" in error
    outcome = decide(swapped, [], job=JobFacts(0.0, exit_code=0))
    assert outcome.status is OutcomeStatus.WRONG_LIBRARY and outcome.reason == error
    assert verdict_of(outcome.status, True) is OutcomeClass.UNSCORED
    # Someone else's log (no run of r2bench's) may pair them on purpose: judged as it is.
    assert decide(swapped, []).status is not OutcomeStatus.WRONG_LIBRARY
    stopped = decide(swapped, [], job=JobFacts(0.0, exit_code=None, timed_out=True))
    assert stopped.status is OutcomeStatus.TIMEOUT and stopped.reason.startswith(error)


VERIFY_LOADED = DATA / "verify" / "loaded"
WHEEL_LIB = "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib"


def test_a_program_that_loaded_a_libnccl_from_another_folder_ran_the_wrong_library() -> None:
    """Real r2b_verify banners (one H100): the same NCCL 2.28.9 from its RUNPATH, and a copy
    put first by LD_LIBRARY_PATH, which only the loaded file's folder tells apart."""
    own = parse_text((VERIFY_LOADED / "rpath.stdout.txt").read_text())
    other = parse_text((VERIFY_LOADED / "other-folder.stdout.txt").read_text())
    assert own.library_path == f"{WHEEL_LIB}/libnccl.so.2"
    assert other.library_path == "/tmp/other/libnccl.so.2"
    assert own.nccl_library == other.nccl_library == own.nccl_headers == 22809
    job = JobFacts(0.0, exit_code=0, library_dir=WHEEL_LIB + "/")
    assert decide(own, [], job=job).status is OutcomeStatus.OK
    outcome = decide(other, [], job=job)
    assert outcome.status is OutcomeStatus.WRONG_LIBRARY
    assert "/tmp/other/libnccl.so.2" in outcome.reason and WHEEL_LIB in outcome.reason
    assert outcome.evidence[0].text == "loaded /tmp/other/libnccl.so.2"
    # The folder as a testbed gives it, relative to the node's home: the end of the path.
    home = JobFacts(
        0.0, exit_code=0, library_dir="~/.venv/lib/python3.12/site-packages/nvidia/nccl/lib"
    )
    assert decide(own, [], job=home).status is OutcomeStatus.OK
    assert other_file_loaded(own, ".r2bench/src/r2ccl/build/lib") is not None
    # No folder to hold it to (an NCCL installed on the nodes), or no file named: as it is.
    assert decide(other, [], job=JobFacts(0.0, exit_code=0)).status is OutcomeStatus.OK
    assert (
        other_file_loaded(
            parse_text((DATA / "verify" / "all_reduce.np2.ok.stdout.txt").read_text()), WHEEL_LIB
        )
        is None
    )


def test_a_planned_run_names_the_folder_its_library_is_loaded_from(tmp_path: Path) -> None:
    from r2bench.plan.build import make_plan

    plan = make_plan(load_inputs(PAPER, _bare_cloudlab(tmp_path)))
    for run in plan.runs:
        assert run.library_dir is not None and run.library_dir.endswith("/build/lib")
        assert f"LD_LIBRARY_PATH={run.library_dir}" in run.launch.command


# ---- probe and per-node rendering -----------------------------------------------------------
def test_parse_facts() -> None:
    text = (
        "cuda_home=/usr/local/cuda-12.4\ncuda_version=release 12.4, V12.4.131\n"
        "mpi_home=/usr/lib/x86_64-linux-gnu/openmpi\nmpi_version=mpirun (Open MPI) 4.1.6\n"
        "gpu_archs=90 90 \nnproc=32\nfsid=abc\nnoise\n"
    )
    facts = parse_facts("n0", text)
    assert facts.cuda_home == "/usr/local/cuda-12.4" and facts.gpu_archs == ("90",)
    assert facts.gpu_arch == "90" and facts.nproc == 32 and facts.fsid == "abc"
    assert parse_facts("n1", "").gpu_arch is None


def test_node_steps_use_the_node_toolchain_and_gpus(tmp_path: Path) -> None:
    inputs = load_inputs(PAPER, _bare_cloudlab(tmp_path))
    steps = {s.name: s for s in node_steps(inputs, "node0", FACTS, jobs=6)}
    r2ccl, tests = steps["r2ccl"], steps["nccl-tests"]
    assert r2ccl.fetch and "git clone" in r2ccl.fetch[0]
    (build,) = r2ccl.build
    assert "CUDA_HOME=/opt/cuda-12.4" in build and "compute_80,code=sm_80" in build
    assert "-j6" in build and "$(nproc)" not in build
    assert "MPI_HOME=/opt/ompi" in tests.build[0]
    assert r2ccl.lib_dir == f"{r2ccl.directory}/build/lib"
    assert tests.nccl_home == f"{r2ccl.directory}/build" and tests.lib_dir == r2ccl.lib_dir
    assert f"NCCL_HOME={r2ccl.directory}/build" in tests.build[0]


def test_testbed_paths_and_arch_win_over_detection() -> None:
    steps = node_steps(load_inputs(PAPER, CLOUDLAB), "node0", FACTS, jobs=None)
    build = next(s for s in steps if s.name == "r2ccl").build[0]
    assert "CUDA_HOME=/usr/local/cuda-12.4" in build and "compute_90" in build
    assert "$(nproc)" in build


def test_quickstart_copies_r2bench_itself() -> None:
    # One copy per emulated library it runs against (stock and R-2CCL), nothing fetched or built.
    steps = node_steps(load_inputs(QUICKSTART, VIRTUAL), "node1", NodeFacts("node1"), None)
    assert len(steps) == 2 and len({step.directory for step in steps}) == 2
    for step in steps:
        assert step.name == "emulated" and step.local_source == "{r2bench}"
        assert step.fetch == () and step.build == ()


# ---- local trees -----------------------------------------------------------------------------
def test_tree_digest_and_tarball(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "pkg" / "__pycache__").mkdir(parents=True)
    (src / ".git").mkdir()
    (src / "results").mkdir()
    (src / "pkg" / "a.py").write_text("x = 1\n")
    (src / "pkg" / "__pycache__" / "a.pyc").write_bytes(b"junk")
    (src / ".git" / "HEAD").write_text("ref")
    (src / "results" / "r.txt").write_text("r")
    (src / "Makefile").write_text("all:\n")
    assert [str(p) for p in tree_files(src)] == ["Makefile", "pkg/a.py"]
    before = tree_digest(src)
    (src / ".git" / "HEAD").write_text("other")
    assert tree_digest(src) == before
    (src / "pkg" / "a.py").write_text("x = 2\n")
    assert tree_digest(src) != before
    with tarfile.open(write_tarball(src, tmp_path / "t.tar.gz")) as archive:
        assert sorted(archive.getnames()) == ["Makefile", "pkg/a.py"]


def test_of_r2benchs_own_tree_only_the_package_travels() -> None:
    """`{r2bench}` (a checkout here): the package the nodes run, not the tests and examples."""
    root = resolve_local_path(PACKAGE_ROOT_TOKEN)
    files = [str(p) for p in tree_files(root)]
    assert "r2bench/workloads/ring_allreduce.py" in files
    assert "r2bench/workloads/verify/r2b_verify.cu" in files  # the verification build's source
    assert {f.split("/")[0] for f in files} == {"r2bench"}


def test_the_verification_workload_says_which_nccl_it_loaded() -> None:
    """Its banner (a real one, results/examples/gpu-two-gpus) carries both versions."""
    run = paths.REPO / "results/examples/gpu-two-gpus/all_reduce-vanilla-none-r0-4b1b230c7f"
    text = (run / "stdout.txt").read_text()
    parsed = parse_text(text)
    assert (parsed.nccl_headers, parsed.nccl_library) == (22304, 22304)
    assert other_library_loaded(parsed) is None
    swapped = parse_text(text.replace("(library 22304,", "(library 22809,", 1))
    assert decide(swapped, [], job=JobFacts(0.0, exit_code=0)).status is OutcomeStatus.WRONG_LIBRARY
