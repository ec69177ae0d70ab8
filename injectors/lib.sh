# shellcheck shell=bash
# Shared shape of every r2bench injector (sourced, not run).
#
#   <kind>.sh inject --tag TAG [--lease-s SECONDS] [--armed] <kind options>
#   <kind>.sh revert --tag TAG <kind options>
#   <kind>.sh status --tag TAG <kind options>
#
# inject writes an active-fault record BEFORE touching anything (so `heal.sh` can always find
# it), applies the fault, verifies it, and arms a detached timer that reverts after the lease
# even if the controller or its ssh session dies. revert only undoes faults this tag recorded,
# verifies, and disarms the timer; both are idempotent. Every action prints one event line:
#   r2b-fault <node epoch> <action> tag=<tag> kind=<kind> result=<ok|noop|failed> <detail>
# A kind script defines kind_validate (arguments), kind_precheck (is the target ours to fault?
# may `die`), kind_inject and kind_revert (return non-zero on failure, never `die`),
# kind_status (prints active|inactive) and kind_describe, optionally kind_interfaces (prints the
# interfaces the fault touches, one a line, for the guard), then calls `main "$@"`.
# Records are per node (node.sh): FAULT_DIR/active/<node id>/<tag>.
# A kind_inject may call `mark_applied` right after the change took effect and before it polls
# for it, so the event tells `applied=` (the change) from `verified=` (the state seen). An armed
# inject calls the kind's optional kind_prepare before it waits for `go`.
#
# `inject --armed` does the slow part first (checks, record, lease), prints an `armed` event and
# waits for one line on stdin: `go` applies the fault at once (a trigger then costs one read and
# the change itself: no interpreter start-up), anything else (or EOF) cancels and leaves nothing.

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR
source "$HERE/node.sh"
FAULT_DIR=${R2B_FAULT_DIR:-$(r2b_default_fault_dir "$HERE")}
ACTIVE_DIR=$FAULT_DIR/active
NODE_ACTIVE_DIR=$(r2b_node_active_dir "$ACTIVE_DIR")  # this node's records only
ACTION=""
TAG=""
LEASE_S=""
ARMED=""
APPLIED_AT=""
PROTECT_IFS=""  # --protect-if a,b: interfaces this node must never fault (from the testbed)
declare -A OPT=()

now() { echo "${EPOCHREALTIME:-$(date +%s.%N)}"; }

# Assignments, not $(now): a command substitution forks, and these stamps sit on the fast path.
mark_applied() { APPLIED_AT=${EPOCHREALTIME:-$(date +%s.%N)}; }

event() {  # event ACTION RESULT DETAIL...
    local action=$1 result=$2
    shift 2
    echo "r2b-fault $(now) $action tag=$TAG kind=$KIND result=$result $*"
}

die() {
    echo "r2b-fault $(now) ${ACTION:-usage} tag=${TAG:-?} kind=$KIND result=failed $*" >&2
    exit 1
}

need() {  # need OPTION...: fail unless every named kind option was given
    local name
    for name in "$@"; do
        [[ -n ${OPT[$name]:-} ]] || die "missing --$name"
    done
}

