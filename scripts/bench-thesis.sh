#!/usr/bin/env bash
# bench-thesis.sh — the thesis's synthetic-benchmark sweeps (§8.3, figs. 8.1–8.3, tables 8.2/8.3) on dynrt,
# scaled to this machine (issue "Communicators, thesis evaluation, examples", item 5).
#
# The thesis ran on 4 nodes x 28 cores (112 cores). Here the same DVM shape is 4 *virtual* nodes x 28 slots on
# one host with 2 cores, so up to 112 processes share 2 cores. What is kept: the process counts (n_start, n_limit,
# n_delta), the modes, f relative to i, blocking and non-blocking accept. What is scaled:
#   - the problem size: 2e7 sampling points per iteration (PROBLEM) instead of 1e10, ~10–20 ms of work per
#     iteration on 2 cores instead of ~100 GFLOP; since the cores are shared, the work time no longer drops with
#     more processes (it does on real nodes);
#   - the iterations: inc mode i=70, f=10 as in the thesis; step mode i=70, f=10 (thesis i=200): enough for the
#     six changes of the longest plan (n_start 28: +28 -28 +56 -56 +84 -84), and the run goes on anyway until
#     every change of its plan has ended.
# Every configuration runs $ROUNDS times (default 1); the tables give medians over all changes of a row.
# Runs (each a fresh job on one DVM, started and stopped by this script):
#   inc-grow     inc mode 28 -> 112 by 28, non-blocking (fig. 8.1a)
#   inc-shrink   inc mode 112 -> 28 by 28, non-blocking (fig. 8.1b)
#   step-S-B     step mode, n_start S in $STARTS (default 28 56 84), n_limit 112, n_delta 28, for B in
#                $ACCEPTS (nb, b): adds of S+28.., then the matching subtractions (figs. 8.2/8.3, tables 8.2/8.3)
# Output: the JSON lines and the log of every run, the tables over all runs (rcplot -tables) and the plots (PNG + SVG) in
# $OUT (default bench-out/thesis/), and the load average at the start and end.
#
# Usage: scripts/bench-thesis.sh                       (one command; holds /tmp/dynrt-bench.lock while it runs)
#        ROUNDS=3 scripts/bench-thesis.sh              (three of every run)
#        OUT=/tmp/t STARTS="28" ACCEPTS="nb" scripts/bench-thesis.sh
# Needs: go, flock.
set -euo pipefail

if [[ -z ${DYNRT_BENCH_LOCKED:-} ]]; then # never two benchmarks at once on this machine
	DYNRT_BENCH_LOCKED=1 exec flock /tmp/dynrt-bench.lock "$0" "$@"
fi

NODES=4
SLOTS=28
PROBLEM=${PROBLEM:-20000000}
STARTS=${STARTS:-"28 56 84"}
ACCEPTS=${ACCEPTS:-"nb b"}
INC_I=${INC_I:-70}
INC_F=${INC_F:-10}
STEP_I=${STEP_I:-70}
STEP_F=${STEP_F:-10}
ROUNDS=${ROUNDS:-1}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$root/bench-out/thesis}
. "$root/scripts/lib/common.sh"
work_dir bench-thesis
private_dvm_dir

note "building dynrun, the synthetic benchmark and rcplot in $work"
(cd "$root" && go build -tags urfave_cli_no_docs,netgo -o "$work/" ./cmd/dynrun ./examples/synthetic ./scripts/rcplot)
mkdir -p "$OUT"
rm -f "$OUT"/*.jsonl "$OUT"/*.log "$OUT"/*.png "$OUT"/*.svg "$OUT"/tables.txt
load0=$(load)

dvm=$("$work/dynrun" dvm start --nodes "$NODES" --slots "$SLOTS" --name thesis --daemonize)
master_pid=$(master_pid_of "$dvm")
note "DVM $dvm: $NODES virtual nodes x $SLOTS slots, load $load0"

# run NAME N ARGS...: one job of N processes; its JSON lines go to $OUT/NAME.jsonl, its tables to NAME.log.
run() {
	local name=$1 n=$2
	shift 2
	local t0=$SECONDS code=0
	"$work/dynrun" --dvm "$dvm" -n "$n" --name "$name" "$work/synthetic" --start "$n" --problem-size "$PROBLEM" \
		--out "$OUT/$name.jsonl" --timeout 10m "$@" >"$work/$name.log" 2>&1 &
	job_pid=$!
	wait "$job_pid" || code=$?
	job_pid=""
	cp "$work/$name.log" "$OUT/$name.log"
	((code == 0)) || die "$name failed with status $code (log: $OUT/$name.log): $(grep -v '^#' "$OUT/$name.log" | tail -n 20)"
	note "$name: $(grep -c '"kind":"iter"' "$OUT/$name.jsonl") iterations in $((SECONDS - t0)) s (load $(load))"
}

for ((r = 1; r <= ROUNDS; r++)); do
	sfx=""
	((ROUNDS == 1)) || sfx="-r$r"
	run "inc-grow$sfx" 28 --mode inc --limit 112 --delta 28 -f "$INC_F" -i "$INC_I"
	run "inc-shrink$sfx" 112 --mode inc --limit 28 --delta 28 -f "$INC_F" -i "$INC_I"
	for b in $ACCEPTS; do
		flag=()
		[[ $b == b ]] && flag=(-b)
		for s in $STARTS; do
			run "step-$s-$b$sfx" "$s" --mode step --limit 112 --delta 28 -f "$STEP_F" -i "$STEP_I" "${flag[@]}"
		done
	done
done
stop_all

printf '\nSynthetic benchmark on a %d x %d-slot virtual DVM (one host, %d CPUs), problem size %s; load %s at the start, %s at the end\n' \
	"$NODES" "$SLOTS" "$(nproc)" "$PROBLEM" "$load0" "$(load)"
printf 'Rerun: scripts/bench-thesis.sh   (JSON lines, tables and plots in %s)\n\n' "$OUT"
"$work/rcplot" -o "$OUT" -tables "$OUT"/*.jsonl | tee "$OUT/tables.txt"
