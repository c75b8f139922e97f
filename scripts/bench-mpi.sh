#!/usr/bin/env bash
# bench-mpi.sh — start-up and run time of an MPI hello world: dynrun against
# the MPI's own launcher, the same binary, the same host; and, for Open MPI,
# MPI_Comm_spawn under both.
#
# MPICH (FAMILIES has mpich), for every N in $NS (default "1 8 28"):
#   dynrt-private  dynrun -n N --slots N ./hello_mpi   private DVM started and stopped by dynrun
#   dynrt-warm     dynrun --dvm ID -n N ./hello_mpi    on a warm DVM of one node with 28 slots
#   hydra          mpiexec.hydra -n N ./hello_mpi
# hello_mpi is testdata/mpi/hello_mpi.c built with Debian's mpicc.mpich
# (MPICH 4.0.2, ch4:ucx, PMI-1 over PMI_FD under both launchers).
#
# Open MPI (FAMILIES has openmpi), the same N, in a table of its own:
#   ompi-dynrt-private  dynrun -n N --slots N ./hello_ompi   (--pmi auto: PMIx)
#   ompi-dynrt-warm     dynrun --dvm ID -n N ./hello_ompi
#   openmpi             mpirun.openmpi --oversubscribe -n N ./hello_ompi
# hello_ompi is the same source built with mpicc.openmpi (Open MPI 4.1.4,
# PMIx 4.2.2). dynrun is built as `make build` builds it: with -tags pmix
# when libpmix-dev is installed. The dynrt variants run only if a probe
# (dynrun -n 2 of hello_ompi) prints two ranks of a world of two; else the
# script says why and times mpirun.openmpi alone.
#
# Open MPI spawn (FAMILIES has spawn), for every k in $KS (default "1 4 8"):
# testdata/spawn/spawn_bench.c (mpicc.openmpi) as a 1-process job does
# SPAWN_WARMUP (1) uncounted and SPAWN_ROUNDS (3) counted rounds of
# MPI_Comm_spawn(k) + a barrier over the intercommunicator, timed inside the
# program; SPAWN_RUNS (10) such runs per launcher and k, alternating
# launchers. A run that prints HANG (spawn_bench's 10 s watchdog) or does
# not end within 60 s counts as hung. dynrun runs only if a probe spawn of
# 1 works. The table: runs, hung runs, median/p10/p90 of the counted
# rounds, and dynrun's median over mpirun.openmpi's.
#
# With BASE=<git revision>, dynrun is also built at that revision (from
# `git archive`, the work tree is not touched) and a variant
# dynrt-private-base runs it like dynrt-private (and ompi-dynrt-private-base
# like ompi-dynrt-private): a same-run before/after.
#
# Runs alternate: each of $ROUNDS rounds (default 10) runs every variant once
# in a fresh random order, after $WARMUP (default 1) uncounted runs of each.
# Times are wall-clock from fork to exit. The script prints medians, p10/p90
# and the ratio to Hydra. MPICH is installed with apt-get when missing.
#
# Usage: scripts/bench-mpi.sh                 (from anywhere in the repository)
#        ROUNDS=5 NS="8" scripts/bench-mpi.sh
#        BASE=45f2e11 NS=1 ROUNDS=40 scripts/bench-mpi.sh   (before/after)
#        FAMILIES="openmpi spawn" KS="8" SPAWN_RUNS=20 scripts/bench-mpi.sh
set -euo pipefail

ROUNDS=${ROUNDS:-10}
WARMUP=${WARMUP:-1}
NS=${NS:-"1 8 28"}
FAMILIES=${FAMILIES:-"mpich openmpi spawn"}
KS=${KS:-"1 4 8"}
SPAWN_RUNS=${SPAWN_RUNS:-10}
SPAWN_ROUNDS=${SPAWN_ROUNDS:-3}
SPAWN_WARMUP=${SPAWN_WARMUP:-1}
SLOTS=28

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/lib/common.sh"
work_dir bench-mpi
dvm=""


# build_base builds dynrun at $BASE (if set) as $work/dynrun-base.
build_base() {
	[[ -n ${BASE:-} ]] || return 0
	mkdir "$work/base"
	git -C "$root" archive "$BASE" | tar -x -C "$work/base"
	(cd "$work/base" && go build -tags "$tags" -o "$work/dynrun-base" ./cmd/dynrun) # the same build as dynrun's
	note "base: dynrun at $(git -C "$root" rev-parse --short "$BASE")"
}

has() { [[ " $FAMILIES " == *" $1 "* ]]; }

