#!/usr/bin/env bash
# route_drop: drop packets leaving (and forwarded out of) --dev, optionally only those to
# --peer, in an nft table named after the tag; revert deletes exactly that table.
KIND=route_drop
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

table() {  # one table per tag, injective: _ -> __, . -> _d, - -> _h
    local name=${TAG//_/__}
    name=${name//./_d}
    echo "r2b_${name//-/_h}"
}
kind_validate() {
    need dev
    [[ -z ${OPT[peer]:-} || ${OPT[peer]} =~ ^[0-9a-fA-F.:/]+$ ]] || die "--peer must be an address or prefix"
}
kind_describe() { echo "dev=${OPT[dev]} peer=${OPT[peer]:-any} table=inet/$(table)"; }
kind_precheck() { ! exists || die "table inet $(table) exists without a record: not ours"; }
exists() { nft list table inet "$(table)" >/dev/null 2>&1; }

kind_inject() {
    local match=(oifname "${OPT[dev]}")
    if [[ -n ${OPT[peer]:-} ]]; then
        if [[ ${OPT[peer]} == *:* ]]; then match+=(ip6 daddr "${OPT[peer]}"); else match+=(ip daddr "${OPT[peer]}"); fi
    fi
    nft -f - <<NFT
table inet $(table) {
    chain r2b_out { type filter hook output priority -100; policy accept; ${match[*]} counter drop; }
    chain r2b_fwd { type filter hook forward priority -100; policy accept; ${match[*]} counter drop; }
}
NFT
}

kind_revert() { ! exists || nft delete table inet "$(table)"; }
kind_status() { if exists; then echo active; else echo inactive; fi; }

kind_interfaces() { echo "${OPT[dev]}"; }

main "$@"
