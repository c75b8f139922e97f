#!/usr/bin/env bash
# ompi-floor.sh — how much of an Open MPI hello's start-up time is the
# launcher's, and how much the program's own: the floor under
# scripts/bench-mpi.sh's Open MPI table.
#
# For every N in $NS (default "8 28"), $ROUNDS rounds (default 10), each
# running in a fresh random order:
#   dynrun -n N --slots N        ./hello_ompi    (private DVM, as bench-mpi.sh)
#   mpirun.openmpi --oversubscribe -n N ./hello_ompi
# each twice: once plain (the job's wall time, fork to exit), once with
# every rank wrapped in /usr/bin/time, which reports each process's own
# lifetime (exec to exit) and CPU. A launcher cannot end a job before its
# last process ends, so the longest lifetime is a floor for the job's time
# under that launcher; what is above it is the launcher's own cost (start,
# wire-up service, tear-down). The CPU of all ranks over the cores is a
# second floor. Prints medians per N and launcher.
#
# Needs mpicc.openmpi, mpirun.openmpi and a dynrun built with -tags pmix
# (make build); DYNRUN=path overrides bin/dynrun.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
NS=${NS:-"8 28"}
ROUNDS=${ROUNDS:-10}
DYNRUN=${DYNRUN:-$root/bin/dynrun}
for c in mpicc.openmpi mpirun.openmpi /usr/bin/time python3; do
	command -v "$c" >/dev/null || { echo "ompi-floor: needs $c" >&2; exit 2; }
done
[ -x "$DYNRUN" ] || { echo "ompi-floor: no dynrun at $DYNRUN (make build)" >&2; exit 2; }
asroot=()
[ "$(id -u)" = 0 ] && asroot=(--allow-run-as-root) # as bench-mpi.sh
work=$(mktemp -d /tmp/ompi-floor.XXXXXX)
trap 'rm -rf "$work"' EXIT
mpicc.openmpi -O2 -o "$work/hello_ompi" "$root/testdata/mpi/hello_mpi.c"

# one LAUNCHER N WRAP: prints "wall_ms max_life_ms cpu_ms" (the last two 0
# without the wrapper).
one() {
	local who=$1 n=$2 wrap=$3 cmd t0 t1
	case $who in
	dynrun) cmd=("$DYNRUN" -n "$n" --slots "$n") ;;
	mpirun) cmd=(mpirun.openmpi --oversubscribe "${asroot[@]}" -n "$n") ;;
	esac
	[ "$wrap" = 1 ] && cmd+=(/usr/bin/time -f "LIFE %e %U %S")
	t0=$(date +%s%N)
	timeout 60 "${cmd[@]}" "$work/hello_ompi" >"$work/out" 2>&1
	t1=$(date +%s%N)
	[ "$(grep -c '^hello rank=' "$work/out")" = "$n" ] || { echo "ompi-floor: $who -n $n: $(tail -3 "$work/out")" >&2; exit 1; }
	awk -v w=$(((t1 - t0) / 1000000)) '/^LIFE /{if ($2 > m) m = $2; c += $3 + $4} END {printf "%d %d %d\n", w, m * 1000, c * 1000}' "$work/out"
}

echo "# $ROUNDS rounds, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), $(mpirun.openmpi --version | head -1)"
for n in $NS; do
	: >"$work/n$n"
	for _ in $(seq "$ROUNDS"); do
		for v in $(printf '%s\n' dynrun:0 dynrun:1 mpirun:0 mpirun:1 | shuf); do
			echo "${v%:*} ${v#*:} $(one "${v%:*}" "$n" "${v#*:}")" >>"$work/n$n"
		done
	done
done
python3 - "$work" $NS <<'EOF'
import statistics, sys, os
work, ns = sys.argv[1], sys.argv[2:]
cores = os.cpu_count()
print("| N | launcher | job ms | longest process lifetime ms | CPU of the ranks / %d cores ms | job - longest lifetime ms |" % cores)
print("|---:|---|---:|---:|---:|---:|")
for n in ns:
    rows = [l.split() for l in open(f"{work}/n{n}")]
    res = {}
    for who in ("dynrun", "mpirun"):
        wall = statistics.median(int(r[2]) for r in rows if r[0] == who and r[1] == "0")
        life = statistics.median(int(r[3]) for r in rows if r[0] == who and r[1] == "1")
        cpu = statistics.median(int(r[4]) for r in rows if r[0] == who and r[1] == "1") / cores
        res[who] = (wall, life)
        print(f"| {n} | {who} | {wall:.0f} | {life:.0f} | {cpu:.0f} | {wall - life:.0f} |")
    (dw, dl), (mw, ml) = res["dynrun"], res["mpirun"]
    print(f"| {n} | dynrun / mpirun | {dw / mw:.2f} | | | {(dw - dl) / (mw - ml):.2f} |")
EOF
