#!/usr/bin/env bash
# mpich-suite.sh — MPICH's own test suite (test/mpi of MPICH 4.0.2) under
# mpiexec.hydra and under dynrun, for every MPICH build (docs/mpi.md,
# "Running MPICH's test suite").
#
# 1. Sources: Debian's source package (`apt-get source mpich`, after adding a
#    deb-src entry for the suites of /etc/apt/sources.list.d/debian.sources
#    when there is none) into $CACHE/src.
# 2. MPICH for the ch3 device with PMI-1 and with PMI-2 into $CACHE/ch3-pmi1
#    and $CACHE/ch3-pmi2, unless present (bin/mpiexec.hydra and the stamp
#    file dynrt-build.stamp that this script writes after `make install`).
# 3. dynrun and the runner (internal/mpichsuite/cmd/mpichsuite) are built
#    from this checkout; the runner configures and builds the test programs
#    into $CACHE/tests-<build> (reused), runs every test of the chosen
#    directories under the three runners, prints the table and the summary,
#    and writes bench-out/mpich-suite/results.tsv.
#
# Exits non-zero iff a test passes under its reference (Hydra; Hydra over the
# same hosts for dynrun-hosts) but not under dynrun (listed).
# `scripts/mpich-suite.sh fetch` only does step 1 (make test uses it).
#
# Environment:
#   DYNRT_MPICH_CACHE  cache directory (default ~/.cache/dynrt)
#   BUILDS=ch3-pmi1,ch3-pmi2,debian   builds to run (default: every one; the
#                      ch3 ones are built when missing)
#   DIRS=spawn,ft      directories of test/mpi (default: the issue's eleven)
#   SUBSET=fast|ci     a named subset (internal/mpichsuite/subset.go)
#   TESTS=rma/win_shared,ft/die   only these programs (dir/program; every
#                      testlist line of each)
#   TIMEOUT=30         at most this many seconds per test (default: the
#                      testlist's timeLimit, else 180)
#   LISTS=testlist,testlist.dtp,testlist.cvar  testlist files (default testlist)
#   RUNNERS=hydra,dynrun-private,dynrun-warm,hydra-hosts,dynrun-hosts
#                      (default: all five; the two over namespace hosts only
#                      as root, where they can be built: internal/nshosts).
#                      dynrun-hosts is compared with hydra-hosts (Hydra over
#                      the same hosts and placement), the others with hydra
#   HOSTS_PREFIX=dyn-x the hosts' namespace names start with it (default
#                      dyn-mpichsuite; runs at the same time need their own)
#   VERBOSE=1          print each result as it comes
#   RESUME=FILE        a results file or journal (bench-out/mpich-suite/
#                      journal-*.tsv, written as results come) of a run that
#                      was cut short: its runs are not repeated
#   RECHECK=3          when a dynrun runner's verdict differs from its
#                      reference's, run that pair again, alternating, up to
#                      3 more times each (default 0); the report tells real
#                      differences (the reference passed every try) from
#                      tests flaky in MPICH itself (with each side's passes)
#   AFTER_HYDRA_LIMIT=60  the dynrun runners' limit in seconds for a test
#                      whose Hydra run lasted until its limit (default 60;
#                      0 gives them the full limit)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${DYNRT_MPICH_CACHE:-$HOME/.cache/dynrt}
MPICH=mpich-4.0.2
SUDO=$([[ $(id -u) == 0 ]] || echo sudo)
# shellcheck source=lib/common.sh
. "$root/scripts/lib/common.sh"

# The same suites as the binary packages' entry, as deb-src.
ensure_deb_src() {
	if grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ || grep -qs '^deb-src' /etc/apt/sources.list; then
		return
	fi
	local main=/etc/apt/sources.list.d/debian.sources
	[[ -f $main ]] || die "no deb-src entry and no $main to derive one from: add a deb-src line for your Debian suites"
	note "adding /etc/apt/sources.list.d/dynrt-src.sources (deb-src of $main's first entry)"
	awk 'BEGIN { RS = ""; ORS = "\n" } NR == 1 { sub(/Types: deb/, "Types: deb-src"); print }' "$main" |
		$SUDO tee /etc/apt/sources.list.d/dynrt-src.sources >/dev/null
	$SUDO apt-get update -qq
}