parse_args() {
    [[ $# -ge 1 ]] || die "usage: $(basename "$0") inject|revert|status --tag TAG [options]"
    ACTION=$1
    shift
    while [[ $# -gt 0 ]]; do
        case $1 in
            --tag) TAG=${2:-}; shift 2 ;;
            --lease-s) LEASE_S=${2:-}; shift 2 ;;
            --armed) ARMED=1; shift ;;
            --protect-if) PROTECT_IFS=${2:-}; shift 2 ;;
            --*) OPT[${1#--}]=${2:-}; shift 2 ;;
            *) die "unexpected argument '$1'" ;;
        esac
    done
    [[ $TAG =~ ^[A-Za-z0-9_.-]{1,64}$ ]] || die "--tag must be 1-64 of [A-Za-z0-9_.-]"
    [[ -z $LEASE_S || $LEASE_S =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--lease-s must be a number"
}

record_path() { echo "$NODE_ACTIVE_DIR/$TAG"; }

write_record() {  # the record holds how to revert: this script and its kind options
    mkdir -p "$NODE_ACTIVE_DIR"
    local tmp
    tmp=$(mktemp "$NODE_ACTIVE_DIR/.tmp.XXXXXX")
    {
        echo "kind=$KIND"
        echo "node_id=$(r2b_node_id)"
        echo "script=$HERE/$(basename "$0")"
        echo "injected_at=$(now)"
        local key
        for key in "${!OPT[@]}"; do echo "opt_$key=${OPT[$key]}"; done
    } >"$tmp"
    mv "$tmp" "$(record_path)"
}

arm_lease() {
    [[ -n $LEASE_S ]] || return 0
    local revert_args=(revert --tag "$TAG") key
    for key in "${!OPT[@]}"; do revert_args+=("--$key" "${OPT[$key]}"); done
    # setsid + closed descriptors: the timer outlives this shell, ssh and the controller.
    # The inner script is literal: its $1 and $@ are the timer's own arguments, not ours.
    # shellcheck disable=SC2016
    setsid bash -c 'sleep "$1"; shift; exec "$@"' r2b-lease "$LEASE_S" \
        bash "$HERE/$(basename "$0")" "${revert_args[@]}" </dev/null >>"$FAULT_DIR/lease.log" 2>&1 &
    echo "lease_pid=$!" >>"$(record_path)"
}

disarm_lease() {
    local pid
    pid=$(sed -n 's/^lease_pid=//p' "$(record_path)" 2>/dev/null | tail -n 1)
    [[ -n $pid && $pid != "$PPID" && $pid != "$$" ]] || return 0
    # Only end the timer if it is still ours: its command line names this tag.
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "--tag $TAG"; then
        r2b_end_lease "$pid"
    fi
}

do_inject() {
    if [[ -e $(record_path) ]]; then
        event inject noop "already active"
        return 0
    fi
    kind_validate
    guard_interfaces
    kind_precheck
    write_record
    [[ -z $ARMED ]] || wait_for_go
    local requested=${EPOCHREALTIME:-$(date +%s.%N)}
    if ! kind_inject; then
        kind_revert || true
        disarm_lease
        rm -f "$(record_path)"
        die "inject failed; nothing left behind"
    fi
    local verified=${EPOCHREALTIME:-$(date +%s.%N)}
    [[ -n $ARMED ]] || arm_lease
    event inject ok "$(kind_describe)${LEASE_S:+ lease_s=$LEASE_S} requested=$requested applied=${APPLIED_AT:-$verified} verified=$verified"
}

wait_for_go() {  # armed: lease first (a dead controller must not strand the record), then wait
    arm_lease
    # A kind may start now what applying needs (a process already running: no fork and exec
    # between `go` and the change).
    if declare -F kind_prepare >/dev/null; then kind_prepare; fi
    event armed ok "$(kind_describe)${LEASE_S:+ lease_s=$LEASE_S}"
    local word=""
    IFS= read -r word || true
    [[ $word == go ]] && return 0
    disarm_lease
    rm -f "$(record_path)"
    event inject cancelled "$(kind_describe)"
    exit 0
}

do_revert() {
    if [[ ! -e $(record_path) ]]; then
        event revert noop "not active"
        return 0
    fi
    r2b_record_is_ours "$(record_path)" || die "not this node's fault"
    kind_validate
    kind_revert || die "revert failed: $(kind_describe) is still faulted; fix it by hand"
    disarm_lease
    rm -f "$(record_path)"
    event revert ok "$(kind_describe)"
}

do_status() {
    local state recorded=no
    [[ -e $(record_path) ]] && recorded=yes
    kind_validate
    state=$(kind_status)
    event status ok "state=$state recorded=$recorded $(kind_describe)"
}

guard_interfaces() {  # refuse, before anything changes, a fault on a protected interface
    declare -F kind_interfaces >/dev/null || return 0
    local dev reason
    while read -r dev; do
        [[ -n $dev ]] || continue
        reason=$(r2b_interface_refusal "$dev" "$PROTECT_IFS")
        [[ -z $reason ]] || die "refused: $dev: $reason"
    done < <(kind_interfaces)
}

wait_for() {  # wait_for SECONDS COMMAND...: poll until COMMAND succeeds
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

main() {
    parse_args "$@"
    case $ACTION in
        inject) do_inject ;;
        revert) do_revert ;;
        status) do_status ;;
        *) die "unknown action '$ACTION' (inject, revert or status)" ;;
    esac
}
