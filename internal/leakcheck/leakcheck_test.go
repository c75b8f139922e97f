package leakcheck

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// TestLeftoverCheck makes sure the leftover check sees a marked process.
func TestLeftoverCheck(t *testing.T) {
	mark := NewMark(t)
	cmd := exec.Command("sleep", "30")
	cmd.Env = append(os.Environ(), EnvMark+"="+mark)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if got := MarkedProcs(mark); !slices.Equal(got, []int{cmd.Process.Pid}) {
		t.Errorf("MarkedProcs = %v, want [%d]", got, cmd.Process.Pid)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if Alive(cmd.Process.Pid) || len(MarkedProcs(mark)) != 0 {
		t.Error("a reaped process still counts as alive")
	}
}

// TestWaitGone: a process killed during the wait is reported gone; one
// still running at the limit is not.
func TestWaitGone(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }() // a zombie until then
	if WaitGone(cmd.Process.Pid, 50*time.Millisecond) {
		t.Error("a running process was reported gone")
	}
	time.AfterFunc(50*time.Millisecond, func() { _ = cmd.Process.Kill() })
	if !WaitGone(cmd.Process.Pid, 10*time.Second) {
		t.Error("a killed process was reported alive")
	}
}
