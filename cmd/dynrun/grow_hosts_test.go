package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/gobuild"
	"github.com/dynrt/dynrt/internal/nshosts"
)

// goBuild builds the package at pkg (relative to this directory) into dir
// and returns the executable's path.
func goBuild(t *testing.T, dir, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", gobuild.Args("-o", out, pkg)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// TestGrowShrinkAcrossHosts: on three network-namespace hosts with sshd
// (internal/nshosts), a DVM started on h0 over h0 and h1 by ssh grows by
// h2 (its daemon started by ssh), a malleable job grows onto h2 with
// `dynrc add`, `dvm shrink --node h2 --drain` moves those ranks out by a
// SUB the job accepts, and then nothing of the DVM is left on h2. Needs
// root (skipped otherwise).
func TestGrowShrinkAcrossHosts(t *testing.T) {
	if why := nshosts.Unsupported(true); why != "" {
		t.Skip(why)
	}
	dynDir(t)
	tools := t.TempDir()
	mall := goBuild(t, tools, "../../internal/malleable")
	dynrc := goBuild(t, tools, "../dynrc")
	pfx := prefixDir(t)
	c := nshosts.Start(t, nshosts.Config{Prefix: "dyn-grow", K: 3, SSH: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// on runs a command on h0, as a user logged in there would.
	on := func(argv ...string) (int, string, string) {
		t.Helper()
		return runCmd(t, c.Command(ctx, "h0", argv...))
	}
	agent := "ssh -F " + c.SSHConfig()
	code, out, errOut := on(bin, "dvm", "start", "--daemonize", "--launcher", "ssh", "--launch-agent", agent, "--prefix", pfx,
		"--host", "h0:2,h1:2", "--name", "grow")
	if code != 0 {
		t.Fatalf("dvm start: exit %d, %q, %q", code, out, errOut)
	}
	t.Cleanup(func() { _ = c.Command(context.Background(), "h0", bin, "dvm", "stop", "--dvm", "grow").Run() }) // stopped already unless the test failed

	// A malleable job of 4 on h0 and h1; it ends after its second change.
	job := c.Command(ctx, "h0", bin, "--dvm", "grow", "-n", "4", mall, "-last", "2")
	var jobOut, jobErr bytes.Buffer
	job.Stdout, job.Stderr = &jobOut, &jobErr
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	jobDone := make(chan error, 1)
	go func() { jobDone <- job.Wait() }()
	statusOn := func() statusJSON {
		t.Helper()
		code, out, errOut := on(bin, "dvm", "status", "--json", "--dvm", "grow")
		if code != 0 {
			t.Fatalf("dvm status: exit %d, %q", code, errOut)
		}
		return parseStatus(t, out)
	}
	waitFor(t, "the job to run", func() bool {
		st := statusOn()
		return len(st.Jobs) == 1 && st.Jobs[0].State == "running"
	})

	t0 := time.Now()
	code, out, errOut = on(bin, "dvm", "grow", "--dvm", "grow", "--host", "h2:4")
	t.Logf("dvm grow --host h2:4 over ssh took %v (the dynrun command, ssh and the daemon's registration)", time.Since(t0))
	if code != 0 || !strings.Contains(out, "node h2 joined DVM") || !strings.Contains(out, "on host h2") {
		t.Fatalf("dvm grow --host h2:4: exit %d, %q, %q", code, out, errOut)
	}
	code, out, errOut = on(dynrc, "--dvm", "grow", "add", "-n", "2", "--wait")
	if code != 0 {
		t.Fatalf("dynrc add: exit %d, %q, %q; job: %s %s", code, out, errOut, jobOut.String(), jobErr.String())
	}
	st := statusOn()
	onH2 := ""
	for _, p := range st.Jobs[0].Placement {
		if p.Node == "h2" {
			onH2 = p.Ranks
		}
	}
	if onH2 != "4-5" {
		t.Fatalf("after dynrc add: the job's ranks on h2 are %q, want 4-5 (placement %+v)", onH2, st.Jobs[0].Placement)
	}

	code, out, errOut = on(bin, "dvm", "shrink", "--dvm", "grow", "--node", "h2", "--drain")
	if code != 0 || !strings.Contains(out, "removed ranks 4-5 from node h2") || !strings.Contains(out, "node h2 left DVM") {
		t.Fatalf("dvm shrink --drain: exit %d, %q, %q", code, out, errOut)
	}
	st = statusOn()
	for _, n := range st.Nodes {
		if n.Name == "h2" {
			t.Fatalf("h2 still listed after the shrink: %+v", n)
		}
	}
	// Nothing of the DVM runs on h2 any more: no daemon, no rank.
	waitFor(t, "h2 to be empty", func() bool {
		left, err := c.Leftovers(ctx, "h2")
		if err != nil {
			t.Fatal(err)
		}
		if len(left) > 0 {
			t.Logf("on h2: %v", left)
		}
		return len(left) == 0
	})
	select {
	case err := <-jobDone:
		if err != nil {
			t.Fatalf("job: %v\n%s%s", err, jobOut.String(), jobErr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the job did not end after its second change:\n%s%s", jobOut.String(), jobErr.String())
	}
	if code, _, errOut := on(bin, "dvm", "stop", "--dvm", "grow"); code != 0 {
		t.Fatalf("dvm stop: exit %d, %q", code, errOut)
	}
	for _, h := range []string{"h0", "h1", "h2"} {
		waitFor(t, "host "+h+" to be empty after the stop", func() bool {
			left, err := c.Leftovers(ctx, h)
			return err == nil && len(left) == 0
		})
	}
}
