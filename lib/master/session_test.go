package master

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// The session services' loop logic, driven directly (no loop, no
// network): a state with running jobs, and entries whose outcome is
// recorded.

func sessTestState(jobs map[string]int) (*state, *sessState) {
	s := &state{jobs: map[string]*job{}, m: &Master{}} // no tree (Config.TreeRadix 0)
	for ns, n := range jobs {
		j := &job{ns: ns}
		for range n {
			j.procs.add(jproc{state: wire.ProcStateRunning})
		}
		s.jobs[ns] = j
	}
	ss := &sessState{fences: map[string][]*gather{}, pending: map[string]*gather{}, groups: map[string]*group{}}
	ss.pub.init()
	return s, ss
}

// outcome records how an entry ended.
type outcome struct {
	done bool
	err  error
	data []wire.ProcKV
	cid  uint64
}

func entry(job string, rank uint32, o *outcome, data ...wire.KV) *gentry {
	e := &gentry{who: []procRef{{job, rank}}}
	if data != nil {
		e.data = []wire.ProcKV{{Job: job, Rank: rank, Data: data}}
	}
	e.finish = func(g *gather, err error) {
		*o = outcome{done: true, err: err, data: g.collected(), cid: g.cid}
	}
	return e
}

func fence(ss *sessState, s *state, job string, rank uint32, procs []wire.ProcRanges, o *outcome, data ...wire.KV) (*gentry, error) {
	e := entry(job, rank, o, data...)
	b := &wire.FenceReq{Procs: procs, Job: job}
	return e, ss.fenceEnter(s, b, e)
}

func endProc(s *state, ss *sessState, job string, rank uint32) {
	s.jobs[job].procs.at(rank).state = wire.ProcStateExited
	ss.onEvent(s, &wire.Event{Kind: wire.EvProcState, Job: job, Ranks: wire.Span(rank, rank), State: wire.ProcStateExited})
}

func TestFenceInstances(t *testing.T) {
	s, ss := sessTestState(map[string]int{"j": 3})
	var a1, b1, a2, c1 outcome
	for _, step := range []struct {
		rank uint32
		o    *outcome
	}{{0, &a1}, {1, &b1}, {0, &a2}} {
		if _, err := fence(ss, s, "j", step.rank, nil, step.o, wire.KV{Key: "k", Value: []byte{byte(step.rank)}}); err != nil {
			t.Fatal(err)
		}
	}
	if a1.done || b1.done || a2.done {
		t.Fatal("fence completed before every participant entered")
	}
	// Rank 2 completes the first instance; rank 0's second entry waits in
	// the next one.
	if _, err := fence(ss, s, "j", 2, nil, &c1, wire.KV{Key: "k", Value: []byte{2}}); err != nil {
		t.Fatal(err)
	}
	for i, o := range []outcome{a1, b1, c1} {
		if !o.done || o.err != nil || len(o.data) != 3 || o.data[0].Rank != 0 || o.data[2].Rank != 2 {
			t.Errorf("entry %d of the first instance: %+v", i, o)
		}
	}
	if a2.done {
		t.Fatal("the second instance completed with one entry")
	}
	// Rank 2 ends without entering the second instance: it fails.
	endProc(s, ss, "j", 2)
	if !a2.done || !errors.Is(a2.err, wire.ErrAborted) {
		t.Errorf("second instance after a participant ended: %+v", a2)
	}
	if len(ss.fences) != 0 {
		t.Errorf("open fences left: %v", ss.fences)
	}
	// A fence over a process that has already ended fails at once.
	var o outcome
	if _, err := fence(ss, s, "j", 0, nil, &o); err != nil {
		t.Errorf("fence over the live processes: %v", err)
	}
	if _, err := fence(ss, s, "j", 1, []wire.ProcRanges{{Ranks: wire.Span(0, 2)}}, &o); !errors.Is(err, wire.ErrAborted) {
		t.Errorf("fence with a dead participant: %v", err)
	}
	// Only participants may enter.
	if _, err := fence(ss, s, "j", 1, []wire.ProcRanges{{Ranks: wire.Span(0, 0)}}, &o); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("fence entered by an outsider: %v", err)
	}
	if _, err := fence(ss, s, "nope", 0, nil, &o); !errors.Is(err, wire.ErrNotFound) {
		t.Errorf("fence of an unknown job: %v", err)
	}
}

