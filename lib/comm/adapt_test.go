package comm_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// stateOf returns the STATE lines of a change.
func stateOf(ls []line, delta string) []line {
	var out []line
	for _, l := range only(ls, "STATE") {
		if l.Str("delta") == delta {
			out = append(out, l)
		}
	}
	return out
}

func deltaOf(job string, d *testDVM, n int) string {
	d.t.Helper()
	info, err := d.c.Job(context.Background(), wire.JobStateReq{Job: job})
	if err != nil {
		d.t.Fatal(err)
	}
	return fmt.Sprintf("mpi://rte/%s/rc/%d", info.App, n)
}

// TestAdapt grows a job 2→5→11 across four virtual nodes and shrinks it to
// 4: after every change all processes accept over their communicator
// (Session.Accept with Over), the new processes confirm, and everybody builds a
// communicator over the new set version and checks an allreduce over it;
// after the SUB the survivors still talk over the communicator of before.
//
// With root-last the highest member of the communicator is the root: it
// builds the new set and names it, and AcceptOptions.Root says so (v1's
// Comm.AcceptRC ignored Root, so the lowest member accepted without a
// set and the ADD failed).
func TestAdapt(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"blocking=false", nil},
		{"blocking=true", []string{"-blocking"}},
		{"root-last", []string{"-root-last"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDVM(t, 4, 4)
			args := append([]string{"-mode", "adapt", "-last", "3"}, tc.args...)
			job := d.launch(2, wire.MapBySlot, args...)
			d.waitFor(job, "READY", func(ls []line) bool { return len(only(ls, "READY")) == 2 })
			steps := []struct {
				typ     string
				n, size int
				members string
			}{
				{wire.RCAdd, 3, 5, "0-4"},
				{wire.RCAdd, 6, 11, "0-10"},
				{wire.RCSub, 7, 4, "0-3"},
			}
			for i, st := range steps {
				rc := d.request(wire.RCRequest{Job: job, Type: st.typ, N: uint32(st.n)})
				if rc.Status != wire.RCFinalized {
					t.Fatalf("change %d: %s", i+1, rc.Status)
				}
				delta := deltaOf(job, d, i+1)
				d.waitFor(job, "STATE of "+delta, func(ls []line) bool { return len(stateOf(ls, delta)) == st.size })
				sum := st.size * (st.size + 1) / 2 // job ranks 0..size-1, each +1
				for _, l := range stateOf(d.lines(job), delta) {
					if l.Num("size") != st.size || l.Num("sum") != sum || l.Str("members") != st.members || l.Num("crank") != int(l.Rank) {
						t.Errorf("change %d: rank %d reports %v", i+1, l.Rank, l.Attrs)
					}
				}
			}
			ls := d.wait(job)
			if n := len(only(ls, "LEFT")); n != 7 {
				t.Errorf("%d LEFT lines, want 7", n)
			}
			if n := len(only(ls, "DONE")); n != 4 {
				t.Errorf("%d DONE lines, want 4", n)
			}
		})
	}
}

// TestAdaptAborted: the new processes of an ADD die before confirming;
// every running member learns the abort from its accept and goes on with
// its old communicator; a SUB then still works.
func TestAdaptAborted(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"root at once", nil},
		// The members read the change as announced, the root reads it as
		// aborted: all must still meet (CI: the root returned at once
		// and the others waited for its answer until their limit).
		{"root after the abort", []string{"-root-late"}},
	} {
		t.Run(tc.name, func(t *testing.T) { adaptAborted(t, tc.args) })
	}
}

func adaptAborted(t *testing.T, args []string) {
	d := startDVM(t, 2, 4)
	job := d.launch(3, wire.MapBySlot, append([]string{"-mode", "adapt", "-last", "2", "-die-new", "3"}, args...)...)
	d.waitFor(job, "READY", func(ls []line) bool { return len(only(ls, "READY")) == 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	_, err := d.c.RequestRC(ctx, wire.RCRequest{Job: job, Type: wire.RCAdd, N: 2, Wait: true})
	if !errors.Is(err, wire.ErrAborted) {
		t.Fatalf("ADD whose processes die: %v, want aborted", err)
	}
	delta := deltaOf(job, d, 1)
	d.waitFor(job, "STATE of "+delta, func(ls []line) bool { return len(stateOf(ls, delta)) == 3 })
	for _, l := range stateOf(d.lines(job), delta) {
		if l.Str("status") != wire.RCAborted || l.Num("size") != 3 {
			t.Errorf("rank %d reports %v", l.Rank, l.Attrs)
		}
	}
	if rc := d.request(wire.RCRequest{Job: job, Type: wire.RCSub, N: 1}); rc.Status != wire.RCFinalized {
		t.Fatalf("SUB after the abort: %s", rc.Status)
	}
	ls := d.wait(job)
	if n := len(only(ls, "LEFT")); n != 1 {
		t.Errorf("%d LEFT lines, want 1", n)
	}
	if n := len(only(ls, "DONE")); n != 2 {
		t.Errorf("%d DONE lines, want 2", n)
	}
}
