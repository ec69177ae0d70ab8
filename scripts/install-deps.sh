#!/usr/bin/env bash
# System packages r2bench's controller, virtual testbed and test suite use (Debian/Ubuntu, root).
#   python3, python3-venv, python3-dev  the distribution's Python, a virtual environment for
#                          r2bench (scripts/install.sh; PEP 668), headers to build mpi4py
#   openssh-server/client  sshd inside each virtual node; ssh from the controller
#   iproute2, nftables     network namespaces, veth, bridges, tbf; nft drop rules
#   openmpi-bin, libopenmpi-dev  real mpirun; headers so `pip install mpi4py` can build
#   chromium               headless browser that checks the HTML reports render offline, where
#                          it is a .deb (Debian); Ubuntu ships it as a snap (below)
#   procps, kmod, iputils-ping, ncat-free tools used by the tests (pgrep, lsmod, ping)
#   for CI: shellcheck     .ci/run lints the injectors and scripts with it
set -euo pipefail
if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps.sh: run as root (apt-get needs it)" >&2
    exit 2
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# On Ubuntu `chromium` only names chromium-browser, a transitional package whose install pulls in
# snapd and runs `snap install chromium`: it waits up to 30 minutes for an unreachable snap store,
# and installs nothing where snapd does not run (containers). So only a real chromium package is
# installed; without a browser on PATH tests/integration/test_report_browser.py is skipped.
browser=()
if [[ -n $(apt-cache show --no-all-versions chromium 2>/dev/null) ]]; then
    browser=(chromium)
else
    echo "install-deps.sh: no chromium package here (Ubuntu ships it as a snap: snap install chromium)"
fi
if ! apt-get install -y -qq --no-install-recommends \
    python3 python3-venv python3-dev openssh-server openssh-client iproute2 nftables openmpi-bin libopenmpi-dev \
    build-essential "${browser[@]}" procps kmod iputils-ping git rsync shellcheck >/dev/null; then
    echo "install-deps.sh: apt-get could not install the packages (its error is above); on Ubuntu" \
        "python3-venv, openmpi-bin, libopenmpi-dev and shellcheck are in the universe component:" \
        "add-apt-repository universe, then run this again" >&2
    exit 1
fi
echo "install-deps.sh: system packages installed"