func TestFenceLeave(t *testing.T) {
	s, ss := sessTestState(map[string]int{"j": 2})
	sub := []wire.ProcRanges{{Ranks: wire.Span(0, 1)}}
	var a, a2, b outcome
	e, err := fence(ss, s, "j", 0, sub, &a)
	if err != nil {
		t.Fatal(err)
	}
	ss.leaveFence(e) // rank 0 gave up
	if _, err := fence(ss, s, "j", 1, sub, &b); err != nil {
		t.Fatal(err)
	}
	if a.done || b.done {
		t.Fatal("completed without rank 0")
	}
	if _, err := fence(ss, s, "j", 0, sub, &a2); err != nil {
		t.Fatal(err)
	}
	if a.done || !a2.done || !b.done || a2.err != nil || b.err != nil {
		t.Errorf("after rank 0 entered again: first %+v, second %+v, rank 1 %+v", a, a2, b)
	}
}

func TestParticipantsKey(t *testing.T) {
	s, _ := sessTestState(map[string]int{"j": 4, "k": 2})
	s.jobs["j"].procs.at(3).state = wire.ProcStateExited // not among "every live process"
	for _, tc := range []struct {
		procs []wire.ProcRanges
		want  string
		n     int
	}{
		{nil, "j=*", 3},
		{[]wire.ProcRanges{{Job: "j"}, {Ranks: wire.Span(1, 1)}}, "j=*", 3},
		{[]wire.ProcRanges{{Ranks: wire.Span(0, 1)}, {Job: "j", Ranks: wire.Span(2, 2)}}, "j=0-2", 3},
		{[]wire.ProcRanges{{Job: "k", Ranks: wire.Span(1, 1)}, {Ranks: wire.RangesOf([]uint32{2, 0})}}, "j=0,2;k=1", 3},
		{[]wire.ProcRanges{{Job: "k"}, {Ranks: wire.Span(1, 1)}}, "j=1;k=*", 3},
	} {
		spec, err := s.participants("j", tc.procs)
		if err != nil || spec.key != tc.want {
			t.Fatalf("participants(%v) = %v, %v; want key %q", tc.procs, spec, err, tc.want)
		}
		members := s.members(spec)
		if len(members) != tc.n {
			t.Errorf("participants(%v): %d members %v, want %d", tc.procs, len(members), members, tc.n)
		}
		for p, entered := range members {
			if entered || !s.procLive(p) {
				t.Errorf("member %v: entered %v, live %v", p, entered, s.procLive(p))
			}
		}
	}
	if _, err := s.participants("j", []wire.ProcRanges{{Ranks: wire.Span(3, 4)}}); !errors.Is(err, wire.ErrNotFound) {
		t.Errorf("rank beyond the job: %v", err)
	}
}

func TestGroups(t *testing.T) {
	s, ss := sessTestState(map[string]int{"j": 3})
	construct := func(rank uint32, name string, members []uint32, o *outcome) error {
		b := &wire.GroupReq{ID: name, Job: "j", Rank: rank}
		if members != nil {
			b.Procs = []wire.ProcRanges{{Ranks: wire.RangesOf(members)}}
		}
		return ss.groupEnter(s, b, entry("j", rank, o))
	}
	var g0, g1, h0, h2 outcome
	for _, err := range []error{
		construct(0, "g", []uint32{0, 1}, &g0),
		construct(0, "h", nil, &h0),
		construct(2, "h", nil, &h2),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := construct(0, "g", []uint32{0, 1}, &outcome{}); !errors.Is(err, wire.ErrExists) {
		t.Errorf("second construct by the same member: %v", err)
	}
	if err := construct(2, "g", []uint32{0, 1}, &outcome{}); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("construct by a non-member: %v", err)
	}
	if err := construct(1, "g", []uint32{0, 1}, &g1); err != nil {
		t.Fatal(err)
	}
	if !g0.done || !g1.done || g0.cid != 1 || g1.cid != 1 || h0.done {
		t.Fatalf("group g: %+v %+v; h: %+v", g0, g1, h0)
	}
	// The name is taken while a member is in the group.
	if err := construct(0, "g", []uint32{0, 1}, &outcome{}); !errors.Is(err, wire.ErrExists) {
		t.Errorf("construct of a live group: %v", err)
	}
	// A member ending before it entered fails the construct.
	endProc(s, ss, "j", 1)
	if !h0.done || !errors.Is(h0.err, wire.ErrAborted) || !h2.done {
		t.Errorf("group h after rank 1 ended: %+v %+v", h0, h2)
	}
	// Rank 1 has left g by ending; rank 0's destruct frees the name.
	destruct := func(rank uint32, name string) error {
		return ss.groupDestruct(s, &wire.GroupReq{ID: name, Job: "j", Rank: rank})
	}
	if err := destruct(0, "g"); err != nil {
		t.Fatal(err)
	}
	if err := destruct(0, "g"); !errors.Is(err, wire.ErrNotFound) {
		t.Errorf("second destruct: %v", err)
	}
	if len(ss.groups) != 0 {
		t.Errorf("groups left: %v", ss.groups)
	}
	var g2 outcome
	if err := construct(0, "g", []uint32{0}, &g2); err != nil || !g2.done || g2.cid != 2 {
		t.Errorf("construct after the destruct: %+v %v (want context id 2)", g2, err)
	}
}

