package runner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/leakcheck"
)

// TestExecOne runs real processes through the runner's launch step:
// merged output, exit status, the time limit and the leftover sweep.
func TestExecOne(t *testing.T) {
	root := t.TempDir()
	sleep := filepath.Join(root, "sleep")
	if data, err := os.ReadFile("/bin/sleep"); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(sleep, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		script    string
		limit     time.Duration
		exit      int
		signal    syscall.Signal
		timedOut  bool
		atLimit   bool
		output    string
		leftovers int
		leftWhat  string
	}{
		{name: "merged output and status", script: `echo out; echo err >&2; echo out2; exit 3`,
			limit: 10 * time.Second, exit: 3, output: "out\nerr\nout2\n"},
		{name: "killed after the limit", script: `echo started; exec sleep 30`,
			limit: 300 * time.Millisecond, signal: syscall.SIGTERM, timedOut: true, atLimit: false, output: "started\n"},
		{name: "ended by the launcher at the limit", script: `sleep "$MPIEXEC_TIMEOUT"; echo timed out; exit 255`,
			limit: time.Second, exit: 255, atLimit: true, output: "timed out\n"},
		{name: "left running with the mark", script: `setsid sleep 30 </dev/null >/dev/null 2>&1 & sleep 0.3; echo " No Errors"`,
			limit: 10 * time.Second, output: " No Errors\n", leftovers: 1, leftWhat: "sleep 30"},
		{name: "left running, found by its executable", script: `env -i setsid ` + sleep + ` 31 </dev/null >/dev/null 2>&1 & sleep 0.3; echo " No Errors"`,
			limit: 10 * time.Second, output: " No Errors\n", leftovers: 1, leftWhat: sleep + " 31"},
		{name: "left in the launcher's process group", script: `env -i sleep 32 </dev/null >/dev/null 2>&1 & sleep 0.3; echo " No Errors"`,
			limit: 10 * time.Second, output: " No Errors\n", leftovers: 1, leftWhat: "sleep 32"},
		{name: "a child that ends in time is no leftover", script: `(sleep 1; true) </dev/null >/dev/null 2>&1 & sleep 0.3; echo " No Errors"`,
			limit: 10 * time.Second, output: " No Errors\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := exec1{
				argv:     []string{"/bin/sh", "-c", c.script},
				dir:      root,
				env:      os.Environ(),
				limit:    c.limit,
				backstop: 500 * time.Millisecond,
				mark:     randomHex(8),
				progRoot: root,
			}
			start := time.Now()
			r, elapsed := e.run(context.Background())
			if r.NotRun != "" {
				t.Fatal(r.NotRun)
			}
			if string(r.Output) != c.output {
				t.Errorf("output %q, want %q", r.Output, c.output)
			}
			if r.Exit != c.exit || r.Signal != int(c.signal) || r.TimedOut != c.timedOut || r.AtLimit != c.atLimit {
				t.Errorf("exit %d signal %d timed out %v at limit %v, want %d %d %v %v",
					r.Exit, r.Signal, r.TimedOut, r.AtLimit, c.exit, c.signal, c.timedOut, c.atLimit)
			}
			if len(r.Leftovers) != c.leftovers || c.leftovers > 0 && !strings.Contains(r.Leftovers[0], c.leftWhat) {
				t.Errorf("leftovers %q, want %d naming %q", r.Leftovers, c.leftovers, c.leftWhat)
			}
			if c.timedOut && time.Since(start) > c.limit+e.backstop+Grace+2*time.Second {
				t.Errorf("a timed-out run took %v", time.Since(start))
			}
			if elapsed <= 0 {
				t.Errorf("elapsed %v", elapsed)
			}
			// The sweep killed what it reported: nothing of the run is left.
			time.Sleep(200 * time.Millisecond)
			if left := leakcheck.MarkedProcs(e.mark); len(left) > 0 {
				t.Errorf("processes with the run's mark still alive: %v", left)
			}
			out, _ := exec.Command("pgrep", "-f", "^"+sleep).Output()
			if len(strings.TrimSpace(string(out))) > 0 {
				t.Errorf("%s still runs: pids %s", sleep, out)
			}
		})
	}
}
