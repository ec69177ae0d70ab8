#!/usr/bin/env bash
# link_down: take a network interface administratively down with `ip link`, and back up.
# Options: --dev IFNAME. Refuses an interface that is already down (not ours to bring up).
KIND=link_down
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

kind_validate() { need dev; [[ -e /sys/class/net/${OPT[dev]} ]] || die "no interface '${OPT[dev]}'"; }
kind_describe() { echo "dev=${OPT[dev]}"; }
is_up() { ip -o link show dev "${OPT[dev]}" | grep -q '[<,]UP[,>]'; }
is_down() { ! is_up; }

kind_precheck() { is_up || die "'${OPT[dev]}' is already down: not ours to fault or to bring back"; }
kind_inject() { ip link set dev "${OPT[dev]}" down && mark_applied && wait_for 5 is_down; }

kind_revert() { ip link set dev "${OPT[dev]}" up && wait_for 10 is_up; }
kind_status() { if is_up; then echo inactive; else echo active; fi; }

kind_interfaces() { echo "${OPT[dev]}"; }

main "$@"
