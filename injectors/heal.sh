#!/usr/bin/env bash
# Revert every fault this node recorded as active (the final heal of a sweep, or after a crash).
# Only this node's records are read (FAULT_DIR/active/<node id>/, see node.sh): a work folder
# shared with other nodes never lets this node touch their faults. Each record names the script
# and options that revert it. Prints how many faults it reverted; exit 1 if any revert failed.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR
source "$HERE/node.sh"
FAULT_DIR=${R2B_FAULT_DIR:-$(r2b_default_fault_dir "$HERE")}
NODE_DIR=$(r2b_node_active_dir "$FAULT_DIR/active")
reverted=0
failed=0
shopt -s nullglob
for record in "$NODE_DIR"/*; do
    [[ -f $record ]] || continue
    if ! r2b_record_is_ours "$record"; then
        failed=$((failed + 1))
        continue
    fi
    tag=$(basename "$record")
    script=$(sed -n 's/^script=//p' "$record")
    args=(revert --tag "$tag")
    while IFS='=' read -r key value; do
        args+=("--${key#opt_}" "$value")
    done < <(grep '^opt_' "$record")
    if bash "$script" "${args[@]}"; then
        reverted=$((reverted + 1))
    else
        failed=$((failed + 1))
    fi
done
result=ok
[[ $failed -eq 0 ]] || result=failed
echo "r2b-fault $(date +%s.%N) heal tag=* kind=* result=$result node=$(r2b_node_id)" \
    "reverted $reverted fault(s), $failed failed"
[[ $failed -eq 0 ]]
