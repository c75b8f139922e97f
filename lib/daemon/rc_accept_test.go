package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// TestAbortSeen: a process's accept or confirm answered with "aborted"
// returns only once the daemon's own copy of the change says ABORTED: the
// master pushes the reverted job data before that record, so the process
// then finds the job as the abort left it (its size), never as the change
// had made it. Other errors, and changes this daemon has no record of,
// return at once.
func TestAbortSeen(t *testing.T) {
	d, err := newDaemon(Config{Node: "n0", Master: "/nowhere"})
	if err != nil {
		t.Fatal(err)
	}
	const delta = "mpi://rte/j/rc/1"
	d.jobs["j"] = &jobCache{data: wire.JobData{Job: "j", ID: 1}}
	push := func(status string, seq uint64) {
		t.Helper()
		if _, err := d.handleRCPush(context.Background(), nil, &wire.RC{Delta: delta, Job: "j", Type: wire.RCAdd, Status: status, Seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	aborted := wire.Errorf(wire.ErrAborted, "master: resource change %s was aborted: not confirmed", delta)

	// No record here: nothing to wait for.
	done := make(chan struct{})
	go func() { d.abortSeen(context.Background(), aborted, "j", delta); close(done) }()
	waitClosed(t, done, "abortSeen without a record")

	push(wire.RCPending, 1)
	for _, err := range []error{nil, wire.Errorf(wire.ErrTimeout, "timed out")} {
		done := make(chan struct{})
		go func() { d.abortSeen(context.Background(), err, "j", delta); close(done) }()
		waitClosed(t, done, "abortSeen of another outcome")
	}

	done = make(chan struct{})
	go func() { d.abortSeen(context.Background(), aborted, "j", delta); close(done) }()
	select {
	case <-done:
		t.Fatal("abortSeen returned while the daemon's record still says PENDING")
	case <-time.After(100 * time.Millisecond):
	}
	push(wire.RCAborted, 2)
	waitClosed(t, done, "abortSeen after the ABORTED record")
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return", what)
	}
}
