#!/usr/bin/env bash
# bench-mpi.sh — start-up and run time of an MPI hello world: dynrun against
# MPICH's own launcher (Hydra), the same binary, the same host.
#
# Variants, for every N in $NS (default "1 8 28"):
#   dynrt-private  dynrun -n N --slots N ./hello_mpi   private DVM started and stopped by dynrun
#   dynrt-warm     dynrun --dvm ID -n N ./hello_mpi    on a warm DVM of one node with 28 slots
#   hydra          mpiexec.hydra -n N ./hello_mpi
# hello_mpi is testdata/mpi/hello_mpi.c built with Debian's mpicc.mpich
# (MPICH 4.0.2, ch4:ucx, PMI-1 over PMI_FD under both launchers).
#
# With BASE=<git revision>, dynrun is also built at that revision (from
# `git archive`, the work tree is not touched) and a variant
# dynrt-private-base runs it like dynrt-private: a same-run before/after.
#
# Runs alternate: each of $ROUNDS rounds (default 10) runs every variant once
# in a fresh random order, after $WARMUP (default 1) uncounted runs of each.
# Times are wall-clock from fork to exit. The script prints medians, p10/p90
# and the ratio to Hydra. MPICH is installed with apt-get when missing.
#
# Usage: scripts/bench-mpi.sh                 (from anywhere in the repository)
#        ROUNDS=5 NS="8" scripts/bench-mpi.sh
#        BASE=45f2e11 NS=1 ROUNDS=40 scripts/bench-mpi.sh   (before/after)
set -euo pipefail

ROUNDS=${ROUNDS:-10}
WARMUP=${WARMUP:-1}
NS=${NS:-"1 8 28"}
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
	(cd "$work/base" && go build -tags urfave_cli_no_docs,netgo -o "$work/dynrun-base" ./cmd/dynrun)
	note "base: dynrun at $(git -C "$root" rev-parse --short "$BASE")"
}

# --- MPICH -----------------------------------------------------------------
if ! command -v mpicc.mpich >/dev/null || ! command -v mpiexec.hydra >/dev/null; then
	sudo=""
	[[ $(id -u) -eq 0 ]] || sudo="sudo -n"
	note "installing mpich and libmpich-dev with apt-get"
	{ $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq mpich libmpich-dev; } >"$work/apt.log" 2>&1 ||
		{ tail -5 "$work/apt.log" >&2; note "cannot install MPICH"; exit 1; }
fi

# --- build -----------------------------------------------------------------
note "building dynrun, hello_mpi and the timer in $work"
(cd "$root" && go build -tags urfave_cli_no_docs,netgo -o "$work/dynrun" ./cmd/dynrun)
mpicc.mpich -O2 -o "$work/hello_mpi" "$root/testdata/mpi/hello_mpi.c"

(cd "$root" && go build -o "$work/benchtimer" ./scripts/benchtimer)
build_base

# --- warm DVM --------------------------------------------------------------
export DYNRT_DIR=$work/dvm
mkdir -m 700 "$DYNRT_DIR" "$work/priv"
dvm=$("$work/dynrun" dvm start --daemonize --nodes 1 --slots "$SLOTS" --name bench-mpi)
note "warm DVM $dvm: 1 node x $SLOTS slots"

# --- runs ------------------------------------------------------------------
spec=$work/spec
: >"$spec"
tab=$'\t'
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

note "$ROUNDS rounds (+$WARMUP warm-up runs per variant), $(nproc) CPUs, kernel $(uname -r), load average $(cut -d" " -f1-3 /proc/loadavg)"
"$work/benchtimer" -seed 3 -expect "hello rank=" -rounds "$ROUNDS" -warmup "$WARMUP" <"$spec"
