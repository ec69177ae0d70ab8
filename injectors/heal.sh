#!/usr/bin/env bash
# Revert every fault still recorded as active on this node (the final heal of a sweep, or after
# a crash). Each record names the script and options that revert it. Exit 1 if any revert failed.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ACTIVE_DIR=${R2B_FAULT_DIR:-$HERE/../faults}/active
status=0
shopt -s nullglob
for record in "$ACTIVE_DIR"/*; do
    tag=$(basename "$record")
    script=$(sed -n 's/^script=//p' "$record")
    args=(revert --tag "$tag")
    while IFS='=' read -r key value; do
        args+=("--${key#opt_}" "$value")
    done < <(grep '^opt_' "$record")
    bash "$script" "${args[@]}" || status=1
done
[[ ${#ACTIVE_DIR} -gt 0 ]] && echo "r2b-fault $(date +%s.%N) heal tag=* kind=* result=$([[ $status -eq 0 ]] && echo ok || echo failed)"
exit $status
