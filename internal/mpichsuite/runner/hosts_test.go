package runner

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/mpichsuite"
	"github.com/dynrt/dynrt/internal/nshosts"
)

// testHostsPrefix names the tests' namespace hosts, apart from a suite run's.
const testHostsPrefix = "dyn-mpichsuite-test"

// hostsDynrun is binDynrun for a test that skips where namespace hosts
// cannot be built.
func hostsDynrun(t *testing.T) string {
	t.Helper()
	if why := nshosts.Unsupported(true); why != "" {
		t.Skip(why)
	}
	return binDynrun(t)
}

// binDynrun copies dynrun into <tmp>/bin, the layout the dynrun-hosts
// runner needs (the hosts run PREFIX/bin/dynrun).
func binDynrun(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(progs.Build(t, "github.com/dynrt/dynrt/cmd/dynrun"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	dynrun := filepath.Join(bin, "dynrun")
	if err := os.WriteFile(dynrun, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dynrun
}

// TestHostsRunner launches a program the way the dynrun-hosts runner
// launches a test: its ranks run on the three hosts (each prints its
// hostname), and stopping the DVM leaves nothing on the hosts.
func TestHostsRunner(t *testing.T) {
	dynrun := hostsDynrun(t)
	ctx := context.Background()
	h, err := StartHosts(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), HostsConfig{Prefix: testHostsPrefix, Dynrun: dynrun, Slots: 2, Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = h.Stop(ctx)
		}
	})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "whereami"), []byte("#!/bin/sh\nhostname\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := mpichsuite.Command(mpichsuite.DynrunHosts, mpichsuite.Test{Dir: ".", Name: "whereami", NP: 3}, dynrun, mpichsuite.Place{DVM: h.ID})
	if err != nil {
		t.Fatal(err)
	}
	e := exec1{argv: append(slices.Clone(h.wrap), l.Argv...), dir: dir, env: h.env, limit: time.Minute,
		backstop: Backstop, mark: randomHex(8), dvm: h.procs, dvmExe: h.exe}
	run, _ := e.run(ctx)
	words := strings.Fields(string(run.Output))
	slices.Sort(words)
	if got := strings.Join(words, " "); run.Exit != 0 || got != "h0 h1 h2" || len(run.Leftovers) > 0 {
		t.Errorf("3 ranks by node: exit %d, hosts %q (want h0 h1 h2), leftovers %v", run.Exit, got, run.Leftovers)
	}
	if !h.Alive() {
		t.Fatal("the DVM over the hosts lost a process")
	}
	c := h.c
	stopped = true
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Remains() {
		t.Errorf("left after the hosts were torn down: %s", r)
	}
}

// hydraBuild is an MPICH build whose mpiexec.hydra can start programs:
// the cached ch3 one, else Debian's; the test skips without either.
func hydraBuild(t *testing.T) Build {
	t.Helper()
	for _, name := range []string{"ch3-pmi1", "debian"} {
		if b, ok, _ := KnownBuild(name, cacheDir()); ok {
			return b
		}
	}
	t.Skip("no mpiexec.hydra: neither the ch3 build in " + cacheDir() + " nor Debian's MPICH (make deps-mpi)")
	return Build{}
}

// TestHydraHostsPlacement runs the same programs under hydra-hosts and
// dynrun-hosts in one suite run: both use one cluster, place rank i on
// host h(i mod 3) (the program checks its own host: rank order and hosts
// the same), and a process a test leaves on another host without the
// test's mark (as Hydra's proxies carry none) is found and named. The
// hosts are gone afterwards.
func TestHydraHostsPlacement(t *testing.T) {
	dynrun := hostsDynrun(t)
	b := hydraBuild(t)
	cache := t.TempDir()
	scripts := map[string]string{
		// Each rank checks it runs where --map-by node puts it.
		"whereami": `r=${PMI_RANK:-$DYNRT_RANK}
if [ "$(hostname)" != "h$((r % 3))" ]; then echo "rank $r on $(hostname)"; exit 1; fi
if [ "$r" = 0 ]; then echo " No Errors"; fi
`,
		// Rank 1 (on h1) leaves a process without the mark behind, its
		// descriptors closed (Hydra's proxy waits for the PMI socket).
		"leaver": `r=${PMI_RANK:-$DYNRT_RANK}
if [ "$r" = 1 ]; then
	env -u DYNRT_TEST_MARK setsid bash -c 'for f in /proc/$$/fd/*; do n=${f##*/}; if [ $n -gt 2 ]; then exec {n}>&-; fi; done; exec sleep 61' </dev/null >/dev/null 2>&1 &
fi
if [ "$r" = 0 ]; then echo " No Errors"; fi
`,
	}
	for name, text := range scripts {
		p := filepath.Join(cache, "tests-"+b.Name, "x", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	whereami := mpichsuite.Test{Dir: "x", Name: "whereami", NP: 4, TimeLimit: 60}
	leaver := mpichsuite.Test{Dir: "x", Name: "leaver", NP: 2, TimeLimit: 60}
	prefix := testHostsPrefix + "-" + strconv.Itoa(os.Getpid())
	var clusters []int
	cfg := Config{
		Cache:       cache,
		Dynrun:      dynrun,
		Builds:      []Build{b},
		Runners:     []mpichsuite.Runner{mpichsuite.DynrunHosts, mpichsuite.HydraHosts}, // run in table order
		HostsPrefix: testHostsPrefix,
		WorkDir:     t.TempDir(),
		Log:         slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		Progress: func(mpichsuite.Result) {
			infos, _ := nshosts.List(prefix)
			clusters = append(clusters, len(infos))
		},
	}
	results, err := cfg.Run(context.Background(), map[string][]mpichsuite.Test{b.Name: {whereami, leaver}})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	by := map[string]mpichsuite.Verdict{}
	for _, r := range results {
		k := string(r.Runner) + " " + r.Test.Name
		order = append(order, k)
		by[k] = r.Verdict
	}
	if want := "hydra-hosts whereami,dynrun-hosts whereami,hydra-hosts leaver,dynrun-hosts leaver"; strings.Join(order, ",") != want {
		t.Errorf("ran %q, want %q (the reference first)", strings.Join(order, ","), want)
	}
	for _, rn := range []string{"hydra-hosts", "dynrun-hosts"} {
		if v := by[rn+" whereami"]; !v.Passed() {
			t.Errorf("%s whereami: %+v, want pass (every rank on h(rank mod 3))", rn, v)
		}
	}
	if v := by["hydra-hosts leaver"]; v.Kind != mpichsuite.Leftover || !strings.Contains(v.Reason, "sleep 61") {
		t.Errorf("hydra-hosts leaver: %+v, want leftover naming the sleep left on h1", v)
	}
	t.Logf("dynrun-hosts leaver: %+v", by["dynrun-hosts leaver"])
	if fmt.Sprint(clusters) != "[1 1 1 1]" {
		t.Errorf("clusters of the run after each result: %v, want one shared by both runners", clusters)
	}
	if infos, _ := nshosts.List(prefix); len(infos) != 0 {
		t.Errorf("hosts left after the run: %+v", infos)
	}
}
