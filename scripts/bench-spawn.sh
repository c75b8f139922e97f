#!/usr/bin/env bash
# bench-spawn.sh — grow a running 1-process job by k processes until all of
# them share a communicator with the original process and a barrier over it
# completes: dynrt (RC add + accept/confirm + communicator + barrier,
# examples/spawnbench) against Open MPI's MPI_Comm_spawn + barrier over the
# intercommunicator (testdata/spawn/spawn_bench.c). Seed 003 §5.1 (spawn
# latency) and §5.2 (spawn rate). See docs/spawn.md.
#
# Implementations ("impl" in the raw lines):
#   dynrt         spawnbench on a warm DVM (dynrun dvm start, 1 node x 32 slots)
#   ompi          mpirun.openmpi --oversubscribe --mca pml ob1 --mca btl self,vader,tcp
#                 (the shared-memory path Open MPI uses on one host without UCX)
#   ompi-default  mpirun.openmpi --oversubscribe with Debian's defaults (pml ucx)
# A set runs every implementation once, in an order rotated from set to set;
# each run does WARMUP uncounted and ROUNDS counted rounds per k, then one
# rate run of RATE grows by 1. The medians pool all sets.
#
# Open MPI 4.1.4 on Debian 12 (external PMIx 4.2) now and then hangs in
# MPI_Comm_spawn; spawn_bench's watchdog then ends the run, and the rounds
# still missing run in a new mpirun (counted in the "runs killed" column).
#
# Usage: scripts/bench-spawn.sh                        (from anywhere in the repository)
#        ROUNDS=5 SETS=2 KS="1 8" RATE=8 PEERS=ompi scripts/bench-spawn.sh
# Raw lines and the tables go to bench-out/spawn/<time>/ (OUT=dir to choose).
# The whole script holds /tmp/dynrt-bench.lock, so benchmarks never overlap.
set -euo pipefail

if [[ -z ${DYNRT_BENCH_LOCKED:-} ]]; then
	exec env DYNRT_BENCH_LOCKED=1 flock /tmp/dynrt-bench.lock "$0" "$@"
fi

ROUNDS=${ROUNDS:-10}
SETS=${SETS:-3}
WARMUP=${WARMUP:-1}
KS=${KS:-"1 4 8"}
RATE=${RATE:-16}
PEERS=${PEERS:-"ompi ompi-default"}
SLOTS=32
TRIES=10 # mpirun runs per k and set before giving up on the missing rounds

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/bench-out/spawn/$(date +%Y%m%d-%H%M%S)}
. "$root/scripts/lib/common.sh"
work_dir bench-spawn
dvm=""

# --- Open MPI --------------------------------------------------------------
# mpicc.openmpi comes with openmpi-bin, mpi.h with libopenmpi-dev.
if ! command -v mpicc.openmpi >/dev/null || ! command -v mpirun.openmpi >/dev/null ||
	[[ ! -e $(mpicc.openmpi --showme:incdirs 2>/dev/null | cut -d" " -f1)/mpi.h ]]; then
	sudo=""
	[[ $(id -u) -eq 0 ]] || sudo="sudo -n"
	note "installing libopenmpi-dev (Open MPI) with apt-get"
	{ $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq openmpi-bin libopenmpi-dev; } >"$work/apt.log" 2>&1 ||
		{ tail -5 "$work/apt.log" >&2; note "cannot install Open MPI"; exit 1; }
fi
if [[ $(id -u) -eq 0 ]]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# --- build -----------------------------------------------------------------
# netgo: static binaries, as `make build` makes them (no dynamic loader at
# every start of a new process).
note "building dynrun, spawnbench and spawn_bench in $work"
(cd "$root" && go build -tags urfave_cli_no_docs,netgo -o "$work/dynrun" ./cmd/dynrun)
(cd "$root" && go build -tags netgo -o "$work/spawnbench" ./examples/spawnbench)
mpicc.openmpi -O2 -o "$work/spawn_bench" "$root/testdata/spawn/spawn_bench.c"

# --- warm DVM --------------------------------------------------------------
export DYNRT_DIR=$work/dvm
mkdir -m 700 "$DYNRT_DIR"
dvm=$("$work/dynrun" dvm start --daemonize --nodes 1 --slots "$SLOTS" --name bench-spawn)
note "warm DVM $dvm: 1 node x $SLOTS slots"

