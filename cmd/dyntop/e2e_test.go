package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// The end-to-end test runs the real dyntop binary in tmux against a live
// DVM while a malleable job (internal/malleable) grows and shrinks, and
// reads the screen with capture-pane. tmux comes from Debian (`make
// deps-tmux`); without it the test is skipped and says so.

// binaries builds dyntop and the malleable test application once
// (without the race detector: the test watches them, it does not check
// them for races).
func binaries(t *testing.T) (dyntop, malleable string) {
	t.Helper()
	return progs.Build(t, "github.com/dynrt/dynrt/cmd/dyntop"), progs.Build(t, "github.com/dynrt/dynrt/internal/malleable")
}

// screen is one tmux session running a command.
type screen struct {
	t    *testing.T
	sock string
	name string
}

func newScreen(t *testing.T, w, h int, command string) *screen {
	t.Helper()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not installed: run `make deps-tmux` (Debian package tmux) for the end-to-end test of dyntop")
	}
	s := &screen{t: t, sock: fmt.Sprintf("dyntop-test-%d-%d", os.Getpid(), time.Now().UnixNano()), name: "top"}
	cmd := exec.Command(tmux, "-L", s.sock, "-f", "/dev/null", "new-session", "-d", "-s", s.name,
		"-x", fmt.Sprint(w), "-y", fmt.Sprint(h), command)
	cmd.Env = append(os.Environ(), "TERM=xterm-256color")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(tmux, "-L", s.sock, "kill-server").Run() })
	return s
}

func (s *screen) tmux(args ...string) (string, error) {
	out, err := exec.Command("tmux", append([]string{"-L", s.sock}, args...)...).CombinedOutput()
	return string(out), err
}

func (s *screen) capture() string {
	out, err := s.tmux("capture-pane", "-p", "-t", s.name)
	if err != nil {
		return ""
	}
	return out
}

func (s *screen) keys(keys ...string) {
	s.t.Helper()
	if out, err := s.tmux(append([]string{"send-keys", "-t", s.name}, keys...)...); err != nil {
		s.t.Fatalf("send-keys %v: %v %s", keys, err, out)
	}
}

// waitFor waits until the screen matches every pattern and returns it.
func (s *screen) waitFor(what string, patterns ...string) string {
	s.t.Helper()
	res := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		res[i] = regexp.MustCompile(p)
	}
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		last = s.capture()
		ok := true
		for _, re := range res {
			ok = ok && re.MatchString(last)
		}
		if ok {
			return last
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("%s: the screen never matched %q:\n%s", what, patterns, last)
	return ""
}

// slotRow returns the slot-map line of a node.
func slotRow(scr, node string) string {
	for _, l := range strings.Split(scr, "\n") {
		if strings.HasPrefix(l, node+" ") {
			return l
		}
	}
	return ""
}

func TestEndToEndTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: run `make deps-tmux` (Debian package tmux) for the end-to-end test of dyntop")
	}
	dyntop, malleable := binaries(t)
	d := startDVM(t, 3, 2)
	job := d.launch("lu", 2, malleable, "-timeout", "60s")
	scr := newScreen(t, 120, 40, fmt.Sprintf("env %s=%s %s --dvm %s", "DYNRT_DIR", d.dir, dyntop, d.m.Info().ID))

	s := scr.waitFor("start", `DVM `+d.m.Info().ID+` \(toptest\)`, `node0 │A0 A1 │ 2/2`, `node1 │·  ·  │ 0/2`, `lu\s+2 running`, `mpi://app/lu`)
	t.Logf("first screen:\n%s", s)

	// Keys: help, panes, a job opened and closed.
	scr.keys("?")
	scr.waitFor("help", `dyntop keys`, `shift-tab\s+previous pane`)
	scr.keys("x")
	scr.keys("Tab")
	scr.waitFor("tab", `▶ process sets of lu`)
	scr.keys("BTab", "Enter")
	scr.waitFor("enter", `job lu \(`+regexp.QuoteMeta(job.Job)+`\)`, `placement`)
	scr.keys("Escape")
	scr.waitFor("esc", `▶ jobs`)

	// Grow by 3: the change goes through its phases on screen and the slot
	// map fills node1 and node2.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := d.c.RequestRC(ctx, wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 3})
	if err != nil {
		t.Fatalf("add: %v", err)
	}
	scr.waitFor("announced", `rc\.state\s+lu\s+rc/1 ADD 3 ANNOUNCED`)
	final, err := d.c.WaitRC(ctx, rc.Delta, "")
	if errors.Is(err, wire.ErrAborted) {
		// The screen must say so too; the rest needs a runtime whose
		// changes finalize.
		scr.waitFor("aborted", `rc/1 lu\s+ADD \+3 ABORTED`)
		t.Skipf("the runtime aborted the ADD (%s): the screen showed it; FINALIZED and the shrink were not checked", final.Reason)
	}
	if err != nil {
		t.Fatalf("wait for %s: %v", rc.Delta, err)
	}
	s = scr.waitFor("finalized", `rc/1 lu\s+ADD \+3 FINALIZED`, `node1 │A2 A3 │ 2/2`, `node2 │A4 ·  │ 1/2`, `lu\s+5 running`)
	t.Logf("after the grow:\n%s", s)

	// Shrink by 2 from the keys: s, count, confirm.
	scr.keys("s", "BSpace", "2", "Enter")
	scr.waitFor("confirm", `Remove 2 process\(es\) from lu`)
	scr.keys("y")
	s = scr.waitFor("sub finalized", `rc/2 lu\s+SUB -2 FINALIZED`, `node2 │·  ·  │ 0/2`, `node1 │A2 ·  │ 1/2`, `lu\s+3 running`)
	t.Logf("after the shrink:\n%s", s)
	if !strings.Contains(slotRow(s, "node0"), "A0 A1") {
		t.Errorf("node0 changed: %q", slotRow(s, "node0"))
	}

	// q quits.
	scr.keys("q")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := scr.tmux("has-session", "-t", scr.name); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("q did not end dyntop")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dyntop says so when the DVM stops: it exits (status 0) unless --wait.
func TestEndToEndDVMStops(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: run `make deps-tmux` (Debian package tmux) for the end-to-end test of dyntop")
	}
	dyntop, _ := binaries(t)
	d := startDVM(t, 1, 2)
	id := d.m.Info().ID
	plain := newScreen(t, 80, 24, fmt.Sprintf("env DYNRT_DIR=%s %s --dvm %s; echo EXIT=$?; sleep 60", d.dir, dyntop, id))
	waiting := newScreen(t, 80, 24, fmt.Sprintf("env DYNRT_DIR=%s %s --wait --readonly", d.dir, dyntop))
	plain.waitFor("start", `DVM `+id)
	waiting.waitFor("start", `DVM `+id, `read-only`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := d.c.StopDVM(ctx, 0); err != nil {
		t.Fatal(err)
	}
	plain.waitFor("exit", `dyntop: DVM `+id+` has stopped`, `EXIT=0`)
	waiting.waitFor("wait", `DVM `+id+` stopped at \d\d:\d\d:\d\d.*waiting for it to come back`)
	waiting.keys("a")
	waiting.waitFor("read-only", `read-only: dyntop was started with --readonly`)
}
