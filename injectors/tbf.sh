#!/usr/bin/env bash
# bandwidth_cap: a tbf root qdisc caps --dev's egress at --rate (e.g. 1gbit). Refuses if a
# non-default root qdisc is already there (never replaces someone else's), except the shaping of
# a capped r2bench virtual testbed (tbf, handle f2b0:): then the fault's tbf becomes its child,
# so the stricter rate wins and the testbed's cap stays. Revert removes the qdisc only if it is
# still the one this tag installed (same handle).
KIND=bandwidth_cap
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

handle() { printf '%x' $(( $(cksum <<<"$TAG" | cut -d' ' -f1) % 60000 + 1000 )); }
kind_validate() {
    need dev rate
    [[ ${OPT[rate]} =~ ^[0-9]+(\.[0-9]+)?([kmgt]?(bit|bps))$ ]] || die "--rate like 10mbit or 1gbit"
}
kind_describe() { echo "dev=${OPT[dev]} rate=${OPT[rate]} handle=$(handle):"; }
TESTBED_SHAPING=f2b0  # the handle a capped virtual testbed gives its own tbf on every data NIC
# Where this tag's qdisc sits, if it is there: `root` or `parent f2b0:1`.
ours_at() { tc qdisc show dev "${OPT[dev]}" | sed -nE "s/^qdisc tbf $(handle): (root|parent $TESTBED_SHAPING:1) .*/\1/p"; }
ours() { [[ -n $(ours_at) ]]; }
default_root() { tc qdisc show dev "${OPT[dev]}" root | grep -Eq '^qdisc (noqueue|pfifo_fast|fq_codel|mq|fq) 0: root'; }
testbed_root() { tc qdisc show dev "${OPT[dev]}" root | grep -q "^qdisc tbf $TESTBED_SHAPING: root"; }

kind_precheck() {
    default_root || testbed_root \
        || die "'${OPT[dev]}' already has a root qdisc: $(tc qdisc show dev "${OPT[dev]}" root | head -n 1)"
}

kind_inject() {
    local where=(root)
    testbed_root && where=(parent "$TESTBED_SHAPING:1")
    tc qdisc add dev "${OPT[dev]}" "${where[@]}" handle "$(handle):" tbf rate "${OPT[rate]}" burst 64kb latency 400ms
}

kind_revert() {
    local at
    at=$(ours_at)
    # $at is `root` or `parent f2b0:1`: unquoted, it is the one or two words tc expects.
    # shellcheck disable=SC2086
    [[ -z $at ]] || tc qdisc del dev "${OPT[dev]}" $at handle "$(handle):"
}
kind_status() { if ours; then echo active; else echo inactive; fi; }

kind_interfaces() { echo "${OPT[dev]}"; }

main "$@"
