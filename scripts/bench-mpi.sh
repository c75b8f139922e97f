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
# Runs alternate: each of $ROUNDS rounds (default 10) runs every variant once
# in a fresh random order, after $WARMUP (default 1) uncounted runs of each.
# Times are wall-clock from fork to exit. The script prints medians, p10/p90
# and the ratio to Hydra. MPICH is installed with apt-get when missing.
#
# Usage: scripts/bench-mpi.sh                 (from anywhere in the repository)
#        ROUNDS=5 NS="8" scripts/bench-mpi.sh
set -euo pipefail

ROUNDS=${ROUNDS:-10}
WARMUP=${WARMUP:-1}
NS=${NS:-"1 8 28"}
SLOTS=28

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-mpi.XXXXXX")
dvm=""

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n $dvm ]]; then
		"$work/dynrun" dvm stop --dvm "$dvm" >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

note() { printf '# %s\n' "$*" >&2; }

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

mkdir -p "$work/timer"
cat >"$work/timer/main.go" <<'EOF'
// mpitimer runs benchmark variants alternately and prints median times.
// Spec lines: variant TAB n TAB [VAR=VAL TAB ...] argv... (TAB separated).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"
)

type variant struct {
	name  string
	n     int
	env   []string
	argv  []string
	times []time.Duration
	err   string
}

func (v *variant) run() (time.Duration, error) {
	cmd := exec.Command(v.argv[0], v.argv[1:]...)
	cmd.Env = append(os.Environ(), v.env...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	if err != nil {
		return d, fmt.Errorf("%v: %s", err, strings.TrimSpace(out.String()))
	}
	if got := strings.Count(out.String(), "hello rank="); got != v.n {
		return d, fmt.Errorf("%d hello lines, want %d", got, v.n)
	}
	return d, nil
}

func pct(ts []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ts...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 0 && p == 50 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[int(float64(len(s)-1)*p/100+0.5)]
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) }

func main() {
	rounds := flag.Int("rounds", 10, "counted rounds")
	warmup := flag.Int("warmup", 1, "uncounted runs per variant")
	flag.Parse()
	var vs []*variant
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) < 3 {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		v := &variant{name: f[0], n: n}
		rest := f[2:]
		for len(rest) > 0 && strings.Contains(rest[0], "=") && !strings.HasPrefix(rest[0], "/") {
			v.env, rest = append(v.env, rest[0]), rest[1:]
		}
		v.argv = rest
		vs = append(vs, v)
	}
	for _, v := range vs {
		for i := 0; i < *warmup && v.err == ""; i++ {
			if _, err := v.run(); err != nil {
				v.err = err.Error()
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for r := 0; r < *rounds; r++ {
		for _, i := range rng.Perm(len(vs)) {
			v := vs[i]
			if v.err != "" {
				continue
			}
			d, err := v.run()
			if err != nil {
				v.err = err.Error()
				continue
			}
			v.times = append(v.times, d)
		}
	}
	hydra := map[int]time.Duration{}
	for _, v := range vs {
		if v.name == "hydra" && v.err == "" {
			hydra[v.n] = pct(v.times, 50)
		}
	}
	fmt.Printf("| N | variant | median ms | p10 ms | p90 ms | ratio to Hydra |\n|---:|---|---:|---:|---:|---:|\n")
	for _, v := range vs {
		if v.err != "" {
			fmt.Printf("| %d | %s | failed | | | |\n", v.n, v.name)
			fmt.Fprintf(os.Stderr, "# %s N=%d failed: %s\n", v.name, v.n, v.err)
			continue
		}
		med := pct(v.times, 50)
		ratio := "-"
		if h, ok := hydra[v.n]; ok {
			ratio = strconv.FormatFloat(float64(med)/float64(h), 'f', 2, 64)
		}
		fmt.Printf("| %d | %s | %s | %s | %s | %s |\n", v.n, v.name, ms(med), ms(pct(v.times, 10)), ms(pct(v.times, 90)), ratio)
	}
}
EOF
(cd "$work/timer" && GOFLAGS= GO111MODULE=on go build -o "$work/mpitimer" main.go)

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
	echo "dynrt-warm${tab}$n${tab}$work/dynrun${tab}--dvm${tab}$dvm${tab}-n${tab}$n${tab}$work/hello_mpi" >>"$spec"
	echo "hydra${tab}$n${tab}$(command -v mpiexec.hydra)${tab}-n${tab}$n${tab}$work/hello_mpi" >>"$spec"
done

note "$ROUNDS rounds (+$WARMUP warm-up runs per variant), $(nproc) CPUs, kernel $(uname -r), load average $(cut -d" " -f1-3 /proc/loadavg)"
"$work/mpitimer" -rounds "$ROUNDS" -warmup "$WARMUP" <"$spec"
