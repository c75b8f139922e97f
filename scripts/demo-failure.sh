#!/usr/bin/env bash
# demo-failure.sh — what `make demo-failure` runs: a node of a local virtual DVM is killed under a malleable job,
# and the job carries on (--on-failure shrink).
#
# 1. builds the tools, the synthetic benchmark (examples/synthetic) and the plot tool (scripts/rcplot),
# 2. starts a DVM of 4 virtual nodes x 4 slots on this host (private rendezvous directory),
# 3. launches the synthetic benchmark with 12 processes (nodes 0-2) under --on-failure shrink, adapting to changes sent from
#    outside (--trigger external),
# 4. kills node2's daemon with SIGKILL once the job is iterating: its 4 processes die with it, the runtime turns
#    the loss into a SUB of their ranks (a failure change, with its cause), the 8 survivors accept it and redo
#    the interrupted iteration,
# 5. grows the job back to 12 processes with `dynrc add` (onto node3, which was idle),
# 6. prints every change (dynrc list, and dynrc show of the failure change with its cause and step times), the
#    benchmark's tables, and draws the per-iteration plot (the changes shaded) as PNG and SVG into $DEMO_OUT
#    (default bench-out/demo-failure/),
# 7. stops the DVM and removes everything else it made.
# Usage: scripts/demo-failure.sh   (or make demo-failure). Needs only go.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${DEMO_OUT:-$root/bench-out/demo-failure}
. "$root/scripts/lib/common.sh"
work_dir dynrt-demo-failure
private_dvm_dir

step "building dynrun, dynrc, dyntop, the synthetic benchmark and rcplot"
(cd "$root" && go build -tags urfave_cli_no_docs,netgo -o "$work/" ./cmd/dynrun ./cmd/dynrc ./cmd/dyntop \
	./examples/synthetic ./scripts/rcplot)
PATH="$work:$PATH"

step "dynrun dvm start --nodes 4 --slots 4 --daemonize"
dvm=$(dynrun dvm start --nodes 4 --slots 4 --name demo-failure --daemonize | awk 'NR==1{print $NF}')
dynrun dvm status --dvm "$dvm"

# The job keeps iterating until two changes have ended: the failure change and the grow after it.
args=(--trigger external --changes 2 -i 40 --problem-size 8000000 --out "$work/demo.jsonl" --timeout 2m)
step "dynrun --dvm $dvm -n 12 --on-failure shrink --name demo synthetic ${args[*]}   (in the background)"
dynrun --dvm "$dvm" -n 12 --on-failure shrink --name demo "$work/synthetic" "${args[@]}" >"$work/job.log" 2>&1 &
job_pid=$!
for _ in $(seq 100); do # until a few iterations are written
	[[ -s $work/demo.jsonl ]] && (($(grep -c '"iter"' "$work/demo.jsonl" || true) >= 5)) && break
	sleep 0.1
done

pid=$(dynrun dvm status --dvm "$dvm" --json | awk '/"name": "node2"/{f=1} f && /"pid"/{gsub(/[^0-9]/,""); print; exit}')
[[ -n $pid ]] || die "no pid for the daemon of node2"
step "kill -9 $pid   (node2's daemon: its 4 processes die with it)"
kill -9 "$pid"

step "dynrc wait 1   (the failure change the runtime made of the loss)"
dynrc --dvm "$dvm" wait 1 --timeout 60s

step "dyntop --once   (node2 down, the job at 8 processes)"
NO_COLOR=1 dyntop --dvm "$dvm" --once

step "dynrc add -n 4 --wait   (grow back to 12, onto node3)"
dynrc --dvm "$dvm" add -n 4 --wait

wait "$job_pid" && job_rc=0 || job_rc=$?
job_pid=""

step "dynrc list   (the failure change, by the runtime, then the grow)"
dynrc --dvm "$dvm" list
step "dynrc show mpi://rte/demo/rc/1   (the cause and the time of every step)"
dynrc --dvm "$dvm" show mpi://rte/demo/rc/1

demo_finish demo-failure "$job_rc"
