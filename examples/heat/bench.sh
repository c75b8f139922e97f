#!/usr/bin/env bash
# Measures examples/heat's resize costs and thesis §8.4 amortisation on this
# machine: a private DVM of 2 virtual nodes, a 1-process job that grows to
# 2 processes and later shrinks back, RUNS times, printing each run's
# summary and the load. Rerun (from the repository root):
#
#   flock /tmp/dynrt-bench.lock examples/heat/bench.sh
#
# Knobs (environment): NX, NY, STEPS, SCHEDULE, NSTART, RUNS, NODES, SLOTS, and
# EXTRA: more heat flags, e.g. EXTRA="--buddy" for the cost of the checkpoints
# (SCHEDULE= for none).
set -euo pipefail
cd "$(dirname "$0")/../.."
NX=${NX:-768} NY=${NY:-768} STEPS=${STEPS:-600} SCHEDULE=${SCHEDULE-150:+1,450:-1}
NSTART=${NSTART:-1} RUNS=${RUNS:-3} NODES=${NODES:-2} SLOTS=${SLOTS:-2} EXTRA=${EXTRA:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -tags urfave_cli_no_docs,netgo -o "$tmp/" ./cmd/dynrun ./examples/heat
echo "# heat ${NX}x${NY}, ${STEPS} steps, ${NSTART} processes, schedule ${SCHEDULE:-none}, flags ${EXTRA:-none}, private DVM ${NODES}x${SLOTS}"
echo "# $(uname -n) $(nproc) CPUs, go $(go env GOVERSION), commit $(git rev-parse --short HEAD 2>/dev/null || echo ?)"
for i in $(seq "$RUNS"); do
	echo "## run $i, load: $(cut -d' ' -f1-3 /proc/loadavg)"
	DYNRT_DIR="$tmp/dvm" "$tmp/dynrun" --nodes "$NODES" --slots "$SLOTS" -n "$NSTART" \
		"$tmp/heat" --nx "$NX" --ny "$NY" --steps "$STEPS" --check 10 --schedule "$SCHEDULE" $EXTRA
done
