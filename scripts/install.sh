#!/usr/bin/env bash
# Installs r2bench on a stock Debian 12/13 or Ubuntu 24.04 host, as root (or through sudo).
#
# Those distributions' Python refuses `pip install` outside a virtual environment (PEP 668,
# "externally-managed-environment"), and a virtual environment alone is not on sudo's PATH. So:
#   1. the system packages (scripts/install-deps.sh: sshd, iproute2, Open MPI, python3-venv, ...);
#   2. a virtual environment made from the distribution's python3 (default: .venv in this clone);
#   3. r2bench installed into it, editable, with the extras named;
#   4. BIN/r2bench (default /usr/local/bin, which is on sudo's secure_path) linked to it, so that
#      `r2bench` and `sudo r2bench` run this install.
#
# Usage: bash scripts/install.sh [EXTRAS]
#   EXTRAS  comma-separated extras of pyproject.toml; default report,workload (tables, reports,
#           mpi4py); the test suite needs dev,workload.
# Environment (all optional):
#   R2BENCH_PYTHON    the Python that makes the environment (default /usr/bin/python3, else python3)
#   R2BENCH_VENV      where the environment goes (default <clone>/.venv)
#   R2BENCH_BIN       where the r2bench command is linked (default /usr/local/bin)
#   R2BENCH_NO_APT=1  skip the system packages (they are already there)
# Run it again at any time: it reuses the environment and only installs what changed.
set -euo pipefail

say() { echo "install.sh: $*"; }
die() {
    echo "install.sh: $*" >&2
    exit 2
}

clone=$(cd "$(dirname "$0")/.." && pwd)
extras=${1:-report,workload}
[[ $extras =~ ^[a-z0-9_-]+(,[a-z0-9_-]+)*$ ]] ||
    die "extras '$extras' are not a comma-separated list of names (e.g. report,workload)"
venv=${R2BENCH_VENV:-$clone/.venv}
bin=${R2BENCH_BIN:-/usr/local/bin}

if [[ ${R2BENCH_NO_APT:-0} != 1 ]]; then
    bash "$clone/scripts/install-deps.sh"
fi

python=${R2BENCH_PYTHON:-}
if [[ -z $python ]]; then
    if [[ -x /usr/bin/python3 ]]; then python=/usr/bin/python3; else python=$(command -v python3 || true); fi
fi
[[ -n $python ]] || die "no python3 found: install it (apt-get install python3 python3-venv) or set R2BENCH_PYTHON"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
    die "$python is older than Python 3.10, which r2bench needs: set R2BENCH_PYTHON to a newer one"

# A folder left by an earlier install whose Python is gone (or a half-made one) is made anew.
if ! "$venv/bin/python" -c '' 2>/dev/null; then
    say "making the virtual environment $venv from $("$python" --version 2>&1) ($python)"
    "$python" -m venv --clear "$venv" ||
        die "could not make $venv: on Debian/Ubuntu install python3-venv (apt-get install python3-venv)"
fi

say "installing r2bench[$extras] into $venv (editable: this clone's code is what runs)"
"$venv/bin/python" -m pip install --disable-pip-version-check -q -e "${clone}[$extras]"

# Link the command; replace only what an earlier install of r2bench put there.
link=$bin/r2bench
if [[ -e $link && ! -L $link ]] && ! grep -q 'r2bench' "$link" 2>/dev/null; then
    die "$link exists and is not r2bench's: move it away, or set R2BENCH_BIN to another folder on PATH"
fi
mkdir -p "$bin"
ln -sfn "$venv/bin/r2bench" "$link"
say "linked $link -> $venv/bin/r2bench"

found=$(command -v r2bench || true)
if [[ $found != "$link" ]]; then
    say "note: 'r2bench' on this PATH is ${found:-nothing}, not $link: put $bin first on PATH or call $link"
fi
say "ready: $("$link" version)"
