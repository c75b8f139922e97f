package rc

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// finish drives an active ADD through to FINALIZED.
func finish(t *testing.T, rc *RC, ms int) {
	t.Helper()
	ranks := make([]uint32, rc.Info().N)
	for i := range ranks {
		ranks[i] = uint32(100 + i)
	}
	for _, err := range []error{
		rc.DefineDelta(at(ms), ranks, []string{setApp}),
		rc.PushJobData(at(ms)),
		rc.Announce(at(ms)),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rc.Accept(at(ms), setApp); err != nil {
		t.Fatal(err)
	}
	if err := rc.Confirm(at(ms)); err != nil {
		t.Fatal(err)
	}
}

func TestTrackerBusy(t *testing.T) {
	tr := NewTracker(app, TrackerOptions{})
	rc0, queued, err := tr.Submit(at(0), addReq())
	if err != nil || queued {
		t.Fatalf("first submit: %v queued=%v", err, queued)
	}
	if rc0.Delta() != "mpi://rte/jac/rc/0" || rc0.Seq() != 0 || tr.Active() != rc0 {
		t.Fatalf("first RC %s seq %d", rc0.Delta(), rc0.Seq())
	}
	// Busy while NULL (phase 1), ANNOUNCED and PENDING; the text names the RC.
	check := func(status string) {
		t.Helper()
		_, _, err := tr.Submit(at(1), subReq())
		if !errors.Is(err, wire.ErrBusy) {
			t.Fatalf("while %s: want ErrBusy, got %v", status, err)
		}
		for _, part := range []string{"mpi://rte/jac/rc/0", status, "ADD"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("busy error %q lacks %q", err, part)
			}
		}
	}
	check("NULL")
	_ = rc0.DefineDelta(at(1), []uint32{5, 6}, []string{setApp})
	_ = rc0.PushJobData(at(1))
	if err := rc0.Announce(at(2)); err != nil {
		t.Fatal(err)
	}
	check("ANNOUNCED")
	if _, err := rc0.Accept(at(3), setApp); err != nil {
		t.Fatal(err)
	}
	check("PENDING")
	if err := rc0.Confirm(at(4)); err != nil {
		t.Fatal(err)
	}
	if tr.Active() != nil || tr.Last() != rc0 {
		t.Fatalf("after finalize: active %v last %v", tr.Active(), tr.Last())
	}
	// A rejected (invalid) request does not use a number.
	if _, _, err := tr.Submit(at(5), Request{Type: TypeReplace}); !errors.Is(err, wire.ErrInvalid) {
		t.Fatalf("replace of nothing: %v", err)
	}
	rc1, queued, err := tr.Submit(at(6), subReq())
	if err != nil || queued || rc1.Delta() != "mpi://rte/jac/rc/1" {
		t.Fatalf("second: %v queued=%v %v", err, queued, rc1)
	}
	// Aborted also frees the job.
	if err := rc1.Abort(at(7), "cancelled"); err != nil {
		t.Fatal(err)
	}
	rc2, _, err := tr.Submit(at(8), addReq())
	if err != nil || rc2.Seq() != 2 {
		t.Fatalf("third: %v", err)
	}
	if got, err := tr.Get("mpi://rte/jac/rc/1"); err != nil || got != rc1 {
		t.Errorf("Get: %v %v", got, err)
	}
	if _, err := tr.Get("mpi://rte/jac/rc/9"); !errors.Is(err, wire.ErrNotFound) {
		t.Errorf("Get unknown: %v", err)
	}
	if all := tr.All(); len(all) != 3 || all[0] != rc0 || all[2] != rc2 {
		t.Errorf("All: %v", all)
	}
}

func TestTrackerQueue(t *testing.T) {
	tr := NewTracker(app, TrackerOptions{Queue: true, Name: func(a string, n int) string {
		return fmt.Sprintf("custom/%s/%d", a, n)
	}})
	first, queued, err := tr.Submit(at(0), addReq())
	if err != nil || queued {
		t.Fatal(err, queued)
	}
	var waiting []*RC
	for i := 1; i <= 3; i++ {
		rc, queued, err := tr.Submit(at(i), Request{Type: TypeAdd, N: i})
		if err != nil || !queued {
			t.Fatalf("submit %d: %v queued=%v", i, err, queued)
		}
		if rc.Delta() != fmt.Sprintf("custom/jac/%d", i) || rc.Status() != StatusNull {
			t.Errorf("queued RC %s %s", rc.Delta(), rc.Status())
		}
		waiting = append(waiting, rc)
	}
	if tr.Next() != nil {
		t.Fatal("Next handed out a request while one is in flight")
	}
	// Drop the second waiting request; it must be skipped.
	if err := waiting[1].Abort(at(4), "job is ending"); err != nil {
		t.Fatal(err)
	}
	if q := tr.Queued(); len(q) != 2 || q[0] != waiting[0] || q[1] != waiting[2] {
		t.Fatalf("Queued = %v", q)
	}
	finish(t, first, 5)
	// Even with nothing in flight, a new submit goes behind the queue.
	late, queued, err := tr.Submit(at(6), addReq())
	if err != nil || !queued {
		t.Fatalf("late submit: %v queued=%v", err, queued)
	}
	var order []string
	for rc := tr.Next(); rc != nil; rc = tr.Next() {
		order = append(order, rc.Delta())
		if tr.Active() != rc || tr.Next() != nil {
			t.Fatalf("%s not the only active RC", rc.Delta())
		}
		finish(t, rc, 10)
	}
	want := []string{waiting[0].Delta(), waiting[2].Delta(), late.Delta()}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if len(tr.Queued()) != 0 || tr.Active() != nil {
		t.Errorf("leftovers: queued %v active %v", tr.Queued(), tr.Active())
	}
}

// TestTrackerForget: only final changes are forgotten; numbering goes on.
func TestTrackerForget(t *testing.T) {
	tr := NewTracker(app, TrackerOptions{})
	rc0, _, err := tr.Submit(at(0), addReq())
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Forget(rc0.Delta()); !errors.Is(err, wire.ErrState) {
		t.Errorf("forget in flight: %v", err)
	}
	finish(t, rc0, 1)
	if err := tr.Forget(rc0.Delta()); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Get(rc0.Delta()); !errors.Is(err, wire.ErrNotFound) {
		t.Errorf("get after forget: %v", err)
	}
	if err := tr.Forget(rc0.Delta()); !errors.Is(err, wire.ErrNotFound) {
		t.Errorf("second forget: %v", err)
	}
	rc1, _, err := tr.Submit(at(2), addReq())
	if err != nil || rc1.Seq() != 1 || len(tr.All()) != 1 || tr.Last() != rc1 {
		t.Errorf("after forget: seq %d, %d kept, %v", rc1.Seq(), len(tr.All()), err)
	}
}