// TestGroupMemberEndsAfterEntering: a construct fails when a member that
// had entered it ends (CI: synthetic's rank 0 was killed inside the first
// construct; the others waited in it for members that had gone on to the
// set after the loss, until the job's deadline).
func TestGroupMemberEndsAfterEntering(t *testing.T) {
	s, ss := sessTestState(map[string]int{"j": 3})
	var k0, k1 outcome
	for _, e := range []struct {
		rank uint32
		o    *outcome
	}{{0, &k0}, {1, &k1}} {
		if err := ss.groupEnter(s, &wire.GroupReq{ID: "k", Job: "j", Rank: e.rank}, entry("j", e.rank, e.o)); err != nil {
			t.Fatal(err)
		}
	}
	if k0.done || k1.done {
		t.Fatalf("construct k done before rank 2 entered: %+v %+v", k0, k1)
	}
	endProc(s, ss, "j", 0)
	if !k1.done || !errors.Is(k1.err, wire.ErrAborted) || !strings.Contains(k1.err.Error(), "after entering") {
		t.Errorf("construct k after rank 0 ended inside it: %+v", k1)
	}
	if len(ss.pending) != 0 {
		t.Errorf("pending constructs left: %v", ss.pending)
	}
}

func TestPubStore(t *testing.T) {
	var p pubStore
	p.init()
	a, b := procRef{"j", 0}, procRef{"k", 0}
	kv := func(k, v string) wire.KV { return wire.KV{Key: k, Value: []byte(v)} }
	var got []string
	waiter := func(rng string, keys ...string) *lookupWaiter {
		return &lookupWaiter{rng: rng, keys: keys, job: "k", reply: func(r *wire.LookupReply, err error) {
			if err != nil {
				got = append(got, fmt.Sprintf("%s: %s", keys, wire.CodeOf(err)))
				return
			}
			for _, kv := range r.Data {
				got = append(got, kv.Key+"="+string(kv.Value))
			}
		}}
	}
	check := func(want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("replies %q, want %q", got, want)
		}
		got = nil
	}

	p.lookup(waiter("dvm", "x", "y"), true)
	p.lookup(waiter("job:k", "x"), true)
	p.lookup(waiter("dvm", "x"), false)
	check(`[x]: not_found`)
	if err := p.publish("dvm", a, "", []wire.KV{kv("x", "1")}); err != nil {
		t.Fatal(err)
	}
	check() // y is still missing; the job range is another range
	if err := p.publish("dvm", a, "", []wire.KV{kv("y", "2"), kv("x", "3")}); !errors.Is(err, wire.ErrExists) {
		t.Errorf("publish over a key: %v", err)
	}
	if err := p.publish("dvm", a, "", []wire.KV{kv("z", "2"), kv("z", "3")}); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("publish of a key twice: %v", err)
	}
	if err := p.publish("dvm", b, "", []wire.KV{kv("y", "2")}); err != nil {
		t.Fatal(err)
	}
	check("x=1", "y=2")
	p.lookup(waiter("dvm", "z"), false) // the failed publishes stored nothing
	check(`[z]: not_found`)

	if err := p.unpublish("dvm", b, []string{"x"}); !errors.Is(err, wire.ErrPermission) {
		t.Errorf("unpublish of another's key: %v", err)
	}
	if err := p.unpublish("dvm", a, []string{"x", "nope"}); !errors.Is(err, wire.ErrNotFound) {
		t.Errorf("unpublish of a missing key: %v", err)
	}
	if err := p.unpublish("dvm", a, nil); err != nil {
		t.Fatal(err)
	}
	p.lookup(waiter("dvm", "x", "y"), false)
	check(`[x y]: not_found`)

	// The end of job k drops its range and its waiters, not its DVM-wide
	// entries.
	if err := p.publish("job:k", b, "", []wire.KV{kv("x", "4")}); err != nil { // answers the waiter from the start
		t.Fatal(err)
	}
	check("x=4")
	p.lookup(waiter("dvm", "never"), true)
	p.dropJob("k")
	check(`[never]: aborted`)
	p.lookup(waiter("job:k", "x"), false)
	p.lookup(waiter("dvm", "y"), false)
	check(`[x]: not_found`, "y=2")
	if _, err := rangeKey("world", "j"); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("unknown range: %v", err)
	}
}

