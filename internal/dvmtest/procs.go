package dvmtest

import (
	"context"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// Failure tests kill processes and daemons of a test DVM by pid.

// RunningProcs waits until job has exactly n running processes and
// returns them by rank (pid, node); not within 20 s fails t.
func RunningProcs(t testing.TB, c *tool.Client, job string, n int) map[uint32]wire.ProcInfo {
	t.Helper()
	var pids map[uint32]wire.ProcInfo
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		info, err := c.Job(context.Background(), wire.JobStateReq{Job: job, Procs: true})
		if err != nil {
			t.Fatal(err)
		}
		pids = map[uint32]wire.ProcInfo{}
		for _, p := range info.Procs {
			if p.State == wire.ProcStateRunning && p.PID > 0 {
				pids[p.Rank] = p
			}
		}
		if len(pids) == n {
			return pids
		}
	}
	t.Fatalf("job %s: %d running processes, want %d", job, len(pids), n)
	return nil
}

// DaemonPID returns the pid of the daemon of node; none fails t.
func DaemonPID(t testing.TB, c *tool.Client, node string) int {
	t.Helper()
	st, err := c.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if n.Name == node && n.PID > 0 {
			return n.PID
		}
	}
	t.Fatalf("no daemon pid for node %s", node)
	return 0
}