mkdir -p "$out"
raw=$out/raw.txt
: >"$raw"
kcsv=${KS// /,}

# keep SET FILE: append the record lines of FILE to the raw file, tagged
# with the set.
keep() {
	sed -n -E "s/^(ROUND|RATE|HANG) \{/\1 {\"set\":$1,/p" "$2" >>"$raw"
}

run_dynrt() {
	local set=$1 log=$work/dynrt.$1
	if ! "$work/dynrun" --dvm "$dvm" -n 1 --timeout 10m "$work/spawnbench" \
		-k "$kcsv" -rounds "$ROUNDS" -warmup "$WARMUP" -rate "$RATE" >"$log.out" 2>"$log.err"; then
		cat "$log.out" "$log.err" >&2
		note "dynrt run of set $set failed"
		exit 1
	fi
	keep "$set" "$log.out"
}

mca_of() {
	case $1 in
	ompi) echo "--mca pml ob1 --mca btl self,vader,tcp" ;;
	ompi-default) echo "" ;;
	*) note "unknown peer $1"; exit 2 ;;
	esac
}

# ompi_until SET LABEL WORD WANT ARGS...: runs spawn_bench ARGS until WANT
# lines starting with WORD have come out (TRIES runs at most), passing the
# number still missing in place of the word MISSING in ARGS.
ompi_until() {
	local set=$1 label=$2 word=$3 want=$4 got=0 try log
	shift 4
	# shellcheck disable=SC2207
	local mca=($(mca_of "$label"))
	for ((try = 1; got < want && try <= TRIES; try++)); do
		log=$work/$label.$set.$try
		local args=("${@/MISSING/$((want - got))}")
		timeout -k 10 600 mpirun.openmpi --oversubscribe -n 1 "${mca[@]}" \
			"$work/spawn_bench" "${args[@]}" "$label" >"$log.out" 2>"$log.err" || true
		keep "$set" "$log.out"
		got=$((got + $(grep -c "^$word " "$log.out" || true)))
		if grep -q '^HANG ' "$log.out"; then
			note "$label: $(grep '^HANG ' "$log.out") — run killed by its watchdog, $((want - got)) missing"
		elif ((got < want)); then
			tail -3 "$log.err" >&2
			note "$label: run ended early, $((want - got)) $word lines missing"
		fi
	done
	((got >= want)) || note "$label: gave up with $((want - got)) $word lines missing (set $set)"
}

run_peer() {
	local set=$1 label=$2 k
	for k in $KS; do
		ompi_until "$set" "$label" ROUND "$ROUNDS" "$k" MISSING "$WARMUP" 0
	done
	if ((RATE > 0)); then
		ompi_until "$set" "$label" RATE 1 - 0 0 "$RATE"
	fi
}

impls=(dynrt $PEERS)
note "$SETS sets x $ROUNDS rounds per k (+$WARMUP warm-up), k in {$KS}, rate run of $RATE; $(nproc) CPUs, kernel $(uname -r)"
note "$(mpirun.openmpi --version 2>/dev/null | head -1); load average before: $(load)"
echo "load average before: $(load)" >"$out/load.txt"
for ((set = 1; set <= SETS; set++)); do
	n=${#impls[@]}
	for ((i = 0; i < n; i++)); do
		impl=${impls[$(((i + set - 1) % n))]}
		note "set $set: $impl (load $(load))"
		if [[ $impl == dynrt ]]; then
			run_dynrt "$set"
		else
			run_peer "$set" "$impl"
		fi
	done
done
echo "load average after: $(load)" >>"$out/load.txt"
note "load average after: $(load); raw lines in $raw"

{
	echo "scripts/bench-spawn.sh: ROUNDS=$ROUNDS SETS=$SETS WARMUP=$WARMUP KS=\"$KS\" RATE=$RATE PEERS=\"$PEERS\""
	echo "$(date -u +%Y-%m-%dT%H:%MZ), commit $(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) CPUs, $(tr '\n' ';' <"$out/load.txt")"
	echo
	"$work/spawnbench" report "$raw"
} | tee "$out/summary.md"
