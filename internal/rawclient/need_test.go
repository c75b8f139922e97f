package rawclient_test

import (
	"context"
	"testing"

	"github.com/dynrt/dynrt/internal/rawclient"
	"github.com/dynrt/dynrt/wire"
)

// needQuery sends rc.query with need (docs/wire.md, RCQueryReq) from rank
// and returns the change's status and delta ("NULL" and "" without one).
func (j *pipeJob) needQuery(rank uint32, bound string) (st, delta string) {
	j.t.Helper()
	q, err := j.rank(rank).Call("rc.query", M{"need": true, "b": bound}, call)
	if err != nil {
		j.t.Fatalf("rank %d: rc.query with need: %v", rank, err)
	}
	rc := rawclient.Map(q, "rc")
	if rc == nil {
		return "NULL", ""
	}
	return rawclient.Str(rc, "st"), rawclient.Str(rc, "d")
}

// TestQueryNeedRawFrames: rc.query with need answers a change only while
// it still needs the caller (the thesis's MPI_RC_NULL), from the daemon,
// for any client: an ADD while ANNOUNCED, to a member until it starts its
// accept and to the new process until it confirms, never once FINALIZED;
// a failed accept gives the change back; an abort is reported once per
// rank, and not at all after an accept that failed with aborted.
func TestQueryNeedRawFrames(t *testing.T) {
	j := startPipeJob(t, 2) // ranks 0, 1
	app := "mpi://app/" + j.app
	want := func(what string, rank uint32, bound, st, delta string) {
		t.Helper()
		gotSt, gotDelta := j.needQuery(rank, bound)
		if gotSt != st || (delta != "" && gotDelta != delta) {
			t.Errorf("%s: rank %d got %s %s, want %s %s", what, rank, gotSt, gotDelta, st, delta)
		}
	}

	// ADD 1: rank 2.
	rec := j.request(wire.RCRequest{Type: wire.RCAdd, N: 1}, 1, 0, 1, 2)
	delta := rawclient.Str(rec, "d")
	want("announced", 0, "", "ANNOUNCED", delta)
	want("announced, asked again", 0, "", "ANNOUNCED", delta)
	want("announced, new process", 2, "mpi://SELF", "ANNOUNCED", delta)
	set := j.psetOp(0, "union", app, delta)
	reps, errs := j.acceptAll(map[uint32]M{0: {"d": delta, "set": set}, 1: {"d": delta}})
	wantReplies(t, "accept", reps, errs, "PENDING", set)
	want("after the accept", 0, "", "NULL", "")
	want("after the accept", 1, "mpi://SELF", "NULL", "")
	want("pending, not confirmed", 2, "mpi://SELF", "PENDING", delta)
	if q, err := j.rank(0).Call("rc.query", M{}, call); err != nil || rawclient.Str(rawclient.Map(q, "rc"), "st") != "PENDING" {
		t.Errorf("without need: %v %v, want the PENDING record", q, err)
	}
	if _, err := j.rank(2).Call("rc.confirm", M{"d": delta}, call); err != nil {
		t.Fatal(err)
	}
	want("confirmed", 2, "mpi://SELF", "NULL", "")
	j.queryUntil(0, delta, func(st string) bool { return st == "FINALIZED" })
	want("finalized", 0, "", "NULL", "")
	want("finalized", 1, "", "NULL", "")

	// ADD 1 (rank 3), which rank 1 tries to accept alone and the test
	// then cancels.
	rec = j.request(wire.RCRequest{Type: wire.RCAdd, N: 1}, 1, 0, 1, 2, 3)
	delta = rawclient.Str(rec, "d")
	_, err := j.rank(1).Call("rc.accept", M{"d": delta, "tmo": 200}, call)
	wantCode(t, "lonely accept", err, "timeout")
	want("after a failed accept", 1, "", "ANNOUNCED", delta)
	ctx, cancel := context.WithTimeout(context.Background(), call)
	defer cancel()
	if _, err := j.c.CancelRC(ctx, delta, "the test cancels it"); err != nil {
		t.Fatal(err)
	}
	// (The new process of the aborted ADD is stopped: ranks 0 and 1 ask.)
	for _, r := range []uint32{0, 1} {
		j.queryUntil(r, delta, func(st string) bool { return st == "ABORTED" })
	}
	want("aborted", 0, "", "ABORTED", delta)
	want("aborted, asked again", 0, "", "NULL", "")
	_, err = j.rank(1).Call("rc.accept", M{"d": delta}, call)
	wantCode(t, "accept after the abort", err, "aborted")
	want("told by the accept", 1, "", "NULL", "")
}
