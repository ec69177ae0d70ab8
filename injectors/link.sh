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

# Armed: `ip -batch` is started before `go`, so applying is one line to a running process (a
# fork and an exec of `ip` cost about 1.5 ms). It is then asked to show the link: it answers
# once the change is made (one request at a time), so the injector sleeps in `read` until then
# instead of spinning on sysfs beside it for the CPU. Unarmed, or if the batch process is gone
# or does not answer, a plain `ip link set`.
APPLIER_PID=""  # the `ip -batch` process (bash unsets IPB_PID when a coproc ends)
APPLIER_IN=""
APPLIER_OUT=""
kind_prepare() {
    coproc IPB { exec ip -o -batch - 2>/dev/null; }
    APPLIER_PID=$IPB_PID
    APPLIER_IN=${IPB[1]}
    APPLIER_OUT=${IPB[0]}
}
flags_down() {  # IFF_UP (bit 0) clear in sysfs's flags: no process started
    local flags
    IFS= read -r flags <"$SYSFS/class/net/${OPT[dev]}/flags" || return 1
    (( (flags & 1) == 0 ))
}
batch_down() {
    [[ -n $APPLIER_PID ]] && kill -0 "$APPLIER_PID" 2>/dev/null || return 1
    printf 'link set dev %s down\nlink show dev %s\n' "${OPT[dev]}" "${OPT[dev]}" \
        1>&"$APPLIER_IN" || return 1
    IFS= read -r -t 1 _ <&"$APPLIER_OUT" || return 1
    flags_down
}
end_batch() {  # close its input: it reads the end and exits
    [[ -n $APPLIER_PID ]] || return 0
    exec {APPLIER_IN}>&- 2>/dev/null || true
    wait "$APPLIER_PID" 2>/dev/null || true
    APPLIER_PID=""
}
kind_inject() {
    if batch_down || ip link set dev "${OPT[dev]}" down; then
        mark_applied
        end_batch
        wait_for 5 is_down
    else
        end_batch
        return 1
    fi
}

kind_revert() { ip link set dev "${OPT[dev]}" up && wait_for 10 is_up; }
kind_status() { if is_up; then echo inactive; else echo active; fi; }

kind_interfaces() { echo "${OPT[dev]}"; }

main "$@"
