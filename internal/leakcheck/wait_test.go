package leakcheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// recorder is a testing.TB that keeps the errors instead of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper()                      {}
func (r *recorder) Errorf(f string, args ...any) { r.errs = append(r.errs, fmt.Sprintf(f, args...)) }

func TestWaitCleanFindsAndKillsLeftovers(t *testing.T) {
	mark := NewMark(t)
	dir := t.TempDir()
	cmd := exec.Command("sleep", "30")
	cmd.Env = append(os.Environ(), EnvMark+"="+mark)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	if err := os.WriteFile(filepath.Join(dir, "left.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if n := CountProg(mark, "sleep"); n != 1 {
		t.Fatalf("CountProg = %d, want 1", n)
	}
	r := &recorder{TB: t}
	WaitClean(r, dir, mark, 50*time.Millisecond)
	if len(r.errs) != 2 {
		t.Fatalf("want a file and a process reported, got %q", r.errs)
	}
	cmd.Wait() // killed by WaitClean
	if n := CountProg(mark, "sleep"); n != 0 {
		t.Errorf("leftover not killed: %d", n)
	}

	// Nothing left: nothing reported.
	os.Remove(filepath.Join(dir, "left.sock"))
	r = &recorder{TB: t}
	WaitClean(r, dir, mark, 50*time.Millisecond)
	if len(r.errs) != 0 {
		t.Errorf("clean directory reported: %q", r.errs)
	}
}
