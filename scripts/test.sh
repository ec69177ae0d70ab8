#!/usr/bin/env bash
# Runs the test suite tier by tier (tests/conftest.py says what each tier may use):
#   unit         pure tests, in parallel (pytest-xdist): the one-minute check of a change;
#   integration  real processes on this host (sshd, mpirun, the CLI), in parallel;
#   system       network namespaces, virtual testbeds and sweeps, as root, one test at a time:
#                every virtual testbed takes the management subnet 198.18.0.0/24.
# Every tier runs even when an earlier one failed; each prints its slowest tests, its name and
# its verdict; a tier that collects nothing (pytest's exit 5) fails too, and any failure fails
# the script (exit 1).
#
# Usage: bash scripts/test.sh [TIER...]   (default: unit integration system)
# Environment (all optional):
#   R2BENCH_TEST_PYTHON   the Python with r2bench[dev] (default .venv/bin/python, else python3)
#   R2BENCH_TEST_WORKERS  pytest-xdist workers for unit and integration (default auto: one a core)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

python=${R2BENCH_TEST_PYTHON:-}
if [[ -z $python ]]; then
    if [[ -x .venv/bin/python ]]; then python=.venv/bin/python; else python=python3; fi
fi
workers=${R2BENCH_TEST_WORKERS:-auto}
if ! "$python" -c 'import xdist' 2>/dev/null; then
    echo "test.sh: pytest-xdist is missing from $python (the dev extra has it): every tier runs serially"
    workers=
fi
tiers=("$@")
[[ ${#tiers[@]} -gt 0 ]] || tiers=(unit integration system)
failed=()

# run_tier TIER: pytest on tests/TIER, in parallel except the system tier.
run_tier() {
    local tier=$1 status=0 parallel=()
    # loadgroup: the tests of an xdist group (tests/conftest.py's HOST_PROCESSES) share a worker
    [[ $tier == system || -z $workers ]] || parallel=(-n "$workers" --dist loadgroup)
    if [[ ! -d tests/$tier ]]; then
        echo "test.sh: no tier '$tier': the tiers are the folders tests/unit, tests/integration, tests/system" >&2
        return 2
    fi
    "$python" -m pytest -q --durations=20 "${parallel[@]}" "tests/$tier" </dev/null || status=$?
    [[ $status -ne 5 ]] || echo "test.sh: the $tier tier collected no tests" >&2
    return "$status"
}

for tier in "${tiers[@]}"; do
    echo "test.sh: == $tier tier"
    start=$SECONDS
    status=0
    run_tier "$tier" || status=$?
    if [[ $status -eq 0 ]]; then
        echo "test.sh: ok: $tier tier ($((SECONDS - start)) s)"
    else
        echo "test.sh: FAILED: $tier tier (exit $status, $((SECONDS - start)) s)" >&2
        failed+=("$tier")
    fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
    echo "test.sh: failed tiers: ${failed[*]}" >&2
    exit 1
fi
echo "test.sh: all tiers passed: ${tiers[*]}"
