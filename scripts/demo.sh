#!/usr/bin/env bash
# demo.sh — what `make demo` runs: a malleable job grows and shrinks on a local virtual DVM.
#
# 1. starts a DVM of 4 virtual nodes x 8 slots on this host (private rendezvous directory),
# 2. launches the malleable test program (internal/malleable) with 8 processes,
# 3. grows it 8 -> 16 -> 32 and shrinks it 32 -> 16 -> 8 with a `dynrc script`,
# 4. prints the resource changes with their step timings, the process-set tree and a dyntop snapshot,
# 5. stops the DVM and removes everything it made.
# Usage: scripts/demo.sh   (or make demo). Needs only go.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/dynrt-demo.XXXXXX")
export DYNRT_DIR="$work/dvm"
unset DYNRT_DVM
mkdir -m 700 "$DYNRT_DIR"
dvm="" job_pid=""

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n $job_pid ]] && kill -0 "$job_pid" 2>/dev/null; then
		kill -TERM "$job_pid" 2>/dev/null || true
		wait "$job_pid" 2>/dev/null || true
	fi
	[[ -n $dvm ]] && "$work/dynrun" dvm stop --dvm "$dvm" >/dev/null 2>&1 || true
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "building dynrun, dynrc, dynpset, dyntop and the malleable program"
(cd "$root" && go build -tags urfave_cli_no_docs -o "$work/" ./cmd/dynrun ./cmd/dynrc ./cmd/dynpset ./cmd/dyntop ./internal/malleable)
PATH="$work:$PATH"

step "dynrun dvm start --nodes 4 --slots 8 --daemonize"
dvm=$(dynrun dvm start --nodes 4 --slots 8 --name demo --daemonize | awk 'NR==1{print $NF}')
dynrun dvm status --dvm "$dvm"

step "dynrun --dvm $dvm -n 8 --name demo malleable -last 4   (in the background; output in the job log)"
dynrun --dvm "$dvm" -n 8 --name demo "$work/malleable" -last 4 -quiet >"$work/job.log" 2>&1 &
job_pid=$!
for _ in $(seq 100); do # until the job is running (launch takes a few ms; the build cache may be cold)
	dynrun dvm status --dvm "$dvm" --json | grep -q '"running"' && break
	sleep 0.1
done

step "dynrc script: grow 8 -> 16 -> 32"
printf '%s\n' "add 8" "wait" "add 16" "wait" | dynrc --dvm "$dvm" script -

step "dynpset tree --dvm $dvm   (the job at 32 processes: sets, versions, epochs, delta sets)"
dynpset tree --dvm "$dvm"

step "dyntop --once   (the slot map across the 4 virtual nodes)"
NO_COLOR=1 dyntop --dvm "$dvm" --once

step "dynrc script: shrink 32 -> 16 -> 8"
printf '%s\n' "sub 16" "wait" "sub 8" "wait" | dynrc --dvm "$dvm" script -

step "dynrc list   (every change, total time from request to settled)"
dynrc --dvm "$dvm" list
last=$(dynrc --dvm "$dvm" list --json | grep -o "mpi://rte/[^\"]*" | tail -n 1 || true)
if [[ -n $last ]]; then
	step "dynrc show $last   (the timestamp of every step)"
	dynrc --dvm "$dvm" show "$last"
fi

wait "$job_pid" && job_rc=0 || job_rc=$?
job_pid=""
step "the job ended with exit status $job_rc; its last lines:"
tail -n 3 "$work/job.log"

step "dynrun dvm stop"
dynrun dvm stop --dvm "$dvm"
dvm=""
echo "demo done: nothing left running."
