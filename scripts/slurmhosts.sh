#!/usr/bin/env bash
# slurmhosts.sh — a real Slurm on network-namespace test hosts, by hand
# (internal/slurmhosts): slurmctld on h0, a slurmd per host, its own munged;
# everything lives in the hosts' namespaces and the cluster's temporary
# directory. Needs root, slurm-wlm and munge (make deps-slurm).
# docs/clusters.md, "Slurm".
#
#   eval "$(scripts/slurmhosts.sh up -k 3)"          # sets SLURMHOSTS_PREFIX, SLURM_CONF
#   scripts/slurmhosts.sh exec h0 salloc -N 3 dynrun -n 12 hostname
#   scripts/slurmhosts.sh exec h0 sinfo
#   scripts/slurmhosts.sh down                        # tear everything down
#
# Every command takes --prefix P (default dyn-slurm). The Go command is
# built into $SLURMHOSTS_BIN (default ${TMPDIR:-/tmp}/dynrt-slurmhosts-bin/slurmhosts).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${SLURMHOSTS_BIN:-${TMPDIR:-/tmp}/dynrt-slurmhosts-bin/slurmhosts}
mkdir -p "$(dirname "$bin")"
(cd "$root" && go build -o "$bin" ./internal/slurmhosts/cmd/slurmhosts)
exec "$bin" "$@"
