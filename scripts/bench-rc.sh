#!/usr/bin/env bash
# bench-rc.sh — step timings of resource changes (issue "Dynamic resource changes end to end", item 8).
#
# Starts a DVM of 4 virtual nodes x 28 slots on this host, launches a 28-process malleable job on it
# (internal/malleable), then runs, for each of $ROUNDS rounds (default 5) and each N in $NS (default
# "1 8 28", shuffled per round), `dynrc add -n N --wait` followed by `dynrc sub -n N --wait`, so ADD and SUB
# alternate and the job is back at 28 processes between changes. One uncounted ADD/SUB of 1 warms up first.
# From the step timestamps the master records (`dynrc --json`) it prints the median time from the request
# until each step: announced, all started (ADD), PENDING (accept published), FINALIZED, all exited (SUB),
# and the total. Then it runs the Go benchmarks of pset-operation and RC-query round trips and the
# floors under them: a call relayed to the master without pushes, and 28 idle processes exiting
# (`go test -bench "$GO_BENCH"` in $GO_BENCH_PKGS). Everything it started is stopped on exit (trap).
#
# Usage: scripts/bench-rc.sh                     (from anywhere in the repository)
#        ROUNDS=10 NS="28" scripts/bench-rc.sh
#        GO_BENCH=none scripts/bench-rc.sh        (skip the Go benchmarks)
# Needs: go, jq.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
NS=${NS:-"1 8 28"}
NODES=4
SLOTS=28
JOBSIZE=28
APP=bench
GO_BENCH=${GO_BENCH:-'^Benchmark(PsetOp112|RelayFloor112|RCQuery|ExitFloor28)$'}
GO_BENCH_PKGS=${GO_BENCH_PKGS:-"./lib/session/"}
MALLEABLE_ARGS=${MALLEABLE_ARGS:-"-timeout 3h"} # the program's own time limit (default 60s)
TIMEOUT=${TIMEOUT:-60s} # per change

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/lib/common.sh"
work_dir bench-rc
private_dvm_dir


command -v jq >/dev/null || die "jq is needed (apt-get install jq)"

# --- build -----------------------------------------------------------------
note "building dynrun, dynrc and the malleable test program in $work"
(cd "$root" && go build -o "$work/" ./cmd/dynrun ./cmd/dynrc ./internal/malleable)

# --- DVM and job ------------------------------------------------------------
dvm=$("$work/dynrun" dvm start --nodes "$NODES" --slots "$SLOTS" --daemonize)
master_pid=$(master_pid_of "$dvm")
note "DVM $dvm: $NODES nodes x $SLOTS slots, master pid $master_pid"

# shellcheck disable=SC2086 # MALLEABLE_ARGS is a word list
"$work/dynrun" --dvm "$dvm" -n "$JOBSIZE" --name "$APP" "$work/malleable" $MALLEABLE_ARGS >"$work/job.log" 2>&1 &
job_pid=$!

size() { "$work/dynrun" dvm status --dvm "$dvm" --json | jq -r --arg app "$APP" '[.jobs[] | select(.app == $app and .state == "running") | .size] | first // 0'; }
for ((i = 0; ; i++)); do
	[[ $(size) == "$JOBSIZE" ]] && break
	kill -0 "$job_pid" 2>/dev/null || die "the job ended early: $(tail -5 "$work/job.log")"
	((i < 500)) || die "the job did not reach $JOBSIZE running processes"
	sleep 0.02
done
note "job $APP runs with $JOBSIZE processes"

# --- changes ----------------------------------------------------------------
rc() { "$work/dynrc" --dvm "$dvm" "$@" --job "$APP" --wait --json --timeout "$TIMEOUT"; }

# change TYPE N FILE: run one change, keep its record in FILE. A failed change (aborted, timeout, busy)
# stops the benchmark: the numbers would not mean what they say.
change() {
	local out code=0
	out=$(rc "$1" -n "$2" 2>"$work/err") || code=$?
	if ((code != 0)); then
		printf '%s\n' "$out" >&2
		die "dynrc $1 -n $2 failed with status $code: $(cat "$work/err")"
	fi
	printf '%s\n' "$out" >"$3"
}

note "warm-up: add 1, sub 1"
change add 1 /dev/null
change sub 1 /dev/null

mkdir "$work/runs"
for ((r = 1; r <= ROUNDS; r++)); do
	# shellcheck disable=SC2086
	for n in $(printf '%s\n' $NS | shuf); do
		change add "$n" "$work/runs/add-$n-$r.json"
		change sub "$n" "$work/runs/sub-$n-$r.json"
	done
	note "round $r/$ROUNDS done"
done

# --- report -----------------------------------------------------------------
printf '\nResource changes on a %d x %d-slot virtual DVM, job of %d processes, %d rounds (median ms from the request)\n\n' \
	"$NODES" "$SLOTS" "$JOBSIZE" "$ROUNDS"
jq -s -r '
	def median: sort | if length == 0 then "-"
		elif length % 2 == 1 then .[length / 2 | floor]
		else (.[length / 2 - 1] + .[length / 2]) / 2 end
		| if type == "number" then (. * 1000 | round / 1000 | tostring) else . end;
	def step(s): map(.elapsed_ms[s] // empty) | median;
	["TYPE", "N", "RUNS", "ANNOUNCED", "ALL_STARTED", "PENDING", "FINALIZED", "ALL_EXITED", "TOTAL"],
	(group_by([.type, .n]) | sort_by(.[0].type, .[0].n) | .[] |
		[.[0].type, (.[0].n | tostring), (length | tostring), step("announced"), step("all_started"),
		 step("accept_published"), step("finalized"), step("all_exited"), (map(.total_ms // empty) | median)])
	| @tsv' "$work"/runs/*.json | column -t -s $'\t'

printf '\nTargets (issue item 8): SUB 28 request -> finalized and exited <= 10 ms; ADD 28 all started <= 60 ms, FINALIZED <= 100 ms.\n'
printf 'Thesis (4 real nodes): ADD 28 -> 11.6 ms until started, 1445 ms total; SUB 28 -> 88 ms total.\n'
printf 'Load average: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"

# --- Go benchmarks ----------------------------------------------------------
stop_all # the benchmarks start their own DVMs; leave them the CPUs
if [[ $GO_BENCH != none ]]; then
	printf '\nGo benchmarks (%s in %s):\n' "$GO_BENCH" "$GO_BENCH_PKGS"
	# shellcheck disable=SC2086
	(cd "$root" && go test -run '^$' -bench "$GO_BENCH" -benchmem $GO_BENCH_PKGS) | grep -E '^(Benchmark|ok|FAIL|---)' || true
fi
