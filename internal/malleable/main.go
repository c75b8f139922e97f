// Command malleable is a malleable test application on lib/session, after
// thesis listing 6.7: it adapts to every resource change bound to its set
// (phase 2: one set operation by the root; phase 3: accept, or confirm for
// the processes an ADD started) and reports what it sees. The tests of the
// resource changes launch it on a DVM and read its output; it never polls:
// it waits for the runtime's rc.state and rc.update events.
//
// Every line it prints is a word and a JSON object:
//
//	CONFIRMED  a new process confirmed (rank, delta, set, version)
//	STATE      a change this process took part in ended (rank, delta,
//	           status, set, version, members, size, epoch, and the job data
//	           of the daemon: jobsize, node, peers; with -quiet only rank,
//	           delta, status and t, the time it was back at work)
//	LEFT       a SUB removed this process, or a REPLACE replaced it (it exits 0)
//	DONE       the process ends after change -last
//	OPS/FINAL  the -psetstress results
//	BENCH      the -bench results of rank 0 (mean, median, p90 in ns)
//	ERROR      a check failed (exit code 1)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/wire"
)

type config struct {
	last      int    // exit once change number last has ended
	requests  string // changes rank 0 asks for itself: "add:2,sub:1"
	blocking  bool   // wait for the accept request at once
	noConfirm bool   // new processes never confirm
	dieNew    int    // new processes exit with this code before confirming (0: off)
	linger    bool   // removed processes stay (and ignore SIGTERM)
	leftCode  int    // removed processes exit with this code after leaving
	quiet     bool   // STATE lines without the set and job data (no queries: for benchmarks)
	split     bool   // start by splitting the application set in two active sets
	splitNode bool   // start by splitting the application set by node (SPLIT), one active set per node
	stress    int    // -psetstress K: K toggles of the shared set per process, then exit
	bench     string // -bench query|lookup|psetop: rank 0 times benchN calls, then exit
	benchN    int
	timeout   time.Duration // overall limit
	wireup    bool          // the launch's processes wire up first, as an MPI library does (wireUp)
}

