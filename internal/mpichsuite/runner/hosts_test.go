package runner

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/mpichsuite"
	"github.com/dynrt/dynrt/internal/nshosts"
)

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
	h, err := StartHosts(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), dynrun, 2, os.Environ())
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
	l, err := mpichsuite.Command(mpichsuite.DynrunHosts, mpichsuite.Test{Dir: ".", Name: "whereami", NP: 3}, dynrun, h.ID)
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
