#!/usr/bin/env bash
# Per-NIC traffic counters and link state, sampled every INTERVAL_MS on this node for one run.
#
#   sampler.sh start OUT PIDFILE INTERVAL_MS NIC...   start in the background, write the pid
#                                                      to PIDFILE, return at once
#   sampler.sh stop PIDFILE                            end it (TERM; the last sample is kept)
#
# NIC is NAME:NETDEV:RDMA_DEVICE:PORT (empty fields allowed). A NIC with an RDMA device is read
# from its port counters (/sys/class/infiniband/DEV/ports/PORT/counters/port_{xmit,rcv}_data,
# which count 4-byte words: written here as bytes) and port state; RDMA traffic never shows in
# the netdev statistics. Any other NIC is read from /sys/class/net/NETDEV/statistics/
# {tx,rx}_bytes and operstate. OUT gets a tab-separated line per NIC per sample:
#   time (this node's epoch, $EPOCHREALTIME)  nic  source (net|ib)  tx_bytes  rx_bytes  state
# A counter that cannot be read is written as `-`, and so is one that is not a number (older
# kernels print `N/A (no PMA)`), said once in a `# unreadable:` line; R2B_SYSFS (default /sys)
# is where sysfs is.
# The loop forks nothing per sample (`read` builtins, and a `read -t` on a private FIFO to
# wait), so it costs little CPU. The process keeps the environment it was started with: a
# sweep sets R2B_RUN, so the run's teardown (and any later clean-up by run id) ends it like
# every other process of the run.
set -uo pipefail

val() {  # val VAR FILE: the first word of FILE into VAR, `-` when unreadable
    local -n _out=$1
    _out=-
    [[ -r $2 ]] && read -r _out _ <"$2" 2>/dev/null
    [[ -n $_out ]] || _out=-
}

declare -A said=()  # counters already reported as not a number (said once per file)
number() {  # number VAR INDEX FILE: VAR stays a whole number or becomes `-` (missing)
    local -n _value=$1
    [[ $_value == - || $_value =~ ^[0-9]+$ ]] && return 0
    # e.g. `N/A (no PMA)` (a device without a performance management agent, older kernels):
    # this NIC's value is missing; every other NIC is still sampled.
    if [[ -z ${said[$3]:-} ]]; then
        said[$3]=1
        printf '# unreadable: nic=%s file=%s value=%s (written as -)\n' "${names[$2]}" "$3" "$_value"
    fi
    _value=-
}