// TestPubPersistence: how long a published name lives with each
// persistence (PMIx's PMIX_PERSISTENCE): through lookups and the end of
// the publisher's process, of another process of its job, and of its job.
func TestPubPersistence(t *testing.T) {
	for _, tc := range []struct {
		persist string
		steps   []string // "lookup" (with the result), "end j:R" (a process), "end j" (the job)
	}{
		{wire.PersistDefault, []string{"lookup found", "lookup found", "end j:0", "lookup found", "end j", "lookup found"}},
		{wire.PersistIndef, []string{"lookup found", "end j:0", "end j", "lookup found", "lookup found"}},
		{wire.PersistSession, []string{"lookup found", "end j:0", "end j", "lookup found"}},
		{wire.PersistApp, []string{"lookup found", "end j:1", "end j:0", "lookup found", "end j", "lookup not_found"}},
		{wire.PersistProc, []string{"lookup found", "end j:1", "lookup found", "end j:0", "lookup not_found"}},
		{wire.PersistFirstRead, []string{"lookup found", "lookup not_found"}},
		{wire.PersistFirstRead, []string{"end j:0", "end j", "lookup found", "lookup not_found"}},
	} {
		t.Run(tc.persist+"/"+strings.Join(tc.steps, ","), func(t *testing.T) {
			s, ss := sessTestState(map[string]int{"j": 2, "k": 1})
			if err := ss.pub.publish("dvm", procRef{"j", 0}, tc.persist, []wire.KV{{Key: "x", Value: []byte("1")}}); err != nil {
				t.Fatal(err)
			}
			for i, step := range tc.steps {
				switch {
				case strings.HasPrefix(step, "lookup "):
					got := "found"
					ss.pub.lookup(&lookupWaiter{rng: "dvm", keys: []string{"x"}, job: "k", reply: func(_ *wire.LookupReply, err error) {
						if err != nil {
							got = string(wire.CodeOf(err))
						}
					}}, false)
					if want := strings.TrimPrefix(step, "lookup "); got != want {
						t.Fatalf("step %d: lookup %s, want %s", i, got, want)
					}
				case step == "end j":
					ss.onEvent(s, &wire.Event{Kind: wire.EvJobState, Job: "j", State: wire.JobStateDone})
				case strings.HasPrefix(step, "end j:"):
					r, err := strconv.Atoi(strings.TrimPrefix(step, "end j:"))
					if err != nil {
						t.Fatal(err)
					}
					endProc(s, ss, "j", uint32(r))
				default:
					t.Fatalf("bad step %q", step)
				}
			}
		})
	}
}

