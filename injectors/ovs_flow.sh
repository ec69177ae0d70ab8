#!/usr/bin/env bash
# flow_drop: on a BlueField's Arm side (DPU mode), cut one port of its host with an OVS flow on
# the port's bridge (--bridge, e.g. ovsbr1 for p0): by default the flow drops ALL traffic of the
# bridge at priority 65000, above every forwarding flow, as R-2CCL's authors cut node-1's mlx5_2
# in their CloudLab r7525 tests; with --peer it drops only RoCEv2 (UDP --udp-port, 4791) to that
# address. The flow's cookie is derived from the tag; revert deletes flows of that cookie only
# (a del-flows without a match would remove the NORMAL flow and cut the host off for good).
KIND=flow_drop
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OFCTL=(ovs-ofctl -O OpenFlow13)
cookie() { echo "0x$(printf '%s' "$TAG" | sha256sum | cut -c1-15)"; }
kind_validate() {
    need bridge
    [[ ${OPT[bridge]} =~ ^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$ ]] || die "--bridge must be an OVS bridge name"
    if [[ -n ${OPT[peer]:-} ]]; then
        [[ ${OPT[peer]} =~ ^[0-9.]+(/[0-9]+)?$ ]] || die "--peer must be an IPv4 address or prefix"
    elif [[ -n ${OPT[udp-port]:-} ]]; then
        die "--udp-port needs --peer (without a peer the flow drops all of the port's traffic)"
    fi
    [[ ${OPT[udp-port]:-4791} =~ ^[0-9]+$ ]] || die "--udp-port must be a number"
    [[ ${OPT[priority]:-65000} =~ ^[0-9]+$ ]] || die "--priority must be 0-65535"
    ((${OPT[priority]:-65000} <= 65535)) || die "--priority must be 0-65535"
}
match() {  # the flow's match: everything, or RoCEv2 to one peer
    if [[ -n ${OPT[peer]:-} ]]; then
        echo "udp,nw_dst=${OPT[peer]},tp_dst=${OPT[udp-port]:-4791},"
    fi
}
kind_describe() {
    local m
    m=$(match)
    m=${m%,}
    echo "bridge=${OPT[bridge]} match=${m:-all} priority=${OPT[priority]:-65000} cookie=$(cookie)"
}
present() { "${OFCTL[@]}" dump-flows "${OPT[bridge]}" "cookie=$(cookie)/-1" | grep -q "cookie=$(cookie)"; }

kind_precheck() {
    command -v ovs-ofctl >/dev/null || die "ovs-ofctl not found: run flow_drop on the SmartNIC's Arm side (the fault's executor), not on its host"
    "${OFCTL[@]}" dump-flows "${OPT[bridge]}" >/dev/null 2>&1 || die "no OVS bridge '${OPT[bridge]}' here (ovs-vsctl list-br shows the bridges)"
}

kind_inject() {
    "${OFCTL[@]}" add-flow "${OPT[bridge]}" \
        "cookie=$(cookie),priority=${OPT[priority]:-65000},$(match)actions=drop"
    mark_applied
    present
}

kind_revert() { "${OFCTL[@]}" del-flows "${OPT[bridge]}" "cookie=$(cookie)/-1" && ! present; }
kind_status() { if present; then echo active; else echo inactive; fi; }

main "$@"