running() {  # running PID: alive and not a zombie (an init that does not reap keeps those)
    local stat
    read -r stat <"/proc/$1/stat" 2>/dev/null || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

loop() {  # loop OUT PIDFILE INTERVAL_MS NIC...
    local out=$1 pidfile=$2 ms=$3 spec name netdev dev port base now tx rx state i wait_fd fifo
    shift 3
    # one write(2) of a few bytes: `start` waits for the file to be non-empty, and by then
    # the whole pid is in it (no temporary file and `mv`: a fork on the run's critical path)
    echo $$ >"$pidfile"
    local -a names=() src=() txf=() rxf=() stf=()
    for spec in "$@"; do
        IFS=: read -r name netdev dev port <<<"$spec"
        names+=("$name")
        if [[ -n $dev ]]; then
            base=${R2B_SYSFS:-/sys}/class/infiniband/$dev/ports/${port:-1}
            src+=(ib)
            txf+=("$base/counters/port_xmit_data")
            rxf+=("$base/counters/port_rcv_data")
            stf+=("$base/state")
        else
            base=${R2B_SYSFS:-/sys}/class/net/$netdev
            src+=(net)
            txf+=("$base/statistics/tx_bytes")
            rxf+=("$base/statistics/rx_bytes")
            stf+=("$base/operstate")
        fi
    done
    fifo=$(mktemp -u "${TMPDIR:-/tmp}/r2b-sampler.XXXXXX")
    mkfifo "$fifo" && exec {wait_fd}<>"$fifo" && rm -f "$fifo"
    local wait_s
    printf -v wait_s '%d.%03d' $((ms / 1000)) $((ms % 1000))
    exec >>"$out"
    printf '# r2bench counters v1 host=%s interval_ms=%s pid=%s\n' "$(hostname)" "$ms" "$$"
    printf 'time\tnic\tsource\ttx_bytes\trx_bytes\tstate\n'
    trap 'exit 0' TERM INT
    while :; do
        now=$EPOCHREALTIME
        for i in "${!names[@]}"; do
            val tx "${txf[$i]}"
            val rx "${rxf[$i]}"
            number tx "$i" "${txf[$i]}"
            number rx "$i" "${rxf[$i]}"
            if [[ ${src[$i]} == ib ]]; then
                [[ $tx == - ]] || tx=$((tx * 4))
                [[ $rx == - ]] || rx=$((rx * 4))
                state=-
                [[ -r ${stf[$i]} ]] && read -r _ state <"${stf[$i]}" 2>/dev/null
            else
                val state "${stf[$i]}"
            fi
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$now" "${names[$i]}" "${src[$i]}" "$tx" "$rx" "${state:--}"
        done
        read -r -t "$wait_s" -u "$wait_fd" _ || :
    done
}

case ${1:-} in
    start)
        [[ $# -ge 5 ]] || { echo "usage: $0 start OUT PIDFILE INTERVAL_MS NIC..." >&2; exit 2; }
        out=$2 pidfile=$3 ms=$4
        shift 4
        [[ $ms =~ ^[0-9]+$ && $ms -ge 1 ]] || { echo "bad interval '$ms'" >&2; exit 2; }
        [[ $out == */* ]] && { mkdir -p "${out%/*}" || exit 1; }
        [[ $pidfile == */* ]] && { mkdir -p "${pidfile%/*}" || exit 1; }
        : >"$out" || exit 1
        : >"$pidfile" || exit 1  # emptied: the loop's pid is what makes it non-empty
        # setsid may fork (when already a group leader): the loop writes its own pid.
        setsid bash --noprofile --norc "${BASH_SOURCE[0]}" loop "$out" "$pidfile" "$ms" "$@" \
            </dev/null >/dev/null 2>&1 &
        # A bash starts in a few ms: look without forking first (the test is a builtin; a
        # `sleep` per look cost a run ~10 ms), then every 5 ms for up to 2 s.
        for _ in {1..5000}; do
            [[ -s $pidfile ]] && exit 0
        done
        for _ in {1..400}; do
            [[ -s $pidfile ]] && exit 0
            sleep 0.005
        done
        echo "sampler did not start" >&2
        exit 1
        ;;
    stop)
        [[ $# -eq 2 ]] || { echo "usage: $0 stop PIDFILE" >&2; exit 2; }
        [[ -r $2 ]] || exit 0
        read -r pid <"$2" || exit 0
        [[ $pid =~ ^[0-9]+$ ]] || exit 0
        # only our own loop: its command line names this script and `loop` (read with
        # builtins: a stop is on every run's teardown)
        cmdline=()
        mapfile -d '' cmdline <"/proc/$pid/cmdline" 2>/dev/null
        if [[ " ${cmdline[*]} " == *"sampler.sh loop "* ]]; then
            kill -TERM "$pid" 2>/dev/null
            # TERM ends it within ms (its `read -t` is interrupted): look without forking
            # first, then every 10 ms for up to 0.5 s
            for _ in {1..5000}; do
                running "$pid" || break
            done
            for _ in {1..50}; do
                running "$pid" || break
                sleep 0.01
            done
            kill -KILL "$pid" 2>/dev/null
        fi
        rm -f "$2"
        ;;
    loop)
        shift
        loop "$@"
        ;;
    *)
        echo "usage: $0 start|stop ..." >&2
        exit 2
        ;;
esac