// TestPubFirstReadWaiters: a first-read name published while two lookups
// wait for it answers one of them; the other waits on. A lookup that
// misses one of its keys takes no first-read key.
func TestPubFirstReadWaiters(t *testing.T) {
	var p pubStore
	p.init()
	var got []string
	waiter := func(keys ...string) *lookupWaiter {
		return &lookupWaiter{rng: "dvm", keys: keys, job: "k", reply: func(r *wire.LookupReply, err error) {
			if err != nil {
				got = append(got, fmt.Sprintf("%s: %s", keys, wire.CodeOf(err)))
				return
			}
			for _, kv := range r.Data {
				got = append(got, kv.Key+"="+string(kv.Value))
			}
		}}
	}
	w1, w2 := waiter("x"), waiter("x")
	p.lookup(w1, true)
	p.lookup(w2, true)
	if err := p.publish("dvm", procRef{"j", 0}, wire.PersistFirstRead, []wire.KV{{Key: "x", Value: []byte("1")}}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"x=1"}) || len(p.waiters) != 1 {
		t.Fatalf("after the publish: replies %q, %d waiting; want one reply x=1 and one waiting", got, len(p.waiters))
	}
	got = nil
	if err := p.publish("dvm", procRef{"j", 0}, wire.PersistFirstRead, []wire.KV{{Key: "y", Value: []byte("2")}}); err != nil {
		t.Fatal(err)
	}
	p.lookup(waiter("y", "z"), false) // z is missing: y stays
	p.lookup(waiter("y"), false)
	p.lookup(waiter("y"), false)
	if want := []string{"[y z]: not_found", "y=2", "[y]: not_found"}; !slices.Equal(got, want) {
		t.Errorf("replies %q, want %q", got, want)
	}
	if err := p.publish("dvm", procRef{"j", 0}, "forever", []wire.KV{{Key: "z", Value: []byte("3")}}); !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), `"forever"`) {
		t.Errorf("publish with an unknown persistence: %v", err)
	}
}

