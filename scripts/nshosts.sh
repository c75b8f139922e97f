#!/usr/bin/env bash
# nshosts.sh — network-namespace test hosts by hand (internal/nshosts):
# each host has its own network namespace, address (198.18.0.0/15), hostname
# and sshd; the filesystem is shared. Needs root. docs/clusters.md, "Test hosts".
#
#   eval "$(scripts/nshosts.sh up -k 3)"         # h0 h1 h2; sets NSHOSTS_PREFIX,
#                                                # NSHOSTS_DIR, NSHOSTS_SSH_CONFIG, ...
#   scripts/nshosts.sh exec h0 hostname           # a command on h0 (as if typed there)
#   scripts/nshosts.sh ssh h2 hostname            # ssh from h0 to h2
#   scripts/nshosts.sh down                       # tear everything down
#   scripts/nshosts.sh list                       # clusters in /run/dynrt-nshosts
#   scripts/nshosts.sh reap dyn-nshosts-t         # clusters of killed test runs
#   scripts/nshosts.sh up --owner $$ ...          # reap removes it once this shell is gone
#
# Every command takes --prefix P (default dyn-hosts) to name the cluster.
# The Go command is built once into $NSHOSTS_BIN (default
# ${TMPDIR:-/tmp}/dynrt-nshosts-bin/nshosts) and rebuilt when its sources change
# (go build's cache makes that cheap).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${NSHOSTS_BIN:-${TMPDIR:-/tmp}/dynrt-nshosts-bin/nshosts}
mkdir -p "$(dirname "$bin")"
(cd "$root" && go build -o "$bin" ./internal/nshosts/cmd/nshosts)
exec "$bin" "$@"
