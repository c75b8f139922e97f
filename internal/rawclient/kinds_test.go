package rawclient_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/dynrt/dynrt/internal/rawclient"
)

// TestEveryClientKind speaks every request a client sends to its daemon
// (the catalogue's client→daemon rows) with raw frames, as a client in
// another language would from docs/wire.md, and checks each answer: the
// data server (kv.put/commit/get, a collecting fence), names
// (pub.publish/lookup/unpublish), sets (pset.list/get/query/op/delete),
// groups, events (event.sub/notify/unsub), a change asked for and
// canceled by the job itself (rc.request, rc.cancel), bad input, and
// session.abort, which ends the job with the status it gives. Phase 3 and
// rc.query have their own tests (TestPhase3RawFrames, TestQueryNeedRawFrames).
func TestEveryClientKind(t *testing.T) {
	j := startPipeJob(t, 2)
	app := "mpi://app/" + j.app
	r0, r1 := j.rank(0), j.rank(1)
	must := func(what string) func(M, error) M {
		return func(rep M, err error) M {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return rep
		}
	}
	// both sends body from ranks 0 and 1 at once (a collective).
	both := func(kind string, body M) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, c := range []*rawclient.Conn{r0, r1} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = c.Call(kind, body, call)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s from rank %d: %v", kind, i, err)
			}
		}
	}

	must("kv.put")(r0.Call("kv.put", M{"k": "x", "v": []byte("42")}, call))
	must("kv.commit")(r0.Call("kv.commit", M{}, call))
	both("kv.fence", M{"id": "kinds", "c": true})
	got := must("kv.get")(r1.Call("kv.get", M{"r": 0, "k": "x"}, call))
	if v, _ := got["v"].([]byte); !bytes.Equal(v, []byte("42")) {
		t.Errorf("kv.get of rank 0's x after the fence: %v, want 42", got)
	}

	must("pub.publish")(r0.Call("pub.publish", M{"d": []M{{"k": "svc", "v": []byte("here")}}}, call))
	got = must("pub.lookup")(r1.Call("pub.lookup", M{"k": []string{"svc"}, "w": true, "tmo": 5000}, call))
	if d, _ := got["d"].([]any); len(d) != 1 || !bytes.Equal(d[0].(M)["v"].([]byte), []byte("here")) {
		t.Errorf("pub.lookup: %v, want svc=here", got)
	}
	must("pub.unpublish")(r0.Call("pub.unpublish", M{"k": []string{"svc"}}, call))
	_, err := r1.Call("pub.lookup", M{"k": []string{"svc"}}, call)
	wantCode(t, "lookup after unpublish", err, "not_found")

	got = must("pset.list")(r0.Call("pset.list", M{}, call))
	if !bytes.Contains([]byte(stringsOf(got)), []byte(app)) {
		t.Errorf("pset.list: %v, want %s in it", got, app)
	}
	got = must("pset.get")(r0.Call("pset.get", M{"n": app, "m": true}, call))
	if rawclient.Str(got, "n") != app {
		t.Errorf("pset.get %s: %v", app, got)
	}
	must("pset.query")(r1.Call("pset.query", M{"r": 1}, call))
	op := must("pset.op")(r0.Call("pset.op", M{"op": "union", "p1": app, "p2": "mpi://SELF"}, call))
	made := rawclient.Str(op, "n")
	if made == "" || made == app {
		t.Fatalf("pset.op union without a target made %v, want a new set", op)
	}
	must("pset.delete")(r0.Call("pset.delete", M{"n": made}, call))
	_, err = r0.Call("pset.get", M{"n": "not a set name"}, call)
	wantCode(t, "pset.get of a bad name", err, "invalid")

	both("group.construct", M{"id": "g"})
	both("group.destruct", M{"id": "g"})

	sub := must("event.sub")(r0.Call("event.sub", M{"k": []string{"app.notify"}}, call))
	must("event.notify")(r1.Call("event.notify", M{"msg": "hello"}, call))
	must("event.unsub")(r0.Call("event.unsub", M{"id": sub["id"]}, call))

	rec := must("rc.request")(r0.Call("rc.request", M{"t": "ADD", "n": 1}, call))
	delta := rawclient.Str(rec, "d")
	if delta == "" {
		t.Fatalf("rc.request: %v, want a change", rec)
	}
	got = must("rc.cancel")(r0.Call("rc.cancel", M{"d": delta, "why": "test"}, call))
	if rawclient.Str(got, "st") != "ABORTED" {
		t.Errorf("rc.cancel: %v, want ABORTED", got)
	}

	_, err = r0.Call("no.such.kind", M{}, call)
	wantCode(t, "an unknown kind", err, "unknown_kind")

	_, _ = r1.Call("session.abort", M{"status": 7, "msg": "raw abort"}, call)
	ctx, cancel := context.WithTimeout(context.Background(), call)
	defer cancel()
	end, err := j.c.WaitJob(ctx, j.job)
	if err != nil || end.Code != 7 {
		t.Errorf("job after session.abort with status 7: %+v %v", end, err)
	}
}

// stringsOf flattens the strings of a decoded reply, for a containment check.
func stringsOf(v any) string {
	var b bytes.Buffer
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			b.WriteString(x + "\n")
		case []any:
			for _, e := range x {
				walk(e)
			}
		case M:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return b.String()
}