// BenchmarkParticipants: one daemon's entry into a fence over 65,536
// ranks named explicitly (an accept over a bound set, say). A fence over
// a job on 1,024 nodes gets one such entry per daemon, so its cost must
// not grow with the ranks the list names.
func BenchmarkParticipants(b *testing.B) {
	s, _ := sessTestState(map[string]int{"j": 65536})
	procs := []wire.ProcRanges{{Ranks: wire.Span(0, 32767)}, {Ranks: wire.Span(32768, 65535)}}
	for b.Loop() {
		if _, err := s.participants("j", procs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFenceCollect: one fence with collect over a job of 8 processes
// on each of nodes daemons, as a PMI or PMIx job's wire-up makes: every
// daemon enters once for its 8 processes with 32 bytes of data each, and
// every daemon's answer is encoded as the transport would. Each entry's
// answer used to sort and encode the whole collected data again: O(nodes²).
func BenchmarkFenceCollect(b *testing.B) {
	for _, nodes := range []int{64, 256, 1024} {
		b.Run(strconv.Itoa(nodes), func(b *testing.B) {
			const per = 8
			s, ss := sessTestState(map[string]int{"j": nodes * per})
			card := make([]byte, 32)
			var bytes int
			for b.Loop() {
				bytes = 0
				for n := range nodes {
					e := &gentry{}
					for r := n * per; r < (n+1)*per; r++ {
						e.who = append(e.who, procRef{"j", uint32(r)})
						e.data = append(e.data, wire.ProcKV{Job: "j", Rank: uint32(r), Data: []wire.KV{{Key: "card", Value: card}}})
					}
					e.finish = func(g *gather, err error) {
						if err != nil {
							b.Fatal(err)
						}
						raw, err := wire.Marshal(g.fenceAnswer(true))
						if err != nil {
							b.Fatal(err)
						}
						bytes += len(raw)
					}
					if err := ss.fenceEnter(s, &wire.FenceReq{Job: "j"}, e); err != nil {
						b.Fatal(err)
					}
				}
				if len(ss.fences) != 0 {
					b.Fatal("the fence did not complete")
				}
			}
			b.ReportMetric(float64(bytes)/float64(nodes), "B/answer")
		})
	}
}

// TestFenceAnswerMadeOnce: every entry of a fence with collect gets the
// same answer, gathered and encoded once for the instance, and it holds
// every participant's data in rank order. Making it per entry cost
// O(entries × participants) (BenchmarkFenceCollect).
func TestFenceAnswerMadeOnce(t *testing.T) {
	const daemons, per = 16, 4
	s, ss := sessTestState(map[string]int{"j": daemons * per})
	var answers []any
	for n := daemons - 1; n >= 0; n-- {
		e := &gentry{}
		for r := n * per; r < (n+1)*per; r++ {
			e.who = append(e.who, procRef{"j", uint32(r)})
			e.data = append(e.data, wire.ProcKV{Job: "j", Rank: uint32(r), Data: []wire.KV{{Key: "card", Value: []byte{byte(r)}}}})
		}
		e.finish = func(g *gather, err error) {
			if err != nil {
				t.Fatal(err)
			}
			answers = append(answers, g.fenceAnswer(true))
		}
		if err := ss.fenceEnter(s, &wire.FenceReq{Job: "j", Collect: true}, e); err != nil {
			t.Fatal(err)
		}
	}
	if len(answers) != daemons {
		t.Fatalf("%d answers for %d entries", len(answers), daemons)
	}
	for i, a := range answers[1:] {
		if a != answers[0] {
			t.Fatalf("answer %d is not the first one: the collected data was made again (%T)", i+1, a)
		}
	}
	raw, err := wire.Marshal(answers[0])
	if err != nil {
		t.Fatal(err)
	}
	var rep wire.FenceReply
	if err := wire.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Data) != daemons*per {
		t.Fatalf("answer holds %d processes' data, want %d", len(rep.Data), daemons*per)
	}
	for i, d := range rep.Data {
		if d.Rank != uint32(i) || len(d.Data) != 1 || d.Data[0].Value[0] != byte(i) {
			t.Fatalf("answer's entry %d: %+v", i, d)
		}
	}
	if a := (&gather{}).fenceAnswer(false); a == answers[0] {
		t.Error("an entry without collect got the collected data")
	}
}

// TestFenceRoutes: how the entries of a completed fence with collect get
// the data: down the tree to every daemon that keeps it once there are
// more of them than the radix; else kv.fenced only to the daemons with
// several entries; in the answer for everyone else (no kv.fenced, not
// keeping the data, or not in byConn: down, suspect, no relay address).
func TestFenceRoutes(t *testing.T) {
	conns := make([]*wire.Conn, 4)
	nodes := make([]*node, 4)
	byConn := map[*wire.Conn]*node{}
	for i := range nodes {
		conns[i] = new(wire.Conn)
		nodes[i] = &node{idx: i, name: fmt.Sprintf("n%d", i)}
		if i < 3 { // n3 cannot take kv.fenced
			byConn[conns[i]] = nodes[i]
		}
	}
	e := func(node int, stores bool) *gentry { return &gentry{conn: conns[node], stores: stores} }
	names := func(ns []*node) string {
		var out []string
		for _, n := range ns {
			out = append(out, n.name)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name    string
		entries []*gentry
		radix   int
		tree    bool
		nodes   string
		direct  int
	}{
		{"star, one entry each", []*gentry{e(0, true), e(1, true), e(2, true)}, 0, false, "", 3},
		{"star, a scout and the rest on n1", []*gentry{e(1, true), e(0, true), e(1, true)}, 0, false, "n1", 1},
		{"star, several entries, not keeping", []*gentry{e(1, false), e(1, false)}, 0, false, "", 2},
		{"tree, more daemons than the radix", []*gentry{e(2, true), e(0, true), e(1, true), e(2, true)}, 2, true, "n0,n1,n2", 0},
		{"tree, as many as the radix: a star", []*gentry{e(2, true), e(0, true), e(2, true)}, 2, false, "n2", 1},
		{"tree, one daemon cannot take it", []*gentry{e(3, true), e(3, true), e(0, true), e(1, true), e(2, true)}, 2, true, "n0,n1,n2", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree, got, per, direct := fenceRoutes(tc.entries, tc.radix, byConn)
			if tree != tc.tree || names(got) != tc.nodes || len(direct) != tc.direct {
				t.Fatalf("tree %v, kv.fenced to %q, %d answers with the data; want %v, %q, %d", tree, names(got), len(direct), tc.tree, tc.nodes, tc.direct)
			}
			// Every entry is answered exactly once, one way or the other.
			n := len(direct)
			for _, nd := range got {
				n += len(per[nd])
			}
			if n != len(tc.entries) || len(per) != len(got) {
				t.Errorf("%d answers for %d entries (%d nodes with entries, %d getting kv.fenced)", n, len(tc.entries), len(per), len(got))
			}
		})
	}
}
