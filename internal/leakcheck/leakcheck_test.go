package leakcheck

import (
	"os"
	"os/exec"
	"slices"
	"testing"
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
