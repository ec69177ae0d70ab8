#!/usr/bin/env bash
# r2bench's command channel on a node: one long-lived bash per node per sweep, fed requests on
# stdin by the controller, so a fault trigger costs one round trip instead of an ssh session,
# a login shell and an interpreter start-up. One request per line, words shell-quoted:
#
#   run ID ARGV...          run ARGV in the background; prints `r2b-done ID <exit code>`
#   arm ID ARGV...          start ARGV (an `inject --armed`) reading its stdin from a FIFO
#   fire ID                 write `go` to armed ID's FIFO (the injector applies at once)
#   cancel ID               write `cancel` to armed ID's FIFO (the injector leaves nothing)
#   clock ID                prints `r2b-clock ID <node epoch>`
#   kill ID RUN             end every process whose environment holds R2B_RUN=RUN (TERM, then
#                           KILL after 2 s); prints `r2b-done ID <processes left>`
#   procs ID                prints `r2b-procs ID <pid>=<run>...` of every process carrying R2B_RUN
#   quit                    wait for background work and exit
#
# Everything the children print goes to stdout, a line at a time. The controller reads lines
# starting with `r2b-`; the rest is kept as the node's agent log.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FIFO_DIR=$(mktemp -d "${TMPDIR:-/tmp}/r2b-agent.XXXXXX")
trap 'rm -rf "$FIFO_DIR"' EXIT
declare -A ARMED_FD=()

say() { printf '%s\n' "$*"; }

run_pids() {  # run_pids RUN: pids whose environment has R2B_RUN=RUN (RUN empty: any R2B_RUN)
    local match=(-zxF "R2B_RUN=$1") file pid
    [[ -n $1 ]] || match=(-z "^R2B_RUN=")
    # One grep over every environment (a process per pid would cost a fork each).
    grep -l "${match[@]}" /proc/[0-9]*/environ 2>/dev/null | while IFS= read -r file; do
        pid=${file#/proc/}
        printf '%s ' "${pid%/environ}"
    done
}

run_owners() {  # pid=run of every process carrying R2B_RUN
    local pid run
    for pid in $(run_pids ""); do
        run=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | sed -n 's/^R2B_RUN=//p' | head -n 1)
        [[ -n $run ]] && printf '%s=%s ' "$pid" "$run"
    done
}

kill_run() {  # kill_run ID RUN
    local id=$1 run=$2 pids left i
    pids=$(run_pids "$run")
    # Nothing of the run left (the usual end of a run): the answer needs no second look.
    [[ -n $pids ]] || { say "r2b-done $id 0"; return; }
    # $pids and $left are lists of whole-number pids: unquoted, each pid is one argument.
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null
    for i in 1 2 3 4 5 6 7 8 9 10; do
        left=$(run_pids "$run")
        [[ -z $left ]] && break
        [[ $i -eq 10 ]] || { sleep 0.2; continue; }
    done
    # shellcheck disable=SC2086
    [[ -z $left ]] || { kill -KILL $left 2>/dev/null; sleep 0.2; left=$(run_pids "$run"); }
    # One positional parameter per pid left: $# counts them.
    # shellcheck disable=SC2086
    set -- $left
    say "r2b-done $id $#"
}

arm() {  # arm ID ARGV...
    local id=$1 fifo fd
    shift
    fifo=$FIFO_DIR/$id
    mkfifo "$fifo" || { say "r2b-done $id 127"; return; }
    exec {fd}<>"$fifo"  # read-write: never blocks, and keeps the FIFO open for the injector
    ARMED_FD[$id]=$fd
    { "$@" <"$fifo"; say "r2b-done $id $?"; } &
}

release() {  # release ID WORD: hand WORD to an armed injector and forget it
    local fd=${ARMED_FD[$1]:-}
    [[ -n $fd ]] || { say "r2b-done $1 125"; return; }
    printf '%s\n' "$2" >&"$fd"
    exec {fd}>&-
    unset "ARMED_FD[$1]"
    # The FIFO file stays until the agent exits (its trap removes the folder): an `rm` here
    # would fork beside the injector just when it should have the CPU to itself.
}

# A trigger should not wait for the CPU behind the workload it faults: as root, the agent (and
# so every injector it starts) runs ahead of ordinary processes.
[[ $(id -u) -ne 0 ]] || renice -n -10 -p $$ >/dev/null 2>&1 || true
say "r2b-agent ready pid=$$ host=$(hostname) dir=$HERE"
while IFS= read -r line; do
    eval "set -- $line" 2>/dev/null || { say "r2b-error cannot parse request"; continue; }
    [[ $# -ge 1 ]] || continue
    verb=$1
    shift
    case $verb in
        run) id=$1; shift; { "$@"; say "r2b-done $id $?"; } </dev/null & ;;
        arm) arm "$@" ;;
        fire) release "$1" go ;;
        cancel) release "$1" cancel ;;
        clock) say "r2b-clock $1 $EPOCHREALTIME" ;;
        kill) kill_run "$1" "$2" ;;
        procs) say "r2b-procs $1 $(run_owners)" ;;
        quit) break ;;
        *) say "r2b-error unknown request '$verb'" ;;
    esac
done
for id in "${!ARMED_FD[@]}"; do release "$id" cancel; done
wait
