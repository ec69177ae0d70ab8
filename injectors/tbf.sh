#!/usr/bin/env bash
# bandwidth_cap: a tbf root qdisc caps --dev's egress at --rate (e.g. 1gbit). Refuses if a
# non-default root qdisc is already there (never replaces someone else's), and revert removes
# the qdisc only if it is still the one this tag installed (same handle).
KIND=bandwidth_cap
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

handle() { printf '%x' $(( $(cksum <<<"$TAG" | cut -d' ' -f1) % 60000 + 1000 )); }
kind_validate() {
    need dev rate
    [[ ${OPT[rate]} =~ ^[0-9]+(\.[0-9]+)?([kmgt]?(bit|bps))$ ]] || die "--rate like 10mbit or 1gbit"
}
kind_describe() { echo "dev=${OPT[dev]} rate=${OPT[rate]} handle=$(handle):"; }
ours() { tc qdisc show dev "${OPT[dev]}" root | grep -q "^qdisc tbf $(handle): root"; }
default_root() { tc qdisc show dev "${OPT[dev]}" root | grep -Eq '^qdisc (noqueue|pfifo_fast|fq_codel|mq|fq) 0: root'; }

kind_precheck() {
    default_root || die "'${OPT[dev]}' already has a root qdisc: $(tc qdisc show dev "${OPT[dev]}" root | head -n 1)"
}

kind_inject() {
    tc qdisc add dev "${OPT[dev]}" root handle "$(handle):" tbf rate "${OPT[rate]}" burst 64kb latency 400ms
}

kind_revert() { ! ours || tc qdisc del dev "${OPT[dev]}" root handle "$(handle):"; }
kind_status() { if ours; then echo active; else echo inactive; fi; }

kind_interfaces() { echo "${OPT[dev]}"; }

main "$@"
