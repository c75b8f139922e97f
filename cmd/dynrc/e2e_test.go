package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// A job of plain `sleep` processes never accepts or confirms: every ADD
// ends ABORTED. That exercises the abort paths, busy, cancel and bad input
// against the real runtime, without the session library.
func TestDVMAbortsAndBadInput(t *testing.T) {
	d := startDVM(t, 2, 4)
	d.launch("sleeper", 2, "sleep", "300")

	if out := d.must(0, "list"); out != "no resource changes\n" {
		t.Errorf("list: %q", out)
	}

	// Confirm timeout: the new processes are killed, the job is as before.
	out := d.must(1, "add", "-n", "2", "--confirm-timeout", "300ms", "--wait")
	if !strings.Contains(out, "mpi://rte/sleeper/rc/1  ADD 2 (ranks 2-3)  ABORTED after") {
		t.Errorf("add with a confirm timeout: %q", out)
	}
	rec := d.show("1")
	if rec.Status != wire.RCAborted || !rec.Settled || rec.Reason == "" || !hasSteps(rec, "announced", "aborted") {
		t.Errorf("aborted record: %+v", rec)
	}
	d.waitSize("sleeper", 2)
	waitProcs(t, "sleep", 2)

	// Busy: the message names the change in flight; cancel frees the job.
	d.must(0, "add", "-n", "1")
	if out := d.must(4, "sub", "-n", "1"); !strings.Contains(out, "mpi://rte/sleeper/rc/2") || !strings.Contains(out, "in flight") {
		t.Errorf("busy: %q", out)
	}
	if out := d.must(3, "wait", "2", "--timeout", "100ms"); !strings.Contains(out, "timed out") {
		t.Errorf("wait --timeout: %q", out)
	}
	if out := d.must(0, "cancel", "2"); !strings.Contains(out, "ABORTED") || !strings.Contains(out, "canceled by dynrc pid") {
		t.Errorf("cancel: %q", out)
	}
	d.must(0, "wait", "mpi://rte/sleeper/rc/2", "--status", "aborted")
	if out := d.must(1, "wait", "2"); !strings.Contains(out, "was aborted") {
		t.Errorf("wait for finalized of an aborted change: %q", out)
	}
	d.must(1, "cancel", "2") // already final
	d.waitSize("sleeper", 2)

	// Bad input: clear errors, nothing changed, no delta number used.
	for _, tt := range []struct {
		args []string
		code int
		frag string
	}{
		{[]string{"sub", "-n", "2"}, 1, ""},
		{[]string{"sub", "--ranks", "7"}, 1, "7"},
		{[]string{"add", "-n", "1", "--pset", "mpi://app/sleeper/nope"}, 1, "mpi://app/sleeper/nope"},
		{[]string{"add", "-n", "100"}, 1, ""},
		{[]string{"add", "-n", "1", "--job", "nosuch"}, 1, `unknown job "nosuch"`},
		{[]string{"show", "mpi://rte/sleeper/rc/99"}, 1, "mpi://rte/sleeper/rc/99"},
		{[]string{"add", "-n", "0"}, 2, "-n must be a positive number"},
		{[]string{"sub", "--ranks", "1-"}, 2, "is not a rank"},
	} {
		if out := d.must(tt.code, tt.args...); !strings.Contains(out, tt.frag) {
			t.Errorf("dynrc %s: %q lacks %q", strings.Join(tt.args, " "), out, tt.frag)
		}
	}
	d.waitSize("sleeper", 2)
	if out := d.must(0, "list"); strings.Count(out, "ABORTED") != 2 || strings.Contains(out, "rc/3") {
		t.Errorf("list after the bad requests:\n%s", out)
	}

	// A script stops at the failing line with its status.
	script := filepath.Join(t.TempDir(), "s.rc")
	if err := os.WriteFile(script, []byte("add 1\ncancel\nwait aborted\nadd 1\nsub 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := d.dynrc("script", script)
	if code != 4 || !strings.Contains(errOut, "script line 5 (sub 1)") || !strings.Contains(out, "3  wait aborted") {
		t.Errorf("script: exit %d\n%s%s", code, out, errOut)
	}
	d.must(0, "cancel", "4")
	d.must(0, "wait", "4", "--status", "aborted")
	d.waitSize("sleeper", 2)
	waitProcs(t, "sleep", 2)
}

func hasSteps(rec rcJSON, names ...string) bool {
	for _, n := range names {
		if _, ok := rec.ElapsedMS[n]; !ok {
			return false
		}
	}
	return true
}

// waitProcs waits until exactly n marked processes run prog.
func waitProcs(t *testing.T, prog string, n int) {
	t.Helper()
	got := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got = countProcs(prog); got == n {
			return
		}
	}
	t.Fatalf("%d processes run %s, want %d", got, prog, n)
}

// A malleable job grows and shrinks under dynrc; every change is settled
// when --wait returns, and its record holds every step.
func TestDVMGrowShrink(t *testing.T) {
	d := startDVM(t, 2, 4)
	if malleableBin == "" {
		t.Skip("no malleable test program")
	}
	jobOut := d.launch("mall", 2, malleableBin, "-timeout", "2m")
	defer func() {
		if t.Failed() {
			t.Logf("job output:\n%s", jobOut)
		}
	}()

	out := d.must(0, "add", "-n", "2", "--wait")
	if !strings.HasPrefix(out, "mpi://rte/mall/rc/1  ADD 2 (ranks 2-3)  FINALIZED after") {
		t.Errorf("add --wait: %q", out)
	}
	d.waitSize("mall", 4)
	rec := d.show("1")
	if rec.Status != wire.RCFinalized || !rec.Settled || rec.NewSet == nil || rec.Requester != wire.ByTool ||
		!hasSteps(rec, "requested", "delta_defined", "job_data_pushed", "announced", "launched", "all_started", "accept_published", "confirmed", "finalized") {
		t.Errorf("ADD record: %+v", rec)
	}

	out = d.must(0, "sub", "-n", "2", "--wait", "--json")
	var sub rcJSON
	if err := json.Unmarshal([]byte(out), &sub); err != nil {
		t.Fatal(err)
	}
	if sub.Status != wire.RCFinalized || !sub.Settled || sub.Ranks != "2-3" || !hasSteps(sub, "announced", "accept_published", "finalized", "all_exited") {
		t.Errorf("SUB record: %s", out)
	}
	d.waitSize("mall", 2)

	// Queued behind a change in flight, then both settle.
	d.must(0, "add", "-n", "1")
	if out := d.must(0, "add", "-n", "1", "--queue", "--wait"); !strings.Contains(out, "rc/4  ADD 1 (ranks 5)  FINALIZED") {
		t.Errorf("queued add: %q", out)
	}
	d.waitSize("mall", 4)

	script := filepath.Join(t.TempDir(), "s.rc")
	if err := os.WriteFile(script, []byte("# shrink by name, grow, shrink\nsub ranks 1,5\nwait\nadd 3\nwait\nsub 3\nwait\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := d.dynrc("script", "--timeout", "30s", script)
	if code != 0 || strings.Count(out, "FINALIZED") != 3 || !strings.Contains(out, "script done: 6 commands, 3 changes") {
		t.Errorf("script: exit %d\n%s%s", code, out, errOut)
	}
	d.waitSize("mall", 2)
	if out := d.must(0, "list", "--json"); strings.Count(out, `"status": "FINALIZED"`) != 7 {
		t.Errorf("list --json:\n%s", out)
	}

	// Replace rank 0 (evacuate it): a new rank takes its place.
	out = d.must(0, "replace", "--ranks", "0", "--wait")
	if !strings.HasPrefix(out, "mpi://rte/mall/rc/8  REPLACE 1 (ranks 0 by 9)  FINALIZED after") {
		t.Errorf("replace --wait: %q", out)
	}
	rec = d.show("8")
	if rec.Replaced != "0" || rec.ReplacedSet != "mpi://rte/mall/rc/8/out" || !rec.Settled ||
		!hasSteps(rec, "announced", "launched", "all_started", "accept_published", "confirmed", "finalized", "all_exited") {
		t.Errorf("REPLACE record: %+v", rec)
	}
	d.waitSize("mall", 2)
}
