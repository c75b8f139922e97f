package session_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/wire"
)

func TestRCFailure(t *testing.T) {
	lost := wire.RangesOf([]uint32{2, 3})
	tests := []struct {
		name  string
		rec   wire.RC
		fail  bool
		ranks string
	}{
		{"a SUB by a tool", wire.RC{Type: wire.RCSub, Ranks: lost, Requester: wire.ByTool}, false, ""},
		{"a failure SUB", wire.RC{Type: wire.RCSub, Ranks: lost, Requester: wire.ByRuntime,
			Cause: &wire.RCCause{Kind: wire.CauseFailure, Ranks: lost}}, true, "2-3"},
		{"another cause", wire.RC{Type: wire.RCSub, Cause: &wire.RCCause{Kind: "drain", Ranks: lost}}, false, ""},
	}
	for _, tc := range tests {
		r := session.RC{Type: tc.rec.Type, Record: tc.rec}
		if r.Failure() != tc.fail || r.Lost().String() != tc.ranks {
			t.Errorf("%s: Failure %v Lost %q, want %v %q", tc.name, r.Failure(), r.Lost(), tc.fail, tc.ranks)
		}
	}
	due := []struct {
		status  string
		handled bool
		want    bool
	}{
		{wire.RCAnnounced, false, true},
		{wire.RCPending, false, true},
		{wire.RCAnnounced, true, false},
		{wire.RCFinalized, false, false},
		{wire.RCAborted, false, false},
	}
	for _, c := range due {
		r := session.RC{Type: wire.RCSub, Delta: "d", Status: c.status, Record: tests[1].rec}
		if got := session.FailureDue(r, func(string) bool { return c.handled }); got != c.want {
			t.Errorf("FailureDue(%s, handled %v) = %v, want %v", c.status, c.handled, got, c.want)
		}
	}
	if session.FailureDue(session.RC{Type: wire.RCSub, Status: wire.RCAnnounced, Record: tests[0].rec}, nil) {
		t.Error("FailureDue of a SUB by a tool: true")
	}
	var none *session.Session
	if _, err := none.SetAfter(context.Background(), "mpi://app/x", session.RC{Type: wire.RCNull}); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("SetAfter of no change: %v, want ErrInvalid", err)
	}
	if _, ok := session.LostCause(context.Background()); ok {
		t.Error("LostCause of a context that never ended: ok")
	}
	// An error no loss causes is returned at once, without a session
	// call; one carrying a failure change gives that change.
	var s *session.Session
	bad := wire.Errorf(wire.ErrInvalid, "a wrong result")
	if _, err := s.FailureBehind(context.Background(), context.Background(), bad, "", nil, time.Hour); err != bad {
		t.Errorf("FailureBehind(ErrInvalid) = %v, want the error itself", err)
	}
	f := session.RC{Type: wire.RCSub, Delta: "mpi://rte/app/rc/4", Record: tests[1].rec}
	if r, err := s.FailureBehind(context.Background(), context.Background(), fmt.Errorf("step 3: %w", &session.LostError{RC: f}), "", nil, time.Hour); err != nil || r.Delta != f.Delta {
		t.Errorf("FailureBehind(LostError) = %v, %v; want %s", r.Delta, err, f.Delta)
	}
}

// TestWatchFailure: processes watching for failure changes
// (Session.WatchFailure) are released when a peer is killed, with the
// failure change as the cause of their context; WaitFailure finds the
// same change, and once it is handled no other is due. The survivors
// accept it and the job ends with status 0.
func TestWatchFailure(t *testing.T) {
	d := startDVM(t, 2, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := d.c.Launch(ctx, wire.JobLaunchReq{
		Argv: []string{d.app, "lostwatch"}, N: 3, Env: d.env, OnFailure: wire.OnFailureShrink,
		Output: wire.OutputFlags{Forward: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	end := d.wait(rep.Job)
	lines := d.lines(rep.Job)
	if end.State != wire.JobStateDone || end.Code != 0 {
		t.Fatalf("job ended %s code %d: %s; output %v", end.State, end.Code, end.Msg, lines)
	}
	for _, r := range []uint32{0, 2} {
		want := []string{"lost 1 SUB true runtime", "accepted false then timeout"}
		if got := lines[r]; !slices.Equal(got, want) {
			t.Errorf("rank %d printed %q, want %q", r, got, want)
		}
	}
}
