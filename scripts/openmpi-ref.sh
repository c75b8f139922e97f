#!/usr/bin/env bash
# openmpi-ref.sh — what Open MPI's own launcher does with dynrt's MPI and
# PMIx test programs: the reference that dynrun must match (docs/mpi.md
# "Open MPI (PMIx)"). It builds testdata/mpi/*.c with mpicc.openmpi and
# testdata/pmix/psets.c against libpmix, runs each case under
# mpirun.openmpi (--oversubscribe; as root --allow-run-as-root), two-job
# cases with a shared ompi-server for the name service, and writes
# testdata/openmpi/<case>.golden:
#
#   # mpirun.openmpi -n 2 ./connacc server NAME      (the command, one line per job)
#   exit 0                                          (its exit status)
#   <its stdout, lines sorted>
#
# A run that does not end within TIMEOUT seconds (default 60) is killed and
# tried again, up to 3 times (Open MPI 4.1.4 with PMIx 4.2 now and then
# hangs in MPI_Comm_spawn); the count of hung runs is printed.
#
# Usage: scripts/openmpi-ref.sh [CASE...]     (default: every case)
set -euo pipefail

TIMEOUT=${TIMEOUT:-60}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/lib/common.sh"
work_dir openmpi-ref
out=$root/testdata/openmpi
mkdir -p "$out"

command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null && pkg-config --exists pmix ||
	die "needs mpicc.openmpi, mpirun.openmpi and libpmix-dev (make deps-openmpi)"
ompi=(mpirun.openmpi --oversubscribe)
if [[ $(id -u) -eq 0 ]]; then
	ompi+=(--allow-run-as-root)
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # for ompi-server
fi

note "building the programs in $work"
for p in hello_mpi allreduce split abort spawn_tree pubsub connacc; do
	mpicc.openmpi -O1 -o "$work/$p" "$root/testdata/mpi/$p.c"
done
# shellcheck disable=SC2046 # pkg-config's flags are words
cc -std=c11 -O1 -o "$work/psets" "$root/testdata/pmix/psets.c" $(pkg-config --cflags --libs pmix)

server_pid=""
script_cleanup() {
	if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; fi
}
# ompi_server starts the name server that two mpiruns share.
ompi_server() {
	rm -f "$work/uri"
	ompi-server --no-daemonize -r "$work/uri" >"$work/ompi-server.log" 2>&1 &
	server_pid=$!
	for _ in $(seq 100); do [[ -s $work/uri ]] && return 0; sleep 0.05; done
	die "ompi-server wrote no URI: $(cat "$work/ompi-server.log")"
}

hung=0
# run1 CASE ARGS...: one job; run2 CASE "ARGS1" "ARGS2": two jobs at once
# (the first started first), sharing ompi-server. ARGS are mpirun's
# arguments after its fixed ones, words split on spaces.
run1() {
	local name=$1 try code
	shift
	for try in 1 2 3; do
		code=0
		(cd "$work" && timeout "$TIMEOUT" "${ompi[@]}" "$@" >"$work/$name.out" 2>"$work/$name.err") || code=$?
		[[ $code -ne 124 ]] && break
		hung=$((hung + 1))
		note "$name: hung (try $try)"
	done
	{
		echo "# mpirun.openmpi $*"
		echo "exit $code"
		sort "$work/$name.out"
	} >"$out/$name.golden"
	note "$name: exit $code"
}
run2() {
	local name=$1 a=$2 b=$3 try ca cb pa
	for try in 1 2 3; do
		ompi_server
		ca=0 cb=0
		# shellcheck disable=SC2086 # the arguments are words
		(cd "$work" && timeout "$TIMEOUT" "${ompi[@]}" --ompi-server "file:$work/uri" $a >"$work/$name.a.out" 2>"$work/$name.a.err") &
		pa=$!
		# shellcheck disable=SC2086
		(cd "$work" && timeout "$TIMEOUT" "${ompi[@]}" --ompi-server "file:$work/uri" $b >"$work/$name.b.out" 2>"$work/$name.b.err") || cb=$?
		wait "$pa" || ca=$?
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
		server_pid=""
		[[ $ca -ne 124 && $cb -ne 124 ]] && break
		hung=$((hung + 1))
		note "$name: hung (try $try)"
	done
	{
		echo "# mpirun.openmpi $a"
		echo "exit $ca"
		sort "$work/$name.a.out"
		echo "# mpirun.openmpi $b"
		echo "exit $cb"
		sort "$work/$name.b.out"
	} >"$out/$name.golden"
	note "$name: exit $ca, $cb"
}

want=" ${*:-all} "
case_on() { [[ $want == " all " || $want == *" $1 "* ]]; }
case_on hello-4 && run1 hello-4 -n 4 ./hello_mpi 4
case_on allreduce-4 && run1 allreduce-4 -n 4 ./allreduce
case_on split-4 && run1 split-4 -n 4 ./split
case_on abort-4 && run1 abort-4 -n 4 ./abort 7
for k in 1 2 3 4; do
	case_on spawn-$k && run1 spawn-$k -n 1 ./spawn_tree $k ok
done
case_on spawn-abort && run1 spawn-abort -n 1 ./spawn_tree 2 abort
case_on spawn-missing && run1 spawn-missing -n 1 ./spawn_tree 2 missing
case_on pubsub && run2 pubsub "-n 2 ./pubsub server svc dup-ok" "-n 2 ./pubsub client svc"
case_on connacc-2-2 && run2 connacc-2-2 "-n 2 ./connacc server svc" "-n 2 ./connacc client svc"
case_on connacc-1-3 && run2 connacc-1-3 "-n 1 ./connacc server svc" "-n 3 ./connacc client svc"
case_on psets && run1 psets -n 2 ./psets
note "hung runs: $hung"
