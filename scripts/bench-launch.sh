#!/usr/bin/env bash
# bench-launch.sh — launch latency of N x /bin/true, dynrt against MPI launchers.
#
# Variants, for every N in $NS (default "8 28 112"):
#   dynrt-warm     dynrun --dvm ID -n N /bin/true   on a warm DVM of 4 virtual nodes x 28 slots
#   dynrt-private  dynrun -n N --slots N /bin/true  private DVM started and stopped by dynrun
#   dynrt-private-static  the same with dynrun built without PMIx (only when
#                  dynrun is built with it: libpmix-dev installed)
#   dynrt-warm-pmix  dynrun --dvm ID --pmi pmix -n N /bin/true: the job
#                  registered with the daemons' PMIx server (the same condition)
#   floor          forkfloor N /bin/true            bare fork/exec/wait of N x /bin/true from one
#                                                   thread per CPU: what no launcher can beat here
#   hydra          mpiexec.hydra -n N /bin/true     (Debian package mpich)
#   openmpi        mpirun.openmpi --oversubscribe -n N /bin/true  (Debian package openmpi-bin),
#                  N <= $OMPI_MAX_N only (default 28)
#
# With BASE=<git revision>, dynrun is also built at that revision (from
# `git archive`, the work tree is not touched) and a variant
# dynrt-private-base runs it like dynrt-private: a same-run before/after.
#
# Runs alternate: each of $ROUNDS rounds (default 20) runs every variant once,
# in a fresh random order, after $WARMUP (default 2) uncounted runs of each.
# Times are wall-clock from fork to exit, measured with ns resolution by a
# Go timer in scripts/benchtimer. It reports medians, the ratio to Hydra and
# the idle RSS of the warm DVM's daemons. Peers that are missing and cannot be
# installed with apt-get, or that fail to run, are skipped with a note.
#
# Usage: scripts/bench-launch.sh            (from anywhere in the repository)
#        ROUNDS=5 NS="8 28" scripts/bench-launch.sh
#        BASE=45f2e11 NS="1 8" scripts/bench-launch.sh   (before/after)
set -euo pipefail

ROUNDS=${ROUNDS:-20}
WARMUP=${WARMUP:-2}
NS=${NS:-"8 28 112"}
# mpirun.openmpi hangs at N >= 56 on this machine: a hung run costs the
# 60 s time limit and disturbs the runs around it, so larger N are left
# out unless asked for (OMPI_MAX_N=112).
OMPI_MAX_N=${OMPI_MAX_N:-28}
NODES=4
SLOTS=28

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/lib/common.sh"
work_dir bench-launch
dvm=""
master_pid=""


# build_base builds dynrun at $BASE (if set) as $work/dynrun-base.
build_base() {
	[[ -n ${BASE:-} ]] || return 0
	mkdir "$work/base"
	git -C "$root" archive "$BASE" | tar -x -C "$work/base"
	(cd "$work/base" && go build -tags urfave_cli_no_docs,netgo -o "$work/dynrun-base" ./cmd/dynrun)
	note "base: dynrun at $(git -C "$root" rev-parse --short "$BASE")"
}

# --- build -----------------------------------------------------------------
note "building dynrun and the timer in $work"
# The build tags of `make build` (no doc generator; PMIx when libpmix-dev is
# installed): every run starts a dynrun process, so its start-up is part of
# what is measured. With PMIx, dynrun is linked against libpmix (cgo); the
# variant dynrt-private-static runs the pure-Go static build beside it.
tags=urfave_cli_no_docs,netgo
static=0
if pkg-config --exists pmix 2>/dev/null; then
	tags+=,pmix
	static=1
	(cd "$root" && go build -tags urfave_cli_no_docs,netgo -o "$work/dynrun-static" ./cmd/dynrun)
fi
(cd "$root" && go build -tags "$tags" -o "$work/dynrun" ./cmd/dynrun)

(cd "$root" && go build -o "$work/benchtimer" ./scripts/benchtimer)
build_base

# The floor: the least any launcher on this machine can do. A static Go
# program forks N x prog from one locked thread per CPU (vfork + exec, as
# lib/proc does, without pipes, process groups or any protocol) and reaps
# them (scripts/forkfloor). Its time includes its own process start, as
# dynrun's does.
(cd "$root" && CGO_ENABLED=0 go build -o "$work/forkfloor" ./scripts/forkfloor)

