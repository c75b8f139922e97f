#!/usr/bin/env bash
# bench-scale.sh — how dynrt's costs grow with the size of a DVM (issue 16), on a simulated DVM.
#
# Builds scripts/scalebench and runs it: for every size in $NODES (default 16 64 256 1024 nodes of $SLOTS
# slots, default 64) it starts the real master in its own process and the real daemons of the other nodes
# in a second process, with simulated processes (lib/simnode; docs/scale.md says what is real), and
# measures: DVM start; the launch of a job filling the DVM; ADD and SUB of 1 and of $K processes (default
# 1024, at most one per node) on a malleable job of one process per node, until FINALIZED, and the time
# until ADD 1 was ANNOUNCED (its record on every daemon); a set operation on the filling job's set; a fence
# over a job of $FENCE_SLOTS processes per node (default 8); the master's memory per process and per change,
# the nodes' memory per node, and the CPU per change of the master and of all daemons together.
# It prints the table and the growth exponents and writes bench-out/scale/scale.tsv, scale.svg and
# scale.png (cost against nodes, log-log). Nothing is left running: the master stops the daemons, and the
# nodes host exits when its stdin closes.
#
# Usage: scripts/bench-scale.sh
#        NODES="16 256" SLOTS=8 scripts/bench-scale.sh
set -euo pipefail

NODES=${NODES:-"16 64 256 1024"}
SLOTS=${SLOTS:-64}
K=${K:-1024}
FENCE_SLOTS=${FENCE_SLOTS:-8}
RADIX=${RADIX:-0} # the DVM's --tree-radix (0: a star)

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/lib/common.sh"
work_dir bench-scale

note "building scalebench in $work"
(cd "$root" && go build -o "$work/scalebench" ./scripts/scalebench)
out="$root/bench-out/scale"
mkdir -p "$out"
note "nodes: $NODES; $SLOTS slots each; K=$K; fence job of $FENCE_SLOTS per node; tree radix $RADIX (commit $(git -C "$root" rev-parse --short HEAD))"
"$work/scalebench" -nodes "$(echo $NODES | tr ' ' ,)" -slots "$SLOTS" -k "$K" -fence-slots "$FENCE_SLOTS" -radix "$RADIX" -o "$out"