# install_pkgs CMD PKG...: apt-get install PKG... unless CMD is there.
install_pkgs() {
	local cmd=$1
	shift
	command -v "$cmd" >/dev/null && return 0
	local sudo=""
	[[ $(id -u) -eq 0 ]] || sudo="sudo -n"
	note "installing $* with apt-get"
	{ $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@"; } >"$work/apt.log" 2>&1 ||
		{ tail -5 "$work/apt.log" >&2; note "cannot install $*"; exit 1; }
}

# --- MPICH, Open MPI -------------------------------------------------------
if has mpich; then
	install_pkgs mpicc.mpich mpich libmpich-dev
	command -v mpiexec.hydra >/dev/null || install_pkgs mpiexec.hydra mpich
fi
if has openmpi || has spawn; then
	install_pkgs mpicc.openmpi openmpi-bin libopenmpi-dev libpmix-dev pkg-config
fi
ompi=(mpirun.openmpi --oversubscribe)
if [[ $(id -u) -eq 0 ]]; then
	ompi+=(--allow-run-as-root)
fi

# --- build -----------------------------------------------------------------
# The tags of `make build`: PMIx when libpmix-dev is there.
tags=urfave_cli_no_docs,netgo
if pkg-config --exists pmix 2>/dev/null; then tags+=,pmix; fi
note "building dynrun ($tags), the programs and the timer in $work"
(cd "$root" && go build -tags "$tags" -o "$work/dynrun" ./cmd/dynrun)
if has mpich; then mpicc.mpich -O2 -o "$work/hello_mpi" "$root/testdata/mpi/hello_mpi.c"; fi
if has openmpi; then mpicc.openmpi -O2 -o "$work/hello_ompi" "$root/testdata/mpi/hello_mpi.c"; fi
if has spawn; then mpicc.openmpi -O2 -o "$work/spawn_bench" "$root/testdata/spawn/spawn_bench.c"; fi

(cd "$root" && go build -o "$work/benchtimer" ./scripts/benchtimer)
build_base

# --- warm DVM --------------------------------------------------------------
export DYNRT_DIR=$work/dvm
mkdir -m 700 "$DYNRT_DIR" "$work/priv"
dvm=$("$work/dynrun" dvm start --daemonize --nodes 1 --slots "$SLOTS" --name bench-mpi)
note "warm DVM $dvm: 1 node x $SLOTS slots"

tab=$'\t'
load() { cut -d" " -f1-3 /proc/loadavg; }

# --- MPICH hello -------------------------------------------------------------
if has mpich; then
	spec=$work/spec
	: >"$spec"
	for n in $NS; do
		# The private DVM must not see the warm one: --slots forces a private
		# DVM, the separate directory keeps its rendezvous file apart.
		echo "dynrt-private${tab}$n${tab}DYNRT_DIR=$work/priv${tab}$work/dynrun${tab}-n${tab}$n${tab}--slots${tab}$n${tab}$work/hello_mpi" >>"$spec"
		if [[ -n ${BASE:-} ]]; then
			echo "dynrt-private-base${tab}$n${tab}DYNRT_DIR=$work/priv${tab}$work/dynrun-base${tab}-n${tab}$n${tab}--slots${tab}$n${tab}$work/hello_mpi" >>"$spec"
		fi
		echo "dynrt-warm${tab}$n${tab}$work/dynrun${tab}--dvm${tab}$dvm${tab}-n${tab}$n${tab}$work/hello_mpi" >>"$spec"
		echo "hydra${tab}$n${tab}$(command -v mpiexec.hydra)${tab}-n${tab}$n${tab}$work/hello_mpi" >>"$spec"
	done
	echo
	echo "MPICH hello_mpi (mpicc.mpich):"
	note "$ROUNDS rounds (+$WARMUP warm-up runs per variant), $(nproc) CPUs, kernel $(uname -r), load average $(load)"
	"$work/benchtimer" -seed 3 -expect "hello rank=" -rounds "$ROUNDS" -warmup "$WARMUP" <"$spec"
fi

# --- Open MPI hello ----------------------------------------------------------
# probe_ompi says whether dynrun serves Open MPI (two ranks of a world of two).
probe_ompi() {
	local out
	out=$(timeout 60 "$work/dynrun" --dvm "$dvm" -n 2 "$work/hello_ompi" 2>&1) || true
	if [[ $(grep -c "size=2 " <<<"$out") -eq 2 ]]; then
		return 0
	fi
	note "dynrun does not run Open MPI programs here (timing mpirun.openmpi alone): $(head -c 400 <<<"$out")"
	return 1
}
if has openmpi; then
	dyn_ompi=0
	if probe_ompi; then dyn_ompi=1; fi
	spec=$work/spec-ompi
	: >"$spec"
	for n in $NS; do
		if ((dyn_ompi)); then
			echo "ompi-dynrt-private${tab}$n${tab}DYNRT_DIR=$work/priv${tab}$work/dynrun${tab}-n${tab}$n${tab}--slots${tab}$n${tab}$work/hello_ompi" >>"$spec"
			if [[ -n ${BASE:-} ]]; then
				echo "ompi-dynrt-private-base${tab}$n${tab}DYNRT_DIR=$work/priv${tab}$work/dynrun-base${tab}-n${tab}$n${tab}--slots${tab}$n${tab}$work/hello_ompi" >>"$spec"
			fi
			echo "ompi-dynrt-warm${tab}$n${tab}$work/dynrun${tab}--dvm${tab}$dvm${tab}-n${tab}$n${tab}$work/hello_ompi" >>"$spec"
		fi
		line="openmpi${tab}$n${tab}$(command -v mpirun.openmpi)"
		for a in "${ompi[@]:1}"; do line+="${tab}$a"; done
		echo "$line${tab}-n${tab}$n${tab}$work/hello_ompi" >>"$spec"
	done
	echo
	echo "Open MPI hello_mpi (mpicc.openmpi):"
	note "$ROUNDS rounds (+$WARMUP warm-up runs per variant), $(nproc) CPUs, load average $(load)"
	"$work/benchtimer" -seed 3 -expect "hello rank=" -peers openmpi -rounds "$ROUNDS" -warmup "$WARMUP" <"$spec"
fi

# --- Open MPI spawn ----------------------------------------------------------
# spawn_run LAUNCHER K LOG: one spawn_bench run; prints its ROUND ns values
# and returns 3 when the run hung (HANG line or killed by the time limit).
spawn_run() {
	local who=$1 k=$2 log=$3 code=0
	local cmd=("${ompi[@]}" -n 1)
	if [[ $who == dynrt ]]; then cmd=("$work/dynrun" --dvm "$dvm" -n 1); fi
	timeout -k 5 60 "${cmd[@]}" "$work/spawn_bench" "$k" "$SPAWN_ROUNDS" "$SPAWN_WARMUP" 0 "$who" >"$log.out" 2>"$log.err" || code=$?
	sed -n -E 's/^ROUND .*"ns":([0-9]+).*/\1/p' "$log.out"
	if ((code == 124 || code == 137)) || grep -q '^HANG ' "$log.out"; then
		return 3
	fi
	if ((code != 0)); then
		note "$who k=$k: exit $code: $(tail -2 "$log.err" | tr '\n' ' ')"
	fi
	return 0
}
# stats FILE: runs hung median p10 p90 (ms) of the ns values in FILE.ns.
stats() {
	sort -n "$1.ns" | awk -v runs="$(cat "$1.runs")" -v hung="$(cat "$1.hung")" '
		function at(q, i) { i = int(NR * q + 0.5); return v[i < 1 ? 1 : i > NR ? NR : i] }
		{ v[NR] = $1 / 1e6 }
		END {
			if (NR == 0) { printf "%d\t%d\t-\t-\t-\n", runs, hung; exit }
			printf "%d\t%d\t%.1f\t%.1f\t%.1f\n", runs, hung, at(0.5), at(0.1), at(0.9)
		}'
}
if has spawn; then
	who_all=(openmpi)
	if timeout 60 "$work/dynrun" --dvm "$dvm" -n 1 "$work/spawn_bench" 1 1 0 0 probe 2>"$work/probe.err" | grep -q '^ROUND '; then
		who_all=(dynrt openmpi)
	else
		note "dynrun cannot run spawn_bench here (timing mpirun.openmpi alone): $(tail -3 "$work/probe.err" | tr '\n' ' ')"
	fi
	note "spawn: k in $KS, $SPAWN_RUNS runs per launcher ($SPAWN_WARMUP + $SPAWN_ROUNDS rounds each), load average $(load)"
	for k in $KS; do
		for who in "${who_all[@]}"; do
			: >"$work/sp.$who.$k.ns"
			echo 0 >"$work/sp.$who.$k.runs"
			echo 0 >"$work/sp.$who.$k.hung"
		done
		for ((r = 0; r < SPAWN_RUNS; r++)); do
			# Alternate: the launchers' order flips every run.
			order=("${who_all[@]}")
			if ((r % 2)); then order=($(printf '%s\n' "${who_all[@]}" | tac)); fi
			for who in "${order[@]}"; do
				f=$work/sp.$who.$k
				echo $(($(cat "$f.runs") + 1)) >"$f.runs"
				if ! spawn_run "$who" "$k" "$f.$r" >>"$f.ns"; then
					echo $(($(cat "$f.hung") + 1)) >"$f.hung"
					note "$who k=$k run $r: hung"
				fi
			done
		done
	done
	echo
	echo "Open MPI MPI_Comm_spawn(k) + barrier (spawn_bench, mpicc.openmpi), ms per spawn:"
	echo "| k | launcher | runs | hung runs | median ms | p10 ms | p90 ms | ratio to mpirun.openmpi |"
	echo "|---:|---|---:|---:|---:|---:|---:|---:|"
	for k in $KS; do
		ref=$(stats "$work/sp.openmpi.$k" | cut -f3)
		for who in "${who_all[@]}"; do
			IFS=$'\t' read -r runs hung med p10 p90 < <(stats "$work/sp.$who.$k")
			ratio=-
			if [[ $med != - && $ref != - ]]; then ratio=$(awk -v a="$med" -v b="$ref" 'BEGIN { printf "%.2f", a / b }'); fi
			name=mpirun.openmpi
			[[ $who == dynrt ]] && name="dynrun --dvm"
			echo "| $k | $name | $runs | $hung | $med | $p10 | $p90 | $ratio |"
		done
	done
fi
note "load average after the runs $(load)"
