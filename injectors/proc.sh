#!/usr/bin/env bash
# process_stop / process_kill: signal one rank of a run (a hung or a crashed peer).
# Options: --run RUN_ID --rank R --signal STOP|KILL. The rank's processes are found, when the
# fault fires, by their environment: R2B_RUN=RUN_ID (every process of a run carries it) and the
# launcher's rank variable (OMPI_COMM_WORLD_RANK, PMIX_RANK or SLURM_PROCID; a job with none,
# such as one local process, is rank 0). A stopped rank is continued on revert (and when the
# lease ends); a killed one has nothing to revert.
KIND=process_fault  # process_stop or process_kill once --signal is read
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

kind_validate() {
    need run rank signal
    [[ ${OPT[rank]} =~ ^[0-9]+$ ]] || die "--rank must be a whole number"
    [[ ${OPT[signal]} == STOP || ${OPT[signal]} == KILL ]] || die "--signal must be STOP or KILL"
    [[ ${OPT[run]} =~ ^[A-Za-z0-9_.-]{1,200}$ ]] || die "--run must be a run id"
    KIND=process_${OPT[signal],,}
    [[ $KIND == process_kill ]] || KIND=process_stop
}
kind_describe() { echo "run=${OPT[run]} rank=${OPT[rank]} signal=${OPT[signal]} pids=$(rank_pids | tr '\n' ,)"; }

rank_of() {  # rank_of PID: the rank a process says it is (empty if it names none)
    tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null \
        | sed -n 's/^\(OMPI_COMM_WORLD_RANK\|PMIX_RANK\|SLURM_PROCID\)=//p' | head -n 1
}

rank_pids() {  # the pids of rank --rank of run --run on this node
    local file pid rank
    grep -lzxF "R2B_RUN=${OPT[run]}" /proc/[0-9]*/environ 2>/dev/null | while IFS= read -r file; do
        pid=${file#/proc/}
        pid=${pid%/environ}
        rank=$(rank_of "$pid")
        [[ ${rank:-0} == "${OPT[rank]}" ]] && echo "$pid"
    done
}

state_of() { sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null; }
all_stopped() {
    local pid
    for pid in $PIDS; do [[ $(state_of "$pid") == T ]] || return 1; done
}
all_gone() {
    local pid
    for pid in $PIDS; do [[ -z $(state_of "$pid") || $(state_of "$pid") == Z ]] || return 1; done
}

# The job does not exist yet when an armed fault is checked: its processes are found on fire.
kind_precheck() { :; }
kind_inject() {
    PIDS=$(rank_pids | tr '\n' ' ')
    [[ -n ${PIDS// /} ]] || { echo "no process of rank ${OPT[rank]} of run ${OPT[run]} on this node" >&2; return 1; }
    # $PIDS is a list of whole-number pids: unquoted, each pid is one argument.
    # shellcheck disable=SC2086
    kill "-${OPT[signal]}" $PIDS && mark_applied || return 1
    echo "pids=${PIDS% }" >>"$(record_path)"
    if [[ ${OPT[signal]} == STOP ]]; then wait_for 5 all_stopped; else wait_for 5 all_gone; fi
}
recorded_pids() { sed -n 's/^pids=//p' "$(record_path)" 2>/dev/null | tail -n 1; }
kind_revert() {
    [[ ${OPT[signal]} == STOP ]] || return 0
    PIDS=$(recorded_pids)
    local pid
    for pid in $PIDS; do kill -CONT "$pid" 2>/dev/null || true; done
}
kind_status() {
    PIDS=$(recorded_pids)
    if [[ -n $PIDS && ${OPT[signal]} == STOP ]] && all_stopped; then echo active; else echo inactive; fi
}

main "$@"