fetch_sources() {
	[[ -f $CACHE/src/$MPICH/test/mpi/runtests.in ]] && return
	ensure_deb_src
	command -v dpkg-source >/dev/null || $SUDO apt-get install -y -qq dpkg-dev >/dev/null
	mkdir -p "$CACHE/src"
	(cd "$CACHE/src" && apt-get source mpich)
	[[ -f $CACHE/src/$MPICH/test/mpi/runtests.in ]] || die "apt-get source mpich did not give $CACHE/src/$MPICH (another MPICH version?)"
}

# build_ch3 pmi1|pmi2 builds MPICH for ch3 with that PMI, unless present.
build_ch3() {
	local pmi=$1 with
	local prefix=$CACHE/ch3-$pmi
	[[ -x $prefix/bin/mpiexec.hydra && -f $prefix/dynrt-build.stamp ]] && return
	case $pmi in
	pmi1) with=simple ;;
	pmi2) with=pmi2/simple ;;
	esac
	local missing=()
	for p in gcc make perl libhwloc-dev; do
		dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
	done
	if ((${#missing[@]})); then
		note "installing MPICH's build dependencies: ${missing[*]}"
		$SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
	fi
	note "building MPICH ch3 with $pmi into $prefix (a few minutes; log $CACHE/build-ch3-$pmi.out)"
	local args=(--prefix="$prefix" --with-device=ch3 --with-pm=hydra --with-pmi=$with --disable-fortran --disable-cxx
		--disable-romio --disable-doc --with-hwloc=/usr --enable-fast=O2)
	if ! (mkdir -p "$CACHE/build-ch3-$pmi" && cd "$CACHE/build-ch3-$pmi" &&
		"$CACHE/src/$MPICH/configure" "${args[@]}" && make -j2 && make install) >"$CACHE/build-ch3-$pmi.out" 2>&1; then
		tail -n 20 "$CACHE/build-ch3-$pmi.out" >&2
		die "building MPICH ch3 with $pmi failed (log $CACHE/build-ch3-$pmi.out)"
	fi
	echo "configure ${args[*]}" >"$prefix/dynrt-build.stamp"
}

fetch_sources
[[ ${1:-} == fetch ]] && exit 0
wanted=${BUILDS:-ch3-pmi1,ch3-pmi2,debian}
for b in ${wanted//,/ }; do
	case $b in
	ch3-pmi1) build_ch3 pmi1 ;;
	ch3-pmi2) build_ch3 pmi2 ;;
	debian) command -v mpicc.mpich >/dev/null || note "Debian's MPICH is not installed (make deps-mpi): build debian skipped" ;;
	*) die "unknown build $b (ch3-pmi1, ch3-pmi2, debian)" ;;
	esac
done

work_dir mpich-suite
cd "$root"
go build -tags urfave_cli_no_docs,netgo -o "$work/bin/dynrun" ./cmd/dynrun
go build -o "$work/mpichsuite" ./internal/mpichsuite/cmd/mpichsuite
args=(-cache "$CACHE" -dynrun "$work/bin/dynrun" -out "$root/bench-out/mpich-suite")
[[ -n ${BUILDS:-} ]] && args+=(-builds "$BUILDS")
[[ -n ${DIRS:-} ]] && args+=(-dirs "$DIRS")
[[ -n ${SUBSET:-} ]] && args+=(-subset "$SUBSET")
[[ -n ${TESTS:-} ]] && args+=(-tests "$TESTS")
[[ -n ${TIMEOUT:-} ]] && args+=(-timeout "${TIMEOUT}s")
[[ -n ${LISTS:-} ]] && args+=(-lists "$LISTS")
[[ -n ${RUNNERS:-} ]] && args+=(-runners "$RUNNERS")
[[ -n ${HOSTS_PREFIX:-} ]] && args+=(-hosts-prefix "$HOSTS_PREFIX")
[[ -n ${VERBOSE:-} ]] && args+=(-v)
[[ -n ${RESUME:-} ]] && args+=(-resume "$RESUME")
[[ ${RECHECK:-0} != 0 ]] && args+=(-recheck "$RECHECK")
[[ ${AFTER_HYDRA_LIMIT:-60} != 0 ]] && args+=(-after-hydra-limit "${AFTER_HYDRA_LIMIT:-60}s")
# Not exec: the EXIT trap removes $work afterwards.
"$work/mpichsuite" "${args[@]}"
