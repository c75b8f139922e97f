#!/usr/bin/env bash
# demo.sh — what `make demo` runs: a malleable job grows and shrinks on a local virtual DVM.
#
# 1. builds the tools, the synthetic benchmark (examples/synthetic) and the plot tool (scripts/rcplot),
# 2. starts a DVM of 4 virtual nodes x 8 slots on this host (private rendezvous directory),
# 3. launches the synthetic benchmark with 8 processes; it only adapts (--trigger external),
# 4. grows it 8 -> 16 -> 32 with a `dynrc script`, shows the process-set tree and a dyntop snapshot,
#    then shrinks it 32 -> 8 with another script,
# 5. prints every change with its step timings (dynrc list / show) and the benchmark's own tables
#    (thesis tables 8.2/8.3 and figs. 8.2/8.3 in text), and draws the per-iteration plot (thesis fig. 8.1)
#    as PNG and SVG into $DEMO_OUT (default bench-out/demo/),
# 6. stops the DVM and removes everything else it made.
# Usage: scripts/demo.sh   (or make demo). Needs only go.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${DEMO_OUT:-$root/bench-out/demo}
. "$root/scripts/lib/common.sh"
work_dir dynrt-demo
private_dvm_dir

step "building dynrun, dynrc, dynpset, dyntop, the synthetic benchmark and rcplot"
(cd "$root" && go build -tags urfave_cli_no_docs,netgo -o "$work/" ./cmd/dynrun ./cmd/dynrc ./cmd/dynpset ./cmd/dyntop \
	./examples/synthetic ./scripts/rcplot)
PATH="$work:$PATH"

step "dynrun dvm start --nodes 4 --slots 8 --daemonize"
dvm=$(dynrun dvm start --nodes 4 --slots 8 --name demo --daemonize | awk 'NR==1{print $NF}')
dynrun dvm status --dvm "$dvm"

# About 10 ms of work per iteration here at 8 processes (2 cores); the job keeps iterating until the three
# changes of the scripts below have ended.
args=(--trigger external --changes 3 -i 20 --problem-size 8000000 --out "$work/demo.jsonl" --timeout 2m)
step "dynrun --dvm $dvm -n 8 --name demo synthetic ${args[*]}   (in the background)"
dynrun --dvm "$dvm" -n 8 --name demo "$work/synthetic" "${args[@]}" >"$work/job.log" 2>&1 &
job_pid=$!
for _ in $(seq 100); do # until the job is running (launch takes a few ms)
	dynrun dvm status --dvm "$dvm" --json | grep -q '"running"' && break
	sleep 0.1
done

step "dynrc script: grow 8 -> 16 -> 32"
printf '%s\n' "add 8" "wait" "add 16" "wait" | dynrc --dvm "$dvm" script -

step "dynpset tree --dvm $dvm   (the job at 32 processes: sets, versions, epochs, delta sets)"
dynpset tree --dvm "$dvm"

step "dyntop --once   (the slot map across the 4 virtual nodes)"
NO_COLOR=1 dyntop --dvm "$dvm" --once

step "dynrc script: shrink 32 -> 8"
printf '%s\n' "sub 24" "wait" | dynrc --dvm "$dvm" script -

step "dynrc list   (every change, total time from request to settled)"
dynrc --dvm "$dvm" list
last=$(dynrc --dvm "$dvm" list --json | grep -o "mpi://rte/[^\"]*" | tail -n 1 || true)
if [[ -n $last ]]; then
	step "dynrc show $last   (the timestamp of every step)"
	dynrc --dvm "$dvm" show "$last"
fi

wait "$job_pid" && job_rc=0 || job_rc=$?
job_pid=""
demo_finish demo "$job_rc"
