#!/usr/bin/env bash
# ompi-spawn-phases.sh — where the time of an Open MPI MPI_Comm_spawn goes,
# under dynrun and under mpirun.openmpi: the phases behind the spawn table
# of scripts/bench-mpi.sh.
#
# For every k in $KS (default "4 8"), $RUNS runs per launcher (default 10,
# alternating), each a 1-process spawn_bench job doing one spawn of k
# children and a barrier (testdata/spawn/spawn_bench.c). Every process runs
# with scripts/pmixtrace preloaded, which timestamps its PMIx calls; the
# script prints the median of each phase per launcher (ms):
#   call     the parent's PMIx_Spawn, call to return
#   started  PMIx_Spawn called → the last child calls PMIx_Init
#   init     the last child's PMIx_Init (its first)
#   mpiinit  the last child's PMIx_Init returned → it calls PMIx_Connect
#            (the rest of its MPI_Init: Open MPI's own set-up, the modex)
#   connect  the last child calls PMIx_Connect → the parent's returns
#   barrier  the parent's PMIx_Connect returned → the end of the round
#            (both sides add the other job's processes, then the barrier)
#   total    the round as spawn_bench times it (from just before
#            MPI_Comm_spawn, so a little more than the phases' sum)
# Hung runs (spawn_bench's watchdog, or 60 s) are counted, not timed.
#
# Needs mpicc.openmpi, mpirun.openmpi, libpmix-dev and a dynrun built with
# -tags pmix (make build); DYNRUN=path overrides bin/dynrun.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
KS=${KS:-"4 8"}
RUNS=${RUNS:-10}
DYNRUN=${DYNRUN:-$root/bin/dynrun}
for c in mpicc.openmpi mpirun.openmpi gcc pkg-config python3; do
	command -v "$c" >/dev/null || { echo "ompi-spawn-phases: needs $c" >&2; exit 2; }
done
[ -x "$DYNRUN" ] || { echo "ompi-spawn-phases: no dynrun at $DYNRUN (make build)" >&2; exit 2; }
asroot=()
[ "$(id -u)" = 0 ] && asroot=(--allow-run-as-root)
work=$(mktemp -d /tmp/ompi-spawn-phases.XXXXXX)
export DYNRT_DIR=$work/dvm
mkdir -m 700 "$DYNRT_DIR"
dvm=
cleanup() {
	[ -n "$dvm" ] && "$DYNRUN" dvm stop --dvm "$dvm" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
mpicc.openmpi -O2 -o "$work/spawn_bench" "$root/testdata/spawn/spawn_bench.c"
# shellcheck disable=SC2046
gcc -Wall -Wextra -Werror -O2 -shared -fPIC -o "$work/pmixtrace.so" "$root/scripts/pmixtrace/pmixtrace.c" \
	$(pkg-config --cflags pmix) -ldl
# As bench-mpi.sh: a warm DVM of one node with 28 slots.
dvm=$("$DYNRUN" dvm start --daemonize --nodes 1 --slots 28 --name spawn-phases 2>/dev/null)

# one LAUNCHER K LOG: one run; LOG gets the program's and the trace's lines.
one() {
	local who=$1 k=$2 log=$3 cmd
	case $who in
	dynrun) cmd=(env LD_PRELOAD="$work/pmixtrace.so" "$DYNRUN" --dvm "$dvm" -n 1) ;;
	mpirun) cmd=(env LD_PRELOAD="$work/pmixtrace.so" mpirun.openmpi --oversubscribe "${asroot[@]}" -x LD_PRELOAD -n 1) ;;
	esac
	timeout -k 5 60 "${cmd[@]}" "$work/spawn_bench" "$k" 1 0 0 "$who" >"$log" 2>&1 || echo "EXIT $?" >>"$log"
}

echo "# $RUNS runs per launcher and k, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), $(mpirun.openmpi --version | head -1)"
for k in $KS; do
	for r in $(seq "$RUNS"); do
		for who in $(if ((r % 2)); then echo dynrun mpirun; else echo mpirun dynrun; fi); do
			one "$who" "$k" "$work/log.$k.$who.$r"
		done
	done
done
python3 - "$work" $KS <<'PY'
import glob, re, statistics, sys
work, ks = sys.argv[1], sys.argv[2:]
phases = ["call", "started", "init", "mpiinit", "connect", "barrier", "total"]

def parse(path):
    ev, total, hung = {}, None, False
    for line in open(path, errors="replace"):
        m = re.match(r'PMIXT (\d+) (\d+) (\S+)', line)
        if m:
            ev.setdefault(int(m.group(1)), []).append((int(m.group(2)), m.group(3)))
        elif line.startswith("ROUND "):
            total = int(re.search(r'"ns":(\d+)', line).group(1))
        elif line.startswith("HANG ") or line.startswith("EXIT 124") or line.startswith("EXIT 137"):
            hung = True
    if hung or total is None:
        return None
    parent = next(p for p, es in ev.items() if any(e == "spawn>" for _, e in es))
    first = lambda p, name: next(t for t, e in ev[p] if e == name)
    kids = [p for p in ev if p != parent and any(e == "connect>" for _, e in ev[p])]
    sp, spr = first(parent, "spawn>"), first(parent, "spawn<")
    last_init = max(first(p, "init>") for p in kids)
    last_kid = max(kids, key=lambda p: first(p, "init>"))
    init_done = first(last_kid, "init<")
    conn_in = max(first(p, "connect>") for p in kids)
    conn_out = first(parent, "connect<")
    return dict(call=spr - sp, started=last_init - sp, init=init_done - last_init,
                mpiinit=first(last_kid, "connect>") - init_done, connect=conn_out - conn_in,
                barrier=sp + total - conn_out, total=total)

print("| k | launcher | runs | hung | " + " | ".join(phases) + " |")
print("|---:|---|---:|---:|" + "---:|" * len(phases))
for k in ks:
    for who in ("dynrun", "mpirun"):
        logs = sorted(glob.glob(f"{work}/log.{k}.{who}.*"))
        got = [parse(p) for p in logs]
        ok = [g for g in got if g]
        cells = [f"{statistics.median(g[p] for g in ok) / 1e6:.1f}" if ok else "-" for p in phases]
        print(f"| {k} | {who} | {len(logs)} | {len(logs) - len(ok)} | " + " | ".join(cells) + " |")
PY
