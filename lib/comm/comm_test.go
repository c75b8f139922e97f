package comm_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/wire"
)

// TestCollectives runs every operation over the whole job at several sizes,
// on one node and across four, over unix sockets and over TCP.
func TestCollectives(t *testing.T) {
	d := startDVM(t, 4, 16)
	for _, tc := range []struct {
		n     int
		mapBy string
		tcp   bool
	}{
		{1, wire.MapBySlot, false},
		{2, wire.MapBySlot, false},
		{7, wire.MapByNode, false},
		{7, wire.MapByNode, true},
		{16, wire.MapBySlot, false},
		{64, wire.MapBySlot, false},
	} {
		t.Run(fmt.Sprintf("n=%d/%s/tcp=%v", tc.n, tc.mapBy, tc.tcp), func(t *testing.T) {
			d.t = t
			args := []string{"-mode", "check"}
			if tc.tcp {
				args = append(args, "-tcp")
			}
			ok := only(d.run(tc.n, tc.mapBy, args...), "OK")
			if len(ok) != tc.n {
				t.Fatalf("%d OK lines, want %d", len(ok), tc.n)
			}
			cids := map[int]bool{}
			for _, l := range ok {
				if l.Num("size") != tc.n || l.Num("crank") != int(l.Rank) {
					t.Errorf("rank %d: communicator rank %d of %d", l.Rank, l.Num("crank"), l.Num("size"))
				}
				cids[l.Num("cid")] = true
			}
			if len(cids) != 1 {
				t.Errorf("context ids %v: want one for all", cids)
			}
		})
	}
}

// TestHoles builds a communicator over a set whose job ranks have gaps
// (the processes off node 0, mapped round robin): ranks follow the job
// ranks in order.
func TestHoles(t *testing.T) {
	d := startDVM(t, 4, 4)
	ls := only(d.run(10, wire.MapByNode, "-mode", "holes"), "OK")
	if len(ls) != 10 {
		t.Fatalf("%d OK lines, want 10", len(ls))
	}
	var members []int
	for _, l := range ls {
		if l.Attrs["member"] == true {
			members = append(members, int(l.Rank))
			if l.Str("members") != "1-3,5-7,9" || l.Num("size") != 7 {
				t.Errorf("rank %d: members %s size %d", l.Rank, l.Str("members"), l.Num("size"))
			}
		}
	}
	slices.Sort(members)
	if !slices.Equal(members, []int{1, 2, 3, 5, 6, 7, 9}) {
		t.Errorf("members %v", members)
	}
	for _, l := range ls {
		if l.Attrs["member"] == true && l.Num("crank") != slices.Index(members, int(l.Rank)) {
			t.Errorf("rank %d has communicator rank %d", l.Rank, l.Num("crank"))
		}
	}
}

// TestOverlap: two communicators over overlapping sets, built with the
// same tag string and used with the same user tags, never mix messages.
func TestOverlap(t *testing.T) {
	d := startDVM(t, 2, 4)
	ls := only(d.run(8, wire.MapByNode, "-mode", "overlap"), "OK")
	if len(ls) != 8 {
		t.Fatalf("%d OK lines, want 8", len(ls))
	}
	in := 0
	for _, l := range ls {
		if l.Attrs["member"] == true {
			in++
			// All 8 ranks (sum of rank+1 = 36) and the odd ones ×2.
			if l.Num("sa") != 36 || l.Num("sb") != 2*(2+4+6+8) {
				t.Errorf("rank %d: sums %d %d", l.Rank, l.Num("sa"), l.Num("sb"))
			}
		}
	}
	if in != 4 {
		t.Errorf("%d members of the second communicator, want 4", in)
	}
}

// TestPeerKilled pins what lib/comm does when a peer is killed with
// SIGKILL (docs/comm.md "Failure behaviour"): a receive from it, a send and
// an isend to it fail with a closed-connection error, whether the survivor
// had a connection to it or not (3 virtual nodes × 2 slots, rank 5
// killed); an allreduce over the communicator that still holds it fails on
// every survivor instead of waiting; a receive from any rank cannot know
// that the dead one was to send and waits for its limit. Nothing waits
// for the endpoint's timeout (which would show as "timeout").
func TestPeerKilled(t *testing.T) {
	d := startDVM(t, 3, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := d.c.Launch(ctx, wire.JobLaunchReq{
		Argv: []string{d.app, "-mode", "killed"}, N: 6, Env: d.env, Output: wire.OutputFlags{Forward: true},
		OnFailure: wire.OnFailureContinue, // the job outlives the kill
	})
	if err != nil {
		t.Fatal(err)
	}
	dvmtest.WaitJob(t, d.c, rep.Job, 60*time.Second)
	ls := only(d.lines(rep.Job), "KILLED")
	if len(ls) != 5 {
		t.Fatalf("%d KILLED lines, want one per survivor: %v", len(ls), ls)
	}
	want := map[string]string{"recv": "closed", "send": "closed", "isend": "closed", "any": "timeout"}
	for _, l := range ls {
		for k, v := range want {
			if got := l.Str(k); got != v {
				t.Errorf("rank %d: %s gave %q, want %q", l.Rank, k, got, v)
			}
		}
		if got := l.Str("allreduce"); got == "ok" || got == "timeout" {
			t.Errorf("rank %d: allreduce with the killed rank gave %q, want an error at once", l.Rank, got)
		}
	}
}

// TestPeerExit: a process of the communicator exits; a receive from it
// fails with a closed-connection error instead of waiting, and the others
// still talk.
func TestPeerExit(t *testing.T) {
	d := startDVM(t, 1, 3)
	ls := d.run(3, wire.MapBySlot, "-mode", "exit")
	if n := len(only(ls, "OK")); n != 2 {
		t.Errorf("%d OK lines, want 2", n)
	}
	gone := only(ls, "GONE")
	if len(gone) != 1 || !strings.Contains(gone[0].Str("err"), "rank 2") {
		t.Errorf("GONE lines %v: want one naming rank 2", gone)
	}
}

// TestAgreementMemberGone: a member leaves an agreement (the accept over a
// communicator) after its part of the fan-in; the root, whose decision
// (the accept) the runtime has recorded, gets it as its answer although
// its broadcast to the gone member fails, and the other member gets it
// too. The root used to return the broadcast's error, so an application
// did not record a change the runtime had made (seen as a missing failure
// change in TestSurviveFailures of examples/synthetic).
func TestAgreementMemberGone(t *testing.T) {
	d := startDVM(t, 1, 3)
	ls := only(d.run(3, wire.MapBySlot, "-mode", "agreegone"), "AGREED")
	if len(ls) != 2 {
		t.Fatalf("AGREED lines %v: want ranks 0 and 1", ls)
	}
	for _, l := range ls {
		if l.Str("b") != "decided" {
			t.Errorf("rank %d agreed on %q, want the root's decision", l.Rank, l.Str("b"))
		}
	}
}
