package dvmtest

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if IsDaemon() {
		os.Exit(DaemonMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestStart starts a DVM of two nodes (one re-executed daemon) and runs a
// marked job on it; the cleanup checks that nothing is left.
func TestStart(t *testing.T) {
	d := Start(t, Options{Nodes: 2, Slots: 1, Name: "dvmtest", SetEnv: true})
	if got := os.Getenv("DYNRT_DIR"); got != d.Dir {
		t.Errorf("$DYNRT_DIR = %q, want %q", got, d.Dir)
	}
	c := d.Attach(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := c.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 2 {
		t.Fatalf("%d nodes, want 2", len(st.Nodes))
	}
	if st.Nodes[0].PID != os.Getpid() || st.Nodes[1].PID == os.Getpid() {
		t.Errorf("node PIDs %d, %d: want this process for node0 only", st.Nodes[0].PID, st.Nodes[1].PID)
	}
}
