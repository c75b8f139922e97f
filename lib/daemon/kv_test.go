package daemon

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/procenv"
	"github.com/dynrt/dynrt/wire"
)

// clientOf connects a client speaking as job/rank to d's client handlers
// over a pipe (no socket, no credentials check).
func clientOf(t *testing.T, d *Daemon, job string, rank uint32) *wire.Conn {
	t.Helper()
	a, b := net.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv := make(chan error, 1)
	go func() {
		c, err := wire.Accept(ctx, b, wire.AcceptPolicy{Open: true}, wire.Options{Handler: d.clients.Serve})
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		srv <- err
	}()
	c, err := wire.Client(ctx, a, wire.Hello{Role: wire.RoleClient, Name: procenv.ClientName(job, rank)}, wire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-srv; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestKVLocal drives the store for processes of this node: put, commit,
// get, a get that waits for a commit, and kv.fetch as the master sends it.
func TestKVLocal(t *testing.T) {
	d, err := newDaemon(Config{Node: "n0", Master: "/nowhere"})
	if err != nil {
		t.Fatal(err)
	}
	d.jobs["j"] = &jobCache{data: wire.JobData{Job: "j", ID: 1}, local: wire.Span(0, 1)}
	c0, c1 := clientOf(t, d, "j", 0), clientOf(t, d, "j", 1)
	ctx := context.Background()

	if err := c0.Call(ctx, wire.KindKVPut, &wire.KVPutReq{Key: "a", Value: []byte("1")}, nil); err != nil {
		t.Fatal(err)
	}
	var rep wire.KVGetReply
	if err := c1.Call(ctx, wire.KindKVGet, &wire.KVGetReq{Rank: 0, Key: "a"}, &rep); !errors.Is(err, wire.ErrNotFound) {
		t.Errorf("get before the commit: %q %v", rep.Value, err)
	}
	if err := c0.Call(ctx, wire.KindKVCommit, &wire.KVCommitReq{Data: []wire.KV{{Key: "b", Value: []byte("2")}}}, nil); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"a": "1", "b": "2"} {
		if err := c1.Call(ctx, wire.KindKVGet, &wire.KVGetReq{Rank: 0, Key: key}, &rep); err != nil || string(rep.Value) != want {
			t.Errorf("get %s: %q %v, want %q", key, rep.Value, err, want)
		}
	}

	// A get with wait is answered by the commit it waits for.
	got := make(chan error, 1)
	go func() {
		var r wire.KVGetReply
		err := c0.Call(ctx, wire.KindKVGet, &wire.KVGetReq{Rank: 1, Key: "late", Wait: true, TimeoutMS: 5000}, &r)
		if err == nil && string(r.Value) != "x" {
			err = errors.New("wrong value " + string(r.Value))
		}
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := c1.Call(ctx, wire.KindKVCommit, &wire.KVCommitReq{Data: []wire.KV{{Key: "late", Value: []byte("x")}}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Errorf("waiting get: %v", err)
	}
	if err := c0.Call(ctx, wire.KindKVGet, &wire.KVGetReq{Rank: 1, Key: "never", Wait: true, TimeoutMS: 50}, &rep); !errors.Is(err, wire.ErrTimeout) {
		t.Errorf("waiting get of a key never committed: %v", err)
	}

	// kv.fetch returns everything an owner committed, sorted by key.
	r, err := d.sess.handleFetch(ctx, nil, &wire.KVFetchReq{Procs: []wire.ProcRanges{{Job: "j", Ranks: wire.Span(0, 2)}}})
	if err != nil {
		t.Fatal(err)
	}
	f := r.(*wire.KVFetchReply)
	if len(f.Data) != 2 || f.Data[0].Rank != 0 || len(f.Data[0].Data) != 2 || f.Data[0].Data[0].Key != "a" || f.Data[1].Data[0].Key != "late" {
		t.Errorf("fetch: %+v", f.Data)
	}

	// The end of the job drops its data.
	d.dropSessionJob("j")
	if err := c1.Call(ctx, wire.KindKVGet, &wire.KVGetReq{Rank: 0, Key: "a"}, &rep); !errors.Is(err, wire.ErrNotFound) {
		t.Errorf("get after the job's end: %q %v", rep.Value, err)
	}
}

// TestClientSubMatch: a daemon routes a bus event to its clients by the
// kind and job it reads from the event's encoding.
func TestClientSubMatch(t *testing.T) {
	for _, tc := range []struct {
		sub  clientSub
		ev   wire.Event
		want bool
	}{
		{clientSub{}, wire.Event{Kind: wire.EvNodeUp}, true},
		{clientSub{kinds: []string{"proc."}}, wire.Event{Kind: wire.EvProcState}, true},
		{clientSub{kinds: []string{"proc."}}, wire.Event{Kind: wire.EvJobState}, false},
		{clientSub{job: "j"}, wire.Event{Kind: wire.EvJobState, Job: "k"}, false},
		{clientSub{job: "j", kinds: []string{"job.", "app"}}, wire.Event{Kind: wire.EvApp, Job: "j"}, true},
		{clientSub{job: "j", kinds: []string{"rc."}}, wire.Event{Seq: 9, Kind: wire.EvRCState, Job: "j", RC: &wire.RC{Job: "j", Delta: "d", Placement: []wire.Placement{{Node: "n1", Ranks: wire.Span(3, 9)}}}}, true},
		{clientSub{job: "j", kinds: []string{"rc."}}, wire.Event{Seq: 9, Kind: wire.EvRCState, Job: "k", RC: &wire.RC{Job: "k", Delta: "d"}}, false},
	} {
		// Routed by the head read from the event as the master encoded it.
		raw, err := wire.Marshal(&tc.ev)
		if err != nil {
			t.Fatal(err)
		}
		kind, job, err := wire.EventHead(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := tc.sub.match(kind, job); got != tc.want {
			t.Errorf("%+v matches %+v: %v, want %v", tc.sub, tc.ev, got, tc.want)
		}
	}
}

// Values and keys an application puts are bounded at its daemon, where
// the store lives (docs/limits.md).
func TestKVLimits(t *testing.T) {
	env := map[string]string{"DYNRT_LIMIT_VALUE_BYTES": "8", "DYNRT_LIMIT_NAME_BYTES": "4"}
	d, err := newDaemon(Config{Node: "n0", Master: "/nowhere", Env: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	d.jobs["j"] = &jobCache{data: wire.JobData{Job: "j", ID: 1}, local: wire.Span(0, 0)}
	c := clientOf(t, d, "j", 0)
	ctx := context.Background()
	tests := []struct {
		name  string
		kind  string
		body  any
		limit string // "" = accepted
	}{
		{"put within", wire.KindKVPut, &wire.KVPutReq{Key: "k", Value: []byte("12345678")}, ""},
		{"put value over", wire.KindKVPut, &wire.KVPutReq{Key: "k", Value: []byte("123456789")}, "value-bytes of 8"},
		{"put key over", wire.KindKVPut, &wire.KVPutReq{Key: "kkkkk", Value: []byte("1")}, "name-bytes of 4"},
		{"commit value over", wire.KindKVCommit, &wire.KVCommitReq{Data: []wire.KV{{Key: "b", Value: make([]byte, 9)}}}, "value-bytes of 8"},
	}
	for _, tc := range tests {
		err := c.Call(ctx, tc.kind, tc.body, nil)
		switch {
		case tc.limit == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.limit != "" && (!errors.Is(err, wire.ErrLimit) || !strings.Contains(err.Error(), tc.limit)):
			t.Errorf("%s: %v, want a limit error naming %s", tc.name, err, tc.limit)
		}
	}
}
