# shellcheck shell=bash
# Node-side safety shared by every injector and heal.sh (sourced, not run):
#   * node identity and per-node fault records: a record lives under
#     FAULT_DIR/active/<node id>/<tag> and names its node; a node reads, reverts and heals only
#     its own records, so a work folder shared between nodes (NFS home, the virtual testbed)
#     never lets one node act on another's fault;
#   * the interface guard: an inject refuses an interface that is protected (--protect-if),
#     holds a default route, or carries a live ssh session, before anything changes;
#   * lease end: a disarmed lease timer is ended with its whole process group (its `sleep`).

# The fault folder: FAULT_DIR from the caller, else <injectors>/../faults (the node's work
# folder), except in a source checkout, where it is ~/.r2bench/faults (the default work folder),
# never a folder inside the repository.
r2b_default_fault_dir() {  # r2b_default_fault_dir INJECTORS_DIR
    if [[ -e $1/../.git || -e $1/../pyproject.toml ]]; then
        echo "${HOME:-/root}/.r2bench/faults"
    else
        echo "$1/../faults"
    fi
}

# This node's identity: its hostname and the start of its machine-id. Either one alone is not
# enough: cloned images share a machine-id, and the virtual testbed's nodes share one host.
r2b_node_id() {
    local host mid=nomachineid file
    host=$(uname -n)
    for file in /etc/machine-id /var/lib/dbus/machine-id; do
        if [[ -r $file ]]; then read -r -n 12 mid <"$file"; break; fi
    done
    host=${host//[^A-Za-z0-9_.-]/_}
    mid=${mid//[^A-Za-z0-9]/_}
    echo "${host:-nohost}.${mid:-nomachineid}"
}

r2b_node_active_dir() { echo "$1/$(r2b_node_id)"; }  # r2b_node_active_dir ACTIVE_DIR

# r2b_active_records ACTIVE_DIR: this node's active fault records, one path a line (a glob, not
# `find`: the sweep asks before every run).
r2b_active_records() {
    local record
    for record in "$(r2b_node_active_dir "$1")"/*; do
        [[ -f $record ]] && printf '%s\n' "$record"
    done
    return 0
}

# r2b_record_owner RECORD: the node id written in a record ('' for none).
r2b_record_owner() { sed -n 's/^node_id=//p' "$1" 2>/dev/null | head -n 1; }

# r2b_record_is_ours RECORD: true when RECORD was written by this node; says why not otherwise.
r2b_record_is_ours() {
    local owner
    owner=$(r2b_record_owner "$1")
    [[ -n $owner && $owner == "$(r2b_node_id)" ]] && return 0
    echo "record $1 belongs to ${owner:-an unknown node}, not to $(r2b_node_id): left alone" >&2
    return 1
}

# ---- interface guard ---------------------------------------------------------------------------

_r2b_iface_of_address() {  # interface carrying ADDRESS (IPv4 or IPv6), if any
    ip -o addr show 2>/dev/null | awk -v a="$1" '{split($4, p, "/"); if (p[1] == a) print $2}'
}

_r2b_default_route_ifaces() {
    { ip -o route show default; ip -o -6 route show default; } 2>/dev/null |
        awk '{for (i = 1; i < NF; i++) if ($i == "dev") print $(i + 1)}'
}

_r2b_ssh_local_addresses() {  # local ends of this session's and of sshd's live connections
    local addr
    if [[ -n ${SSH_CONNECTION:-} ]]; then
        read -r _ _ addr _ <<<"$SSH_CONNECTION"
        echo "$addr"
    fi
    command -v ss >/dev/null || return 0
    ss -Htnp state established 2>/dev/null | awk '/"sshd/ {print $3}' |
        sed -E 's/:[0-9]+$//; s/^\[//; s/\]$//; s/%.*$//'
}

# r2b_interface_refusal IFACE PROTECTED: why IFACE must not be faulted (empty when it may be).
r2b_interface_refusal() {
    local dev=$1 protected=$2 item addr
    local -a list
    IFS=, read -ra list <<<"$protected"
    for item in "${list[@]}"; do
        if [[ $item == "$dev" ]]; then
            echo "it is protected by the testbed (management, bootstrap or MPI/NCCL interface)"
            return
        fi
    done
    if _r2b_default_route_ifaces | grep -qxF -- "$dev"; then
        echo "it holds the node's default route"
        return
    fi
    while read -r addr; do
        [[ -n $addr ]] || continue
        if _r2b_iface_of_address "$addr" | grep -qxF -- "$dev"; then
            echo "it carries a live ssh session ($addr)"
            return
        fi
    done < <(_r2b_ssh_local_addresses)
}

# r2b_rdma_netdevs SYSFS CA PORT: netdevs of an RDMA port (RoCE GID table, or the HCA's net/).
r2b_rdma_netdevs() {
    local port_dir="$1/class/infiniband/$2/ports/$3" f dev_port
    for f in "$port_dir"/gid_attrs/ndevs/*; do
        [[ -s $f ]] && head -n 1 "$f"
    done 2>/dev/null | sort -u
    for f in "$1/class/infiniband/$2/device/net"/*; do
        [[ -e $f ]] || continue
        dev_port=$(cat "$f/dev_port" 2>/dev/null || echo 0)
        [[ $((dev_port + 1)) -eq $3 ]] && basename "$f"
    done 2>/dev/null
    return 0
}

# ---- lease end ---------------------------------------------------------------------------------

# r2b_end_lease PID: end a lease timer and everything in its process group (the timer runs
# under setsid, so its pid is its group's id); a timer not leading a group is ended alone.
r2b_end_lease() {
    local pid=$1 stat pgid
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 0
    stat=${stat##*) }
    read -r _ _ pgid _ <<<"$stat"
    if [[ $pgid == "$pid" ]]; then
        kill -TERM -- "-$pid" 2>/dev/null || true
    else
        kill -TERM "$pid" 2>/dev/null || true
    fi
}