func main() {
	var c config
	flag.IntVar(&c.last, "last", 0, "exit once change number N has ended")
	flag.StringVar(&c.requests, "requests", "", "changes rank 0 requests itself, e.g. add:2,sub:1")
	flag.BoolVar(&c.blocking, "blocking", false, "wait for the accept request at once (else test it first)")
	flag.BoolVar(&c.noConfirm, "no-confirm", false, "new processes never confirm")
	flag.IntVar(&c.dieNew, "die-new", 0, "new processes exit with this code before confirming")
	flag.BoolVar(&c.linger, "linger", false, "removed processes stay and ignore SIGTERM")
	flag.IntVar(&c.leftCode, "left-code", 0, "removed processes exit with this code after leaving")
	flag.BoolVar(&c.quiet, "quiet", false, "STATE lines without set and job data")
	flag.BoolVar(&c.split, "split", false, "split the application set into two active sets first")
	flag.BoolVar(&c.splitNode, "split-node", false, "split the application set by node first (one active set per node)")
	flag.IntVar(&c.stress, "psetstress", 0, "toggle the shared set K times, then exit")
	flag.StringVar(&c.bench, "bench", "", "query, lookup or psetop: rank 0 times -n calls, then exit")
	flag.IntVar(&c.benchN, "n", 1000, "calls of -bench")
	flag.DurationVar(&c.timeout, "timeout", 60*time.Second, "overall limit")
	flag.BoolVar(&c.wireup, "wireup", false, "the launch's processes first commit a value, fence with collect and check a peer's (a wrong value exits 7)")
	idle := flag.Bool("idle", false, "no session: print a line, exit when stdin closes (the exit floor of the benchmarks)")
	flag.Parse()
	if *idle {
		fmt.Println("READY")
		_, _ = io.Copy(io.Discard, os.Stdin)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if err := run(ctx, c); err != nil {
		fmt.Println("ERROR", jsonOf(map[string]any{"rank": os.Getenv("DYNRT_RANK"), "err": err.Error()}))
		os.Exit(1)
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func say(word string, v map[string]any) { fmt.Println(word, jsonOf(v)) }

type proc struct {
	c    config
	s    *session.Session
	me   uint32
	app  string
	main wire.PsetRef // the set this process works with
	wake chan struct{}
}

func run(ctx context.Context, c config) error {
	s, err := session.Init(ctx)
	if err != nil {
		return err
	}
	p := &proc{c: c, s: s, me: s.Rank(), app: s.App(), wake: make(chan struct{}, 1)}
	if c.stress > 0 || c.bench != "" {
		var err error
		if c.bench != "" {
			err = p.benchmark(ctx)
		} else {
			err = p.psetStress(ctx)
		}
		if ferr := s.Finalize(ctx); err == nil {
			err = ferr
		}
		return err
	}
	if _, err := s.SubscribeRC(ctx, func(wire.RC) {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}); err != nil {
		return err
	}
	p.main = wire.PsetRef{Name: session.AppSet(p.app)}

	// A process started by an ADD or a REPLACE confirms first (listing 6.7).
	q, err := s.QueryRC(ctx, session.QueryOptions{Bound: session.Self})
	if err != nil {
		return err
	}
	if q.Status == wire.RCAborted {
		// A change aborted before this process looked: QueryRC reports
		// that once, here.
		if err := p.report(ctx, q.Delta, wire.RCAborted); err != nil {
			return err
		}
	}
	if q.Incl && (q.Type == wire.RCAdd || q.Type == wire.RCReplace) && (q.Status == wire.RCAnnounced || q.Status == wire.RCPending) {
		switch {
		case c.noConfirm:
			<-ctx.Done()
			return errors.New("never confirmed and never killed")
		case c.dieNew != 0:
			os.Exit(c.dieNew)
		}
		set, err := s.Confirm(ctx, q.Delta, session.ConfirmOptions{})
		if err != nil {
			return fmt.Errorf("confirm %s: %w", q.Delta, err)
		}
		p.main = set
		say("CONFIRMED", map[string]any{"rank": p.me, "delta": q.Delta, "set": set.Name, "version": set.Version})
		if err := p.report(ctx, q.Delta, wire.RCFinalized); err != nil {
			return err
		}
	} else {
		if c.wireup {
			if err := p.wireUp(ctx); err != nil {
				return err
			}
		}
		switch {
		case c.split:
			if err := p.splitSets(ctx); err != nil {
				return err
			}
		case c.splitNode:
			if err := p.splitByNode(ctx); err != nil {
				return err
			}
		}
	}
	if c.requests != "" && p.me == 0 && q.Type == wire.RCNull {
		go p.request(ctx)
	}

	for {
		r, err := s.QueryRC(ctx, session.QueryOptions{Bound: p.main.Name})
		if err != nil {
			return err
		}
		// QueryRC reports a change only while it needs this process
		// (announced or pending, not accepted yet), or once aborted.
		if !r.Null() && (r.Status == wire.RCAnnounced || r.Status == wire.RCPending) {
			left, err := p.adapt(ctx, r)
			if err != nil {
				return err
			}
			if left {
				return nil
			}
			continue
		}
		if r.Status == wire.RCAborted {
			// Aborted before this process took part: it learns it here.
			if err := p.report(ctx, r.Delta, wire.RCAborted); err != nil {
				return err
			}
		}
		if end, err := p.ended(ctx); err != nil || end != "" {
			if err == nil {
				say("DONE", map[string]any{"rank": p.me, "set": p.main.Name, "version": p.main.Version, "last": end})
				err = s.Finalize(ctx)
			}
			return err
		}
		select {
		case <-p.wake:
		case <-ctx.Done():
			return fmt.Errorf("still waiting for change %d: %w", p.c.last, ctx.Err())
		}
	}
}

// ended returns the final status of change number last ("" while it has
// not ended).
func (p *proc) ended(ctx context.Context) (string, error) {
	if p.c.last <= 0 {
		return "", nil
	}
	r, err := p.s.QueryRC(ctx, session.QueryOptions{Delta: deltaName(p.app, p.c.last)})
	if errors.Is(err, wire.ErrNotFound) {
		return "", nil
	}
	if err != nil || (r.Status != wire.RCFinalized && r.Status != wire.RCAborted) {
		return "", err
	}
	return r.Status, nil
}

func deltaName(app string, n int) string { return "mpi://rte/" + app + "/rc/" + strconv.Itoa(n) }

// adapt runs phases 2 and 3 of one change; left reports that a SUB removed
// this process (it has finalized its session).
func (p *proc) adapt(ctx context.Context, r session.RC) (bool, error) {
	s := p.s
	t0 := time.Now()
	bound := p.main.Name
	var ref wire.PsetRef
	for _, b := range r.Record.BoundRefs {
		if b.Name == bound {
			ref = b
		}
	}
	members, err := s.Members(ctx, ref)
	if err != nil {
		return false, err
	}
	var newSet session.SetVersion
	if p.me == members[0].Lo {
		// ADD: UNION(set, delta); SUB: DIFFERENCE(set, delta); REPLACE:
		// UNION with the delta, then DIFFERENCE with the replaced set (in
		// the other order a set all of whose members are replaced would
		// be empty in between, which no set can be).
		type step struct{ op, with string }
		steps := []step{{session.OpUnion, r.Delta}}
		switch r.Type {
		case wire.RCSub:
			steps = []step{{session.OpDifference, r.Delta}}
		case wire.RCReplace:
			steps = []step{{session.OpUnion, r.Delta}, {session.OpDifference, r.Record.OutSet}}
		}
		// A change aborted meanwhile refuses the operation (ErrAborted):
		// then the root accepts without a set and every member learns the
		// abort from the accept.
		for _, st := range steps {
			res, err := s.PsetOp(ctx, st.op, bound, st.with, session.PsetOpOptions{Target: bound})
			if err == nil {
				newSet = res.Ref()
				continue
			}
			newSet = session.SetVersion{}
			if !errors.Is(err, wire.ErrAborted) {
				return false, fmt.Errorf("%s(%s, %s): %w", st.op, bound, st.with, err)
			}
			break
		}
	}
	req := s.Accept(ctx, r.Delta, session.AcceptOptions{Bound: bound, NewSet: newSet})
	acc, err := p.finish(ctx, req)
	if errors.Is(err, wire.ErrAborted) {
		return false, p.report(ctx, r.Delta, wire.RCAborted)
	}
	if err != nil {
		return false, fmt.Errorf("accept %s: %w", r.Delta, err)
	}
	if acc.Terminate {
		say("LEFT", map[string]any{"rank": p.me, "delta": r.Delta, "t_seen": t0.UnixNano(), "t_accepted": time.Now().UnixNano()})
		if p.c.linger {
			signal.Ignore(syscall.SIGTERM)
			<-ctx.Done()
			return true, errors.New("lingered until the end")
		}
		if p.c.leftCode != 0 {
			_ = s.Finalize(ctx)
			os.Exit(p.c.leftCode)
		}
		return true, s.Finalize(ctx)
	}
	if acc.NewSet.Name != "" {
		p.main = acc.NewSet
	}
	return false, p.report(ctx, r.Delta, acc.Status)
}

// finish completes an accept: with -blocking it waits at once; otherwise
// it tests the request first (the way a program that goes on working
// would look at it) and then waits.
func (p *proc) finish(ctx context.Context, req *session.AcceptRequest) (session.AcceptResult, error) {
	if !p.c.blocking {
		if res, done, err := req.Test(); done {
			return res, err
		}
	}
	return req.Wait(ctx)
}

// report prints the STATE line of a change this process took part in.
func (p *proc) report(ctx context.Context, delta, status string) error {
	s := p.s
	if p.c.quiet {
		// t: when this process is back at work after the change (the
		// failure benchmarks read it).
		say("STATE", map[string]any{"rank": p.me, "delta": delta, "status": status, "t": time.Now().UnixNano()})
		return nil
	}
	r, err := s.QueryRC(ctx, session.QueryOptions{Delta: delta})
	if err != nil {
		return err
	}
	if r.Status == wire.RCFinalized || r.Status == wire.RCAborted {
		status = r.Status
	}
	out := map[string]any{"rank": p.me, "delta": delta, "status": status}
	if status != wire.RCAborted {
		set, err := s.PsetInfo(ctx, p.main.String())
		if err != nil {
			return err
		}
		out["set"], out["version"], out["members"], out["size"], out["epoch"] = set.Name, set.Version, set.Members.String(), set.Size, set.Epoch
	}
	in, err := s.JobInfo(ctx)
	if err != nil {
		return err
	}
	out["jobsize"], out["node"], out["peers"] = in.Size, in.Node, in.LocalPeers.String()
	say("STATE", out)
	return nil
}

// request asks for the -requests changes, one after the other (queued:
// each waits for the previous to settle).
func (p *proc) request(ctx context.Context) {
	for _, item := range strings.Split(p.c.requests, ",") {
		typ, ns, _ := strings.Cut(item, ":")
		n, _ := strconv.Atoi(ns)
		_, err := p.s.RequestRC(ctx, typ, n, session.RequestOptions{Queue: true})
		// Rank 0 may ask before the other ranks are all started (a slow
		// node): the runtime refuses changes of a job still being
		// launched, so ask again until it runs.
		for errors.Is(err, wire.ErrState) && strings.Contains(err.Error(), "still being launched") && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			_, err = p.s.RequestRC(ctx, typ, n, session.RequestOptions{Queue: true})
		}
		if err != nil {
			fmt.Println("ERROR", jsonOf(map[string]any{"rank": p.me, "err": "request " + item + ": " + err.Error()}))
			os.Exit(1)
		}
	}
}

// wireUpWrong is the exit status of a process that read a wrong value
// after a fence with collect: no fault explains it (the chaos harness's
// exit rule), so it counts as a violation.
const wireUpWrong = 7

// wireUp does what an MPI library does at start through PMI: every process
// of the launch commits a value, all of them fence with collect (the data
// then goes to every daemon, down the tree when there is one), and each
// reads its neighbour's value from its daemon. A fence a fault breaks (a
// participant ended or was stopped past the limit) is reported and
// skipped; a wrong value after a fence that succeeded is a runtime bug.
func (p *proc) wireUp(ctx context.Context) error {
	s := p.s
	n := uint32(s.Size())
	if n == 0 || p.me >= n {
		say("WIREUP", map[string]any{"rank": p.me, "skipped": fmt.Sprintf("told a job size of %d at init", n)})
		return nil
	}
	value := func(rank uint32) string { return "addr-of-" + strconv.FormatUint(uint64(rank), 10) }
	if err := s.Put("wireup", []byte(value(p.me))); err != nil {
		return err
	}
	if err := s.Commit(ctx); err != nil {
		return err
	}
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err := s.FenceWith(fctx, session.FenceOptions{ID: "wireup", Procs: []wire.ProcRanges{{Ranks: wire.Span(0, n-1)}}, Collect: true})
	if err != nil {
		say("WIREUP", map[string]any{"rank": p.me, "fence": err.Error(), "code": string(wire.CodeOf(err)), "over": wire.Span(0, n-1).String()})
		return nil
	}
	peer := (p.me + 1) % n
	got, err := s.Get(fctx, peer, "wireup")
	switch {
	case err != nil:
		say("WIREUP", map[string]any{"rank": p.me, "peer": peer, "get": err.Error()})
	case string(got) != value(peer):
		say("WIREUP", map[string]any{"rank": p.me, "peer": peer, "got": string(got), "want": value(peer)})
		os.Exit(wireUpWrong)
	default:
		say("WIREUP", map[string]any{"rank": p.me, "peer": peer, "ok": true})
	}
	return nil
}

// splitSets makes mpi://app/<app>/a (the processes on rank 0's node) and
// mpi://app/<app>/b (the others) and the application set inactive, so
// that a and b are both malleable; every process then works with its
// part.
func (p *proc) splitSets(ctx context.Context) error {
	s := p.s
	a, b := session.AppSet(p.app)+"/a", session.AppSet(p.app)+"/b"
	if p.me == 0 {
		if _, err := s.PsetOp(ctx, session.OpUnion, session.Shared, session.Shared, session.PsetOpOptions{Target: a}); err != nil {
			return err
		}
		if _, err := s.PsetOp(ctx, session.OpDifference, session.AppSet(p.app), a, session.PsetOpOptions{Target: b}); err != nil {
			return err
		}
		no := false
		if _, err := s.PsetOp(ctx, session.OpNull, "", "", session.PsetOpOptions{Target: session.AppSet(p.app), Active: &no}); err != nil {
			return err
		}
	}
	if err := s.Fence(ctx, nil, false); err != nil {
		return err
	}
	pa, err := s.PsetInfo(ctx, a)
	if err != nil {
		return err
	}
	p.main = wire.PsetRef{Name: b}
	if pa.Members.Contains(p.me) {
		p.main = wire.PsetRef{Name: a}
	}
	say("SPLIT", map[string]any{"rank": p.me, "set": p.main.Name})
	return nil
}

// splitByNode is the recipe of docs/rc.md ("Bind a change to a sub-set"):
// rank 0 splits the application set by node into the active sets
// mpi://app/<app>/node/<i> (SPLIT) and makes the application set
// inactive, so that each part is malleable on its own; every process then
// works with the part that holds it.
func (p *proc) splitByNode(ctx context.Context) error {
	s := p.s
	app := session.AppSet(p.app)
	if p.me == 0 {
		yes, no := true, false
		parts, err := s.Split(ctx, app, session.SplitOptions{ByNode: true, Target: app + "/node", Active: &yes})
		if err != nil {
			return err
		}
		out := make([]map[string]any, len(parts))
		for i, pt := range parts {
			out[i] = map[string]any{"name": pt.Name, "version": pt.Version, "members": pt.Members.String(), "node": pt.Node, "active": pt.Active}
		}
		// Requests the runtime must refuse, for the tests to read.
		var refused []string
		for _, o := range []session.SplitOptions{{Parts: 1, ByNode: true}, {}, {Parts: 100}, {Ranks: []wire.RankRanges{parts[0].Members}}} {
			_, err := s.Split(ctx, app, o)
			refused = append(refused, fmt.Sprint(err))
		}
		_, err = s.Split(ctx, session.Self, session.SplitOptions{Parts: 1, Target: app + "/me", Active: &no})
		refused = append(refused, fmt.Sprint(err))
		say("SPLITPARTS", map[string]any{"rank": p.me, "parts": out, "refused": refused})
		if _, err := s.PsetOp(ctx, session.OpNull, "", "", session.PsetOpOptions{Target: app, Active: &no}); err != nil {
			return err
		}
	}
	if err := s.Fence(ctx, nil, false); err != nil {
		return err
	}
	for i := 0; ; i++ {
		part, err := s.PsetInfo(ctx, app+"/node/"+strconv.Itoa(i))
		if err != nil {
			return fmt.Errorf("no part of the split holds rank %d: %w", p.me, err)
		}
		if part.Members.Contains(p.me) {
			p.main = wire.PsetRef{Name: part.Name}
			break
		}
	}
	say("SPLIT", map[string]any{"rank": p.me, "set": p.main.Name})
	return nil
}

// psetStress: rank 0 creates mpi://app/<app>/common = {0}; every other
// rank then adds and removes itself c.stress times, all at once. Every
// operation changes the members, so the versions returned must be all
// different; afterwards every daemon must show the same final set.
func (p *proc) psetStress(ctx context.Context) error {
	s := p.s
	common := session.AppSet(p.app) + "/common"
	if p.me == 0 {
		if _, err := s.PsetOp(ctx, session.OpUnion, session.Self, session.Self, session.PsetOpOptions{Target: common}); err != nil {
			return err
		}
	}
	if err := s.Fence(ctx, nil, false); err != nil {
		return err
	}
	var versions []uint32
	if p.me != 0 {
		// Two goroutines per process: more requests in flight at once.
		var mu sync.Mutex
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		own := session.AppSet(p.app) + "/own" + strconv.FormatUint(uint64(p.me), 10)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range p.c.stress {
				op := session.OpUnion
				if i%2 == 1 {
					op = session.OpDifference
				}
				res, err := s.PsetOp(ctx, op, common, session.Self, session.PsetOpOptions{Target: common})
				if err != nil {
					errs <- err
					return
				}
				if res.Members.Contains(p.me) != (op == session.OpUnion) {
					errs <- fmt.Errorf("%s of rank %d gave members %s", op, p.me, res.Members)
					return
				}
				mu.Lock()
				versions = append(versions, res.Version)
				mu.Unlock()
			}
		}()
		go func() {
			defer wg.Done()
			for i := range p.c.stress {
				res, err := s.PsetOp(ctx, session.OpUnion, session.Self, session.Self, session.PsetOpOptions{Target: own})
				if err != nil {
					errs <- err
					return
				}
				if res.Version != 0 || res.Size != 1 {
					errs <- fmt.Errorf("own set op %d: version %d size %d, want 0 and 1", i, res.Version, res.Size)
					return
				}
			}
		}()
		wg.Wait()
		select {
		case err := <-errs:
			return err
		default:
		}
		if p.c.stress%2 == 1 {
			// Leave the set as it started.
			res, err := s.PsetOp(ctx, session.OpDifference, common, session.Self, session.PsetOpOptions{Target: common})
			if err != nil {
				return err
			}
			versions = append(versions, res.Version)
		}
	}
	slices.Sort(versions)
	vs := make([]string, len(versions))
	for i, v := range versions {
		vs[i] = strconv.FormatUint(uint64(v), 10)
	}
	say("OPS", map[string]any{"rank": p.me, "versions": strings.Join(vs, ",")})
	if err := s.Fence(ctx, nil, false); err != nil {
		return err
	}
	fin, err := s.PsetInfo(ctx, common)
	if err != nil {
		return err
	}
	say("FINAL", map[string]any{"rank": p.me, "version": fin.Version, "members": fin.Members.String(), "node": s.Node()})
	return nil
}

// benchmark times c.benchN calls on rank 0: an RC query (answered by the
// daemon), a lookup of a published key (relayed to the master: the floor
// of every call the daemon relays), or a set operation on the whole job
// (the master pushes the result to every daemon before it answers). The
// other processes wait in a fence.
func (p *proc) benchmark(ctx context.Context) error {
	s := p.s
	if p.me == 0 {
		app := session.AppSet(p.app)
		target := app + "/bench"
		key := "bench-key"
		if p.c.bench == "lookup" {
			if err := s.Publish(ctx, map[string][]byte{key: []byte("v")}, session.RangeJob); err != nil {
				return err
			}
		}
		call := func(i int) error {
			switch p.c.bench {
			case "query":
				_, err := s.QueryRC(ctx, session.QueryOptions{})
				return err
			case "lookup":
				// Relayed to the master and back without any push: the
				// floor under a set operation's round trip.
				_, err := s.Lookup(ctx, []string{key}, session.LookupOptions{})
				return err
			case "psetop":
				// Alternate all and all-but-self: every call makes a new
				// version of a set of (nearly) every process.
				var err error
				if i%2 == 0 {
					_, err = s.PsetOp(ctx, session.OpUnion, app, app, session.PsetOpOptions{Target: target})
				} else {
					_, err = s.PsetOp(ctx, session.OpDifference, app, session.Self, session.PsetOpOptions{Target: target})
				}
				return err
			}
			return fmt.Errorf("unknown benchmark %q", p.c.bench)
		}
		for i := range 20 { // warm up
			if err := call(i); err != nil {
				return err
			}
		}
		times := make([]time.Duration, p.c.benchN)
		var total time.Duration
		for i := range times {
			t0 := time.Now()
			if err := call(i); err != nil {
				return err
			}
			times[i] = time.Since(t0)
			total += times[i]
		}
		slices.Sort(times)
		say("BENCH", map[string]any{
			"op": p.c.bench, "n": len(times), "mean": int64(total) / int64(len(times)),
			"median": int64(times[len(times)/2]), "p90": int64(times[len(times)*9/10]),
		})
	}
	return s.Fence(ctx, nil, false)
}
