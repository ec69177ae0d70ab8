#!/usr/bin/env bash
# System packages r2bench's controller, virtual testbed and test suite use (Debian/Ubuntu, root).
#   python3, python3-venv, python3-dev  the distribution's Python, a virtual environment for
#                          r2bench (scripts/install.sh; PEP 668), headers to build mpi4py
#   openssh-server/client  sshd inside each virtual node; ssh from the controller
#   iproute2, nftables     network namespaces, veth, bridges, tbf; nft drop rules
#   openmpi-bin, libopenmpi-dev  real mpirun; headers so `pip install mpi4py` can build
#   chromium               headless browser that checks the HTML reports render offline
#   procps, kmod, iputils-ping, ncat-free tools used by the tests (pgrep, lsmod, ping)
#   for CI: shellcheck     .ci/run lints the injectors and scripts with it
set -euo pipefail
if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps.sh: run as root (apt-get needs it)" >&2
    exit 2
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
    python3 python3-venv python3-dev openssh-server openssh-client iproute2 nftables openmpi-bin libopenmpi-dev \
    build-essential chromium procps kmod iputils-ping git rsync shellcheck >/dev/null
echo "install-deps.sh: system packages installed"
