#!/usr/bin/env bash
# bench-libdynrt.sh — libdynrt (C) against lib/session (Go) in the same run (issue 14, item 6), and the C synthetic
# benchmark's per-phase times in the thesis's table shapes.
#
# 1. Round trips, on one DVM of 4 virtual nodes x 28 slots: `-bench OP -n CALLS` of internal/malleable (Go) and
#    of its C twin libdynrt/test/malleable.c, alternately, $ROUNDS times each: rank 0 times CALLS calls after 20
#    to warm up (query: rc.query of listing 6.1 over 28 processes; psetop: a set operation on a set of 112
#    members, until every daemon holds it; lookup: a lookup relayed to the master, the floor under psetop).
#    The table gives, per operation and language, the median over the rounds of each round's median and p90.
# 2. examples/c-synthetic on the same DVM: inc mode 28 -> 112 by 28 (non-blocking and blocking accept) and
#    112 -> 28, f=10, i=70, problem size $PROBLEM; rcplot -tables prints the tables 8.2/8.3 and the phases of
#    figures 8.2/8.3 from its JSON lines.
# Output: the BENCH lines, the JSON lines, the logs and tables.txt in $OUT (default bench-out/libdynrt/).
#
# Usage: scripts/bench-libdynrt.sh                 (holds /tmp/dynrt-bench.lock while it runs)
#        ROUNDS=5 CALLS=2000 scripts/bench-libdynrt.sh
# Needs: go, cc, make, libmsgpack-dev (make deps-msgpack), flock.
set -euo pipefail

if [[ -z ${DYNRT_BENCH_LOCKED:-} ]]; then # never two benchmarks at once on this machine
	DYNRT_BENCH_LOCKED=1 exec flock /tmp/dynrt-bench.lock "$0" "$@"
fi

NODES=4
SLOTS=28
ROUNDS=${ROUNDS:-3}
CALLS=${CALLS:-1000}
PSETOP_CALLS=${PSETOP_CALLS:-300}
PROBLEM=${PROBLEM:-20000000}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$root/bench-out/libdynrt}
. "$root/scripts/lib/common.sh"
work_dir bench-libdynrt
private_dvm_dir

note "building dynrun, rcplot, internal/malleable and libdynrt's programs in $work"
(cd "$root" && go build -tags urfave_cli_no_docs,netgo -o "$work/" ./cmd/dynrun ./scripts/rcplot ./internal/malleable)
make --no-print-directory -C "$root" libdynrt LIBDYNRT_BUILD="$work/c" >/dev/null
mkdir -p "$OUT"
rm -f "$OUT"/*.jsonl "$OUT"/*.log "$OUT"/tables.txt "$OUT"/bench.txt
load0=$(load)

dvm=$("$work/dynrun" dvm start --nodes "$NODES" --slots "$SLOTS" --name libdynrt --daemonize)
master_pid=$(master_pid_of "$dvm")
note "DVM $dvm: $NODES virtual nodes x $SLOTS slots, load $load0"

# job NAME N PROG ARGS...: one job of N processes, its output in $work/NAME.log.
job() {
	local name=$1 n=$2
	shift 2
	local code=0
	"$work/dynrun" --dvm "$dvm" -n "$n" --name "$name" "$@" >"$work/$name.log" 2>&1 &
	job_pid=$!
	wait "$job_pid" || code=$?
	job_pid=""
	cp "$work/$name.log" "$OUT/$name.log"
	((code == 0)) || die "$name failed with status $code: $(tail -n 20 "$work/$name.log")"
}

# 1. Round trips, Go and C alternately.
for ((r = 1; r <= ROUNDS; r++)); do
	for op in query psetop lookup; do
		n=28 calls=$CALLS
		[[ $op == query ]] || n=112
		[[ $op != psetop ]] || calls=$PSETOP_CALLS
		for impl in go c; do
			prog=$work/malleable
			[[ $impl == go ]] || prog=$work/c/dynrt-malleable
			job "rt-$op-$impl-$r" "$n" "$prog" -bench "$op" -n "$calls"
			grep '^BENCH' "$work/rt-$op-$impl-$r.log" | sed "s/^BENCH {/BENCH {\"lang\":\"$impl\",\"procs\":$n,/" >>"$OUT/bench.txt"
		done
	done
	note "round trips, round $r of $ROUNDS done (load $(load))"
done

# 2. The C synthetic benchmark.
synth() {
	local name=$1 n=$2
	shift 2
	local t0=$SECONDS
	job "$name" "$n" "$work/c/c-synthetic" --start "$n" --problem-size "$PROBLEM" --timeout 600 "$@"
	grep '^{' "$work/$name.log" >"$OUT/$name.jsonl"
	note "$name: $(grep -c '"kind":"iter"' "$OUT/$name.jsonl") iterations in $((SECONDS - t0)) s (load $(load))"
}
synth c-inc-grow 28 --limit 112 --delta 28 -f 10 -i 70
synth c-inc-grow-b 28 --limit 112 --delta 28 -f 10 -i 70 -b
synth c-inc-shrink 112 --limit 28 --delta 28 -f 10 -i 70
stop_all

printf '\nlibdynrt (C) and lib/session (Go) on a %d x %d-slot virtual DVM (one host, %d CPUs); load %s at the start, %s at the end\n' \
	"$NODES" "$SLOTS" "$(nproc)" "$load0" "$(load)"
printf 'Rerun: scripts/bench-libdynrt.sh   (output in %s)\n\n' "$OUT"
# Median over the rounds of each round's median and p90, in µs, per operation and language.
printf '| operation | processes | Go median | C median | Go p90 | C p90 | C / Go (median) |\n|---|---|---|---|---|---|---|\n'
for op in query psetop lookup; do
	row=$(for impl in go c; do
		for f in median p90; do
			grep "\"lang\":\"$impl\"" "$OUT/bench.txt" | grep "\"op\":\"$op\"" | grep -o "\"$f\":[0-9]*" | cut -d: -f2 | sort -n |
				awk '{v[NR]=$1} END {printf "%s ", v[int((NR+1)/2)]}'
		done
	done)
	read -r gmed gp90 cmed cp90 <<<"$row"
	procs=28
	[[ $op == query ]] || procs=112
	awk -v op="$op" -v p="$procs" -v gm="$gmed" -v cm="$cmed" -v g9="$gp90" -v c9="$cp90" \
		'BEGIN {printf "| %s | %d | %.1f µs | %.1f µs | %.1f µs | %.1f µs | %.2f |\n", op, p, gm/1e3, cm/1e3, g9/1e3, c9/1e3, cm/gm}'
done | tee "$OUT/roundtrips.txt"
echo
"$work/rcplot" -o "$OUT" -tables "$OUT"/c-*.jsonl | tee "$OUT/tables.txt"
