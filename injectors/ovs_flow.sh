#!/usr/bin/env bash
# flow_drop: on a BlueField (DPU mode) Arm side, drop RoCEv2 (UDP 4791, or --udp-port) flows to
# --peer on OVS bridge --bridge with a flow whose cookie is derived from the tag. Revert deletes
# flows matching that cookie only: a del-flows without a match would remove the NORMAL flow and
# cut the host off.
KIND=flow_drop
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cookie() { echo "0x$(printf '%s' "$TAG" | sha256sum | cut -c1-15)"; }
kind_validate() {
    need bridge peer
    [[ ${OPT[peer]} =~ ^[0-9.]+(/[0-9]+)?$ ]] || die "--peer must be an IPv4 address or prefix"
    [[ ${OPT[udp-port]:-4791} =~ ^[0-9]+$ ]] || die "--udp-port must be a number"
}
kind_describe() { echo "bridge=${OPT[bridge]} peer=${OPT[peer]} cookie=$(cookie)"; }
present() { ovs-ofctl dump-flows "${OPT[bridge]}" "cookie=$(cookie)/-1" | grep -q "cookie=$(cookie)"; }

kind_precheck() { command -v ovs-ofctl >/dev/null || die "ovs-ofctl not found (run this on the DPU's Arm side)"; }

kind_inject() {
    ovs-ofctl add-flow "${OPT[bridge]}" \
        "cookie=$(cookie),priority=1000,udp,nw_dst=${OPT[peer]},tp_dst=${OPT[udp-port]:-4791},actions=drop"
    present
}

kind_revert() { ovs-ofctl del-flows "${OPT[bridge]}" "cookie=$(cookie)/-1" && ! present; }
kind_status() { if present; then echo active; else echo inactive; fi; }

main "$@"