# --- peers -----------------------------------------------------------------
need_pkgs=()
command -v mpiexec.hydra >/dev/null || need_pkgs+=(mpich)
command -v mpirun.openmpi >/dev/null || need_pkgs+=(openmpi-bin)
if ((${#need_pkgs[@]})); then
	sudo=""
	[[ $(id -u) -eq 0 ]] || sudo="sudo -n"
	note "installing ${need_pkgs[*]} with apt-get"
	if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need_pkgs[@]}"; } >"$work/apt.log" 2>&1; then
		note "apt-get failed (see below); peers that are missing will be skipped"
		tail -5 "$work/apt.log" >&2 || true
	fi
fi

ompi=(mpirun.openmpi --oversubscribe)
if [[ $(id -u) -eq 0 ]]; then
	ompi+=(--allow-run-as-root)
fi
have_hydra=0
have_ompi=0
if command -v mpiexec.hydra >/dev/null && mpiexec.hydra -n 2 /bin/true >/dev/null 2>&1; then
	have_hydra=1
else
	note "skipping hydra: mpiexec.hydra is missing or cannot run"
fi
if command -v mpirun.openmpi >/dev/null && "${ompi[@]}" -n 2 /bin/true >/dev/null 2>&1; then
	have_ompi=1
else
	note "skipping openmpi: mpirun.openmpi is missing or cannot run"
fi

# --- warm DVM --------------------------------------------------------------
export DYNRT_DIR=$work/dvm
mkdir -m 700 "$DYNRT_DIR"
dvm=$("$work/dynrun" dvm start --daemonize --nodes "$NODES" --slots "$SLOTS" --name bench)
master_pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$DYNRT_DIR/$dvm.json" 2>/dev/null ||
	sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$DYNRT_DIR/$dvm.json")
note "warm DVM $dvm: $NODES nodes x $SLOTS slots, master pid $master_pid"

# --- runs ------------------------------------------------------------------
spec=$work/spec
: >"$spec"
tab=$'\t'
for n in $NS; do
	echo "dynrt-warm${tab}$n${tab}$work/dynrun${tab}--dvm${tab}$dvm${tab}-n${tab}$n${tab}/bin/true" >>"$spec"
	if ((static)); then
		# What offering PMIx to every job would cost (--pmi auto does not).
		echo "dynrt-warm-pmix${tab}$n${tab}$work/dynrun${tab}--dvm${tab}$dvm${tab}--pmi${tab}pmix${tab}-n${tab}$n${tab}/bin/true" >>"$spec"
	fi
	# A private DVM must not see the warm one: --slots forces it anyway, the
	# separate directory keeps its rendezvous file apart.
	echo "dynrt-private${tab}$n${tab}DYNRT_DIR=$work/priv${tab}$work/dynrun${tab}-n${tab}$n${tab}--slots${tab}$n${tab}/bin/true" >>"$spec"
	if [[ -n ${BASE:-} ]]; then
		echo "dynrt-private-base${tab}$n${tab}DYNRT_DIR=$work/priv${tab}$work/dynrun-base${tab}-n${tab}$n${tab}--slots${tab}$n${tab}/bin/true" >>"$spec"
	fi
	if ((static)); then
		echo "dynrt-private-static${tab}$n${tab}DYNRT_DIR=$work/priv${tab}$work/dynrun-static${tab}-n${tab}$n${tab}--slots${tab}$n${tab}/bin/true" >>"$spec"
	fi
	echo "floor${tab}$n${tab}$work/forkfloor${tab}$n${tab}/bin/true" >>"$spec"
	if ((have_hydra)); then
		echo "hydra${tab}$n${tab}$(command -v mpiexec.hydra)${tab}-n${tab}$n${tab}/bin/true" >>"$spec"
	fi
	if ((have_ompi && n <= OMPI_MAX_N)); then
		line="openmpi${tab}$n${tab}$(command -v mpirun.openmpi)"
		for a in "${ompi[@]:1}"; do line+="${tab}$a"; done
		echo "$line${tab}-n${tab}$n${tab}/bin/true" >>"$spec"
	fi
done
mkdir -m 700 "$work/priv"

note "$ROUNDS rounds (+$WARMUP warm-up runs per variant), $(nproc) CPUs, kernel $(uname -r), load average $(cut -d" " -f1-3 /proc/loadavg)"
"$work/benchtimer" -rounds "$ROUNDS" -warmup "$WARMUP" <"$spec"
note "load average after the runs $(cut -d" " -f1-3 /proc/loadavg)"

# --- idle RSS of the warm DVM ----------------------------------------------
rss() { awk '/^VmRSS:/ {printf "%.1f", $2/1024}' "/proc/$1/status" 2>/dev/null || echo "?"; }
echo
echo "| process | pid | idle RSS MiB |"
echo "|---|---:|---:|"
echo "| master + node0 daemon (dynrun dvm start) | $master_pid | $(rss "$master_pid") |"
"$work/dynrun" dvm status --dvm "$dvm" --json >"$work/status.json"
python3 - "$work/status.json" "$master_pid" <<'EOF' | while read -r name pid; do echo "| daemon $name (dynrun daemon) | $pid | $(rss "$pid") |"; done
import json, sys
st = json.load(open(sys.argv[1]))
for n in st["nodes"]:
    if n.get("pid") and str(n["pid"]) != sys.argv[2]:
        print(n["name"], n["pid"])
EOF

# Leftovers check: the private runs must not leave rendezvous files behind.
left=$(find "$work/priv" -mindepth 1 | wc -l)
if ((left)); then
	note "WARNING: private DVM runs left $left files in $work/priv"
fi
