#!/bin/bash
# Runs once on every node of an r2bench CloudLab experiment (the profile's startup service, as
# root). Installs what r2bench drives on a node and lets the nodes ssh to each other without a
# password. Safe to run again. Log: /var/log/r2bench-node-setup.log; done marker:
# /var/lib/r2bench/node-setup.done (its content is the exit status, 0 = everything installed).
set -uo pipefail
LOG=/var/log/r2bench-node-setup.log
MARK_DIR=/var/lib/r2bench
exec >>"$LOG" 2>&1
echo "== r2bench node setup $(date -u +%FT%TZ) on $(hostname -f)"
mkdir -p "$MARK_DIR"
rm -f "$MARK_DIR/node-setup.done"

PACKAGES=(
  build-essential git make pkg-config python3 python3-venv   # builds (NCCL, nccl-tests)
  openmpi-bin libopenmpi-dev                                 # launcher
  rdma-core ibverbs-utils infiniband-diags perftest          # rdma tools, ibportstate
  iproute2 nftables ethtool                                  # link_down, route/flow drops
  pciutils numactl util-linux procps coreutils               # doctor's probes
)

install_packages() {
  export DEBIAN_FRONTEND=noninteractive
  for attempt in 1 2 3 4 5; do
    # another apt (unattended-upgrades at first boot) may hold the lock: wait and retry
    if apt-get update -q && apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"; then
      return 0
    fi
    echo "apt attempt $attempt failed; retrying in 30 s"
    sleep 30
  done
  return 1
}

load_modules() {
  # ibportstate needs /dev/infiniband/umad*; absent modules are fine on RoCE-only nodes
  for module in ib_umad ib_uverbs rdma_ucm; do modprobe "$module" 2>/dev/null || true; done
}

shared_ssh_key() {
  # Every node of the experiment gets the same private key from `geni-get key`; its public
  # half goes into each local user's authorized_keys, so any node can ssh to any other.
  local key
  key=$(geni-get key 2>/dev/null) || key=""
  if [ -z "$key" ]; then
    echo "geni-get key gave nothing: node-to-node ssh is NOT set up (see cloudlab/README.md)"
    return 1
  fi
  for home in /users/* /root; do
    [ -d "$home" ] || continue
    local user
    user=$(stat -c %U "$home")
    mkdir -p "$home/.ssh"
    printf '%s\n' "$key" >"$home/.ssh/id_r2bench"
    chmod 600 "$home/.ssh/id_r2bench"
    ssh-keygen -y -f "$home/.ssh/id_r2bench" >"$home/.ssh/id_r2bench.pub"
    grep -qxF "$(cat "$home/.ssh/id_r2bench.pub")" "$home/.ssh/authorized_keys" 2>/dev/null \
      || cat "$home/.ssh/id_r2bench.pub" >>"$home/.ssh/authorized_keys"
    chown -R "$user:" "$home/.ssh"
    chmod 700 "$home/.ssh"
  done
  # The experiment's nodes trust each other's host keys on first use, and use that key.
  cat >/etc/ssh/ssh_config.d/50-r2bench.conf <<'CONF'
Host node* *.cloudlab.us *.emulab.net *.apt.emulab.net 10.*
    IdentityFile ~/.ssh/id_r2bench
    IdentityFile ~/.ssh/id_rsa
    IdentityFile ~/.ssh/id_ed25519
    StrictHostKeyChecking accept-new
    BatchMode yes
CONF
}

work_folder() {
  # r2bench's work folder in testbed files made from a manifest (paths.work_dir): builds and
  # run folders. Sticky and world-writable like /tmp, so whichever login runs r2bench can use it.
  mkdir -p /local/r2bench && chmod 1777 /local/r2bench
}

status=0
install_packages || { echo "package install FAILED"; status=1; }
work_folder || { echo "cannot create /local/r2bench"; status=1; }
load_modules
shared_ssh_key || status=1
echo "$status" >"$MARK_DIR/node-setup.done"
echo "== r2bench node setup finished, status $status"
exit "$status"
