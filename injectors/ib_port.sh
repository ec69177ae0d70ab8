#!/usr/bin/env bash
# ib_port_down: disable the local HCA port with ibportstate (direct route 0 = the local CA),
# and enable it again. Options: --ca mlx5_1 --port 1. Needs root and the ib_umad module.
# Re-enabling puts the port back to Polling; the subnet manager must then make it ACTIVE
# (seconds, OpenSM sweeps every 10 s), so revert polls sysfs for up to 60 s and fails loudly if
# the port does not come back ("Disable may be irreversible").
KIND=ib_port_down
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SYSFS=${R2B_SYSFS_ROOT:-/sys}

port_dir() { echo "$SYSFS/class/infiniband/${OPT[ca]}/ports/${OPT[port]}"; }
kind_validate() {
    need ca port
    [[ ${OPT[port]} =~ ^[0-9]+$ ]] || die "--port must be a number"
    [[ -d $(port_dir) ]] || die "no IB port $(port_dir)"
    # A RoCE port has no subnet management agent: ibportstate fails on it
    # (mad_rpc_open_port: client_register for mgmt 1 failed). Refuse before anything changes.
    local layer
    layer=$(cat "$(port_dir)/link_layer" 2>/dev/null || echo unknown)
    [[ $layer != Ethernet ]] || die "refused: ${OPT[ca]} port ${OPT[port]} is a RoCE port" \
        "(link_layer Ethernet): ibportstate cannot disable it; fault its netdev with link_down"
}
kind_describe() { echo "ca=${OPT[ca]} port=${OPT[port]} phys_state='$(phys_state)'"; }
phys_state() { cat "$(port_dir)/phys_state" 2>/dev/null || echo unknown; }
port_state() { cat "$(port_dir)/state" 2>/dev/null || echo unknown; }
is_disabled() { [[ $(phys_state) == "3: Disabled" ]]; }
is_active() { [[ $(phys_state) == "5: LinkUp" && $(port_state) == "4: ACTIVE" ]]; }
ibport() { ibportstate -C "${OPT[ca]}" -P "${OPT[port]}" -D 0 "${OPT[port]}" "$1" >/dev/null; }

kind_precheck() {
    command -v ibportstate >/dev/null || die "ibportstate not found (install infiniband-diags)"
    is_active || die "port is not ACTIVE ($(port_state), $(phys_state)): not ours to fault"
}
kind_inject() { ibport disable && mark_applied && wait_for 10 is_disabled; }

kind_revert() { ibport enable && wait_for "${R2B_IB_ACTIVE_TIMEOUT_S:-60}" is_active; }
kind_status() { if is_disabled; then echo active; else echo inactive; fi; }

kind_interfaces() { r2b_rdma_netdevs "$SYSFS" "${OPT[ca]}" "${OPT[port]}"; }

main "$@"
