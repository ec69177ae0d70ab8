#!/usr/bin/env bash
# link_down: take a network interface administratively down with `ip link`, and back up.
# Options: --dev IFNAME. Refuses an interface that is already down (not ours to bring up), and
# an IPoIB interface (the InfiniBand port under it would stay ACTIVE: use ib_port_down).
KIND=link_down
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SYSFS=${R2B_SYSFS:-/sys}  # as the sampler, discovery and preflight name it

kind_validate() {
    need dev
    [[ -e $SYSFS/class/net/${OPT[dev]} ]] || die "no interface '${OPT[dev]}'"
    # type 32 is IPoIB: taking it down leaves the InfiniBand port ACTIVE and RDMA flowing.
    [[ $(cat "$SYSFS/class/net/${OPT[dev]}/type" 2>/dev/null) != 32 ]] || die "refused:" \
        "'${OPT[dev]}' is an IPoIB interface: its InfiniBand port stays ACTIVE; use ib_port_down"
}
kind_describe() { echo "dev=${OPT[dev]}"; }
is_up() { ip -o link show dev "${OPT[dev]}" | grep -q '[<,]UP[,>]'; }
is_down() { ! is_up; }

kind_precheck() { is_up || die "'${OPT[dev]}' is already down: not ours to fault or to bring back"; }
kind_inject() { ip link set dev "${OPT[dev]}" down && mark_applied && wait_for 5 is_down; }

kind_revert() { ip link set dev "${OPT[dev]}" up && wait_for 10 is_up; }
kind_status() { if is_up; then echo inactive; else echo active; fi; }

kind_interfaces() { echo "${OPT[dev]}"; }

main "$@"
