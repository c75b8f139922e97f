// Command testapp is a small application on lib/session for the tests of
// the session services. Tests build it, launch it on a DVM and read what
// it prints. The first argument selects what it does:
//
//	identity            print the process's identity and sets as one JSON line
//	exchange [collect]  put/commit, fence, get both ring neighbours, twice
//	publish KEY VALUE   publish KEY in the DVM range, wait for KEY.ack
//	lookup KEY          lookup KEY (DVM range) with wait, get the publisher's
//	                    data, then publish KEY.ack
//	lookuptimeout KEY   lookups of missing keys; KEY is free again
//	group               construct groups over all, even and odd ranks
//	abort CODE          rank 0 aborts the job with CODE
//	fencefail           rank 1 exits at once, rank 0 fences with it
//	events              rank 0 watches rank 1's notification and exit
//	multi               many sessions and goroutines in one process
//	fencebench N        N fences over all ranks; rank 0 prints the time
//	getbench N          rank 1 gets a key of rank 0 N times, remote and cached
//	lostwatch           (under dynrun --on-failure shrink) every rank watches
//	                    for failure changes; rank 1 kills itself, the others
//	                    report the change that ended their watch, find it
//	                    again with WaitFailure and accept it
//	rcquery             (2 ranks, 2 free slots) what QueryRC reports to the
//	                    members and to a new process of an ADD they accept,
//	                    then of an ADD nobody accepts (aborted), and
//	                    JobInfo during a change
//	fenceaftersub       (3 ranks) rank 0 asks for a SUB of rank 2; right
//	                    after the accept ranks 0 and 1 fence and construct
//	                    a group over every live process while rank 2 waits
//	                    for them to end
//	initduring DIR sub|add
//	                    (3 ranks; add: 2 ranks and a free slot) rank 0
//	                    asks for a SUB of rank 2 (an ADD of one process)
//	                    and writes DIR/announced; the other ranks open
//	                    their session only then, while the change is in
//	                    flight; every process prints the size, local rank
//	                    and local peers it was told and the members of
//	                    mpi://self/shared, then all take part in the change
//
// Every line it prints starts with a word saying what it is; "ERROR" lines
// mean a check failed (and the exit code is 1).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dynrt/dynrt/lib/procenv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	ident "github.com/dynrt/dynrt/internal/testapp/identity"
	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/wire"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testapp MODE [ARGS]")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := run(ctx, os.Args[1], os.Args[2:]); err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, mode string, args []string) error {
	if mode == "multi" {
		return multi(ctx)
	}
	if mode == "initduring" && os.Getenv(procenv.Rank) != "0" {
		if err := waitFile(ctx, filepath.Join(args[0], "announced")); err != nil {
			return err
		}
	}
	s, err := session.Init(ctx)
	if err != nil {
		return err
	}
	defer s.Finalize(ctx)
	switch mode {
	case "identity":
		return identity(ctx, s)
	case "exchange":
		return exchange(ctx, s, len(args) > 0 && args[0] == "collect")
	case "publish":
		return publish(ctx, s, args[0], args[1])
	case "lookup":
		return lookup(ctx, s, args[0])
	case "lookuptimeout":
		return lookupTimeout(ctx, s, args[0])
	case "group":
		return groups(ctx, s)
	case "abort":
		code, _ := strconv.Atoi(args[0])
		if s.Rank() == 0 {
			if err := s.Abort(ctx, code, "testapp was told to abort"); err != nil {
				return err
			}
		}
		time.Sleep(30 * time.Second) // the runtime kills us before
		return errors.New("still alive after the abort")
	case "fencefail":
		return fenceFail(ctx, s)
	case "events":
		return events(ctx, s)
	case "fencebench":
		return fenceBench(ctx, s, args)
	case "getbench":
		return getBench(ctx, s, args)
	case "lostwatch":
		return lostWatch(ctx, s)
	case "rcquery":
		return rcQuery(ctx, s)
	case "fenceaftersub":
		return fenceAfterSub(ctx, s)
	case "rcatstart":
		return rcAtStart(ctx, s)
	case "initduring":
		return initDuring(ctx, s, args[0], args[1])
	}
	return fmt.Errorf("unknown mode %q", mode)
}

func identity(ctx context.Context, s *session.Session) error {
	rep := ident.Report{
		Rank: s.Rank(), UID: s.UID(), Job: s.Job(), App: s.App(), Node: s.Node(), DVM: s.DVM(), Size: s.Size(),
		LocalRank: s.LocalRank(), LocalPeers: s.LocalPeers(), Env: map[string]string{},
		Sets: map[string]session.Pset{}, Info: map[string]map[string]string{},
	}
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "DYNRT_") {
			rep.Env[k] = v
		}
	}
	n, err := s.NumPsets(ctx)
	if err != nil {
		return err
	}
	for i := range n {
		name, err := s.PsetName(ctx, i)
		if err != nil {
			return err
		}
		rep.Names = append(rep.Names, name)
		p, err := s.PsetInfo(ctx, name)
		if err != nil {
			return err
		}
		rep.Sets[name] = p
		rep.Info[name] = p.Info()
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	fmt.Println("identity", string(b))
	return nil
}

// exchange: every rank commits a value under the same key, fences, reads
// both ring neighbours and fences again; then all commit new values and do
// it again, so stale cached data would show.
func exchange(ctx context.Context, s *session.Session, collect bool) error {
	me, n := s.Rank(), uint32(s.Size())
	left, right := (me+n-1)%n, (me+1)%n
	var got []string
	for round := 1; round <= 2; round++ {
		if err := s.Put("val", fmt.Appendf(nil, "r%d-%d", round, me)); err != nil {
			return err
		}
		if err := s.Put(fmt.Sprintf("only-%d", round), []byte{byte(round)}); err != nil {
			return err
		}
		if err := s.Commit(ctx); err != nil {
			return err
		}
		if err := s.Fence(ctx, nil, collect); err != nil {
			return err
		}
		for _, peer := range []uint32{left, right, me} {
			v, err := s.Get(ctx, peer, "val")
			if err != nil {
				return fmt.Errorf("round %d: get val of rank %d: %w", round, peer, err)
			}
			if want := fmt.Sprintf("r%d-%d", round, peer); string(v) != want {
				return fmt.Errorf("round %d: val of rank %d is %q, want %q", round, peer, v, want)
			}
			got = append(got, string(v))
		}
		if _, err := s.Get(ctx, right, "missing"); !errors.Is(err, wire.ErrNotFound) {
			return fmt.Errorf("get of a missing key: %v, want not found", err)
		}
		// Nobody commits the next round's values before everyone has read
		// this round's.
		if err := s.Fence(ctx, nil, false); err != nil {
			return err
		}
	}
	fmt.Println("exchange", me, strings.Join(got, " "))
	return nil
}

// publish publishes KEY=VALUE and KEY.job=<its job>, and commits "pk" for
// the other job to get.
func publish(ctx context.Context, s *session.Session, key, value string) error {
	if err := s.Put("pk", []byte("pv-"+s.Job())); err != nil {
		return err
	}
	if err := s.Commit(ctx); err != nil {
		return err
	}
	if err := s.Publish(ctx, map[string][]byte{key: []byte(value), key + ".job": []byte(s.Job())}, session.RangeDVM); err != nil {
		return err
	}
	if err := s.Publish(ctx, map[string][]byte{key: []byte("again")}, session.RangeDVM); !errors.Is(err, wire.ErrExists) {
		return fmt.Errorf("second publish of %s: %v, want exists", key, err)
	}
	fmt.Println("published", key)
	ack, err := s.Lookup(ctx, []string{key + ".ack"}, session.LookupOptions{Range: session.RangeDVM, Wait: true, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	fmt.Println("acked", string(ack[key+".ack"]))
	return s.Unpublish(ctx, []string{key, key + ".job"}, session.RangeDVM)
}

func lookup(ctx context.Context, s *session.Session, key string) error {
	if _, err := s.Lookup(ctx, []string{key}, session.LookupOptions{Range: session.RangeDVM}); !errors.Is(err, wire.ErrNotFound) {
		return fmt.Errorf("lookup of %s before it is published: %v, want not found", key, err)
	}
	fmt.Println("waiting", key)
	t0 := time.Now()
	got, err := s.Lookup(ctx, []string{key, key + ".job"}, session.LookupOptions{Range: session.RangeDVM, Wait: true, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	fmt.Printf("found %s=%s after %v\n", key, got[key], time.Since(t0).Round(time.Millisecond))
	// The publisher's committed data, read across jobs.
	job := string(got[key+".job"])
	v, err := s.Get(ctx, 0, "pk", session.FromJob(job))
	if err != nil {
		return err
	}
	fmt.Println("got", string(v) == "pv-"+job)
	return s.Publish(ctx, map[string][]byte{key + ".ack": []byte(s.Job())}, session.RangeDVM)
}

// lookupTimeout checks lookups of missing keys; KEY.ack, published in the
// DVM range by a job that has ended, is still there; KEY, unpublished, is
// free again.
func lookupTimeout(ctx context.Context, s *session.Session, key string) error {
	_, err := s.Lookup(ctx, []string{"never"}, session.LookupOptions{})
	fmt.Println("nowait", wire.CodeOf(err))
	_, err = s.Lookup(ctx, []string{"never"}, session.LookupOptions{Wait: true, Timeout: 200 * time.Millisecond})
	fmt.Println("wait", wire.CodeOf(err))
	got, err := s.Lookup(ctx, []string{key + ".ack"}, session.LookupOptions{Range: session.RangeDVM})
	fmt.Println("ack", len(got[key+".ack"]) > 0, wire.CodeOf(err))
	err = s.Publish(ctx, map[string][]byte{key: []byte("again")}, session.RangeDVM)
	fmt.Println("republish", err == nil)
	if err := s.Unpublish(ctx, []string{key}, session.RangeDVM); err != nil {
		return err
	}
	_, err = s.Lookup(ctx, []string{key}, session.LookupOptions{Range: session.RangeDVM})
	fmt.Println("unpublished", wire.CodeOf(err))
	// The job range is the caller's job: a key published there is found.
	if err := s.Publish(ctx, map[string][]byte{"mine": []byte("x")}, session.RangeJob); err != nil {
		return err
	}
	got, err = s.Lookup(ctx, []string{"mine"}, session.LookupOptions{Range: session.RangeJob})
	if err != nil || string(got["mine"]) != "x" {
		return fmt.Errorf("lookup of own key: %q %v", got["mine"], err)
	}
	return nil
}

func groups(ctx context.Context, s *session.Session) error {
	me, n := s.Rank(), uint32(s.Size())
	all, err := s.GroupConstruct(ctx, "all", nil)
	if err != nil {
		return err
	}
	var half []uint32
	for r := me % 2; r < n; r += 2 {
		half = append(half, r)
	}
	name := []string{"even", "odd"}[me%2]
	sub, err := s.GroupConstruct(ctx, name, half)
	if err != nil {
		return err
	}
	// The name is taken while the group lives.
	if _, err := s.GroupConstruct(ctx, "all", nil); !errors.Is(err, wire.ErrExists) {
		return fmt.Errorf("construct of a live group: %v, want exists", err)
	}
	if err := s.GroupDestruct(ctx, name); err != nil {
		return err
	}
	if err := s.GroupDestruct(ctx, "all"); err != nil {
		return err
	}
	if err := s.GroupDestruct(ctx, "all"); !errors.Is(err, wire.ErrNotFound) {
		return fmt.Errorf("second destruct: %v, want not found", err)
	}
	// Everyone has left "all" once this fence completes: the name is free.
	if err := s.Fence(ctx, nil, false); err != nil {
		return err
	}
	again, err := s.GroupConstruct(ctx, "all", nil)
	if err != nil {
		return err
	}
	fmt.Println("group", me, "all", all, name, sub, "again", again)
	return nil
}

func fenceFail(ctx context.Context, s *session.Session) error {
	if s.Rank() != 0 {
		return nil // ends without entering
	}
	t0 := time.Now()
	err := s.Fence(ctx, []uint32{0, 1}, false)
	fmt.Println("fence", wire.CodeOf(err), time.Since(t0) < 20*time.Second)
	return nil
}

func events(ctx context.Context, s *session.Session) error {
	if s.Rank() != 0 {
		if err := s.Fence(ctx, nil, false); err != nil {
			return err
		}
		return s.Notify(ctx, "hello", map[string]string{"from": strconv.Itoa(int(s.Rank()))})
	}
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	var once sync.Once
	_, err := s.Subscribe(ctx, []string{session.EventApp, session.EventProc}, func(ev wire.Event) {
		if ev.Job != s.Job() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch ev.Kind {
		case wire.EvApp:
			seen = append(seen, fmt.Sprintf("app:%s:%d:%s", ev.Msg, ev.Source.Rank, ev.Data["from"]))
		case wire.EvProcState:
			if ev.State == wire.ProcStateRunning {
				// The job's "running" event is published when every
				// daemon has answered the launch, which on a loaded
				// machine can come after this process subscribed.
				return
			}
			seen = append(seen, fmt.Sprintf("proc:%s:%s", ev.Ranks, ev.State))
			if ev.Ranks.Contains(1) {
				once.Do(func() { close(done) })
			}
		}
	})
	if err != nil {
		return err
	}
	if err := s.Fence(ctx, nil, false); err != nil { // rank 1 goes on once we listen
		return err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return errors.New("no exit event for rank 1")
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Println("events", strings.Join(seen, " "))
	return nil
}

// multi opens sessions from many goroutines of one process and uses them
// at the same time, and shares one session among many goroutines.
func multi(ctx context.Context) error {
	shared, err := session.Init(ctx)
	if err != nil {
		return err
	}
	defer shared.Finalize(ctx)
	me, n := shared.Rank(), uint32(shared.Size())
	other := (me + 1) % n
	gotEvent := make(chan struct{})
	var once sync.Once
	if _, err := shared.Subscribe(ctx, []string{session.EventApp}, func(wire.Event) {
		once.Do(func() { close(gotEvent) })
	}); err != nil {
		return err
	}
	const G = 8
	errs := make(chan error, 2*G)
	var wg sync.WaitGroup
	for g := range G {
		wg.Add(2)
		go func() { // own session
			defer wg.Done()
			errs <- func() error {
				s, err := session.Init(ctx)
				if err != nil {
					return err
				}
				if s.Rank() != me || s.UID() != shared.UID() || s.Job() != shared.Job() {
					return fmt.Errorf("session %d: identity %d/%d differs", g, s.Rank(), s.UID())
				}
				if _, err := s.PsetInfo(ctx, session.World); err != nil {
					return err
				}
				key := fmt.Sprintf("own-%d", g)
				if err := s.Put(key, []byte(key)); err != nil {
					return err
				}
				if err := s.Commit(ctx); err != nil {
					return err
				}
				v, err := s.Get(ctx, other, key, session.Wait())
				if err != nil || string(v) != key {
					return fmt.Errorf("session %d: get %s of rank %d: %q %v", g, key, other, v, err)
				}
				pk := fmt.Sprintf("pub-%d-%d", me, g)
				if err := s.Publish(ctx, map[string][]byte{pk: []byte("1")}, session.RangeJob); err != nil {
					return err
				}
				if err := s.Notify(ctx, "multi", nil); err != nil {
					return err
				}
				if err := s.Finalize(ctx); err != nil {
					return err
				}
				if err := s.Put("x", nil); err == nil {
					return errors.New("put after finalize worked")
				}
				return nil
			}()
		}()
		go func() { // the shared session
			defer wg.Done()
			errs <- func() error {
				key := fmt.Sprintf("shared-%d", g)
				if err := shared.Put(key, []byte(key)); err != nil {
					return err
				}
				if err := shared.Commit(ctx); err != nil {
					return err
				}
				for range 10 {
					if _, err := shared.NumPsets(ctx); err != nil {
						return err
					}
					if _, err := shared.PsetName(ctx, 0); err != nil {
						return err
					}
				}
				v, err := shared.Get(ctx, other, key, session.Wait())
				if err != nil || string(v) != key {
					return fmt.Errorf("shared %d: get %s of rank %d: %q %v", g, key, other, v, err)
				}
				got, err := shared.Lookup(ctx, []string{fmt.Sprintf("pub-%d-%d", other, g)}, session.LookupOptions{Wait: true, Timeout: 20 * time.Second})
				if err != nil || len(got) != 1 {
					return fmt.Errorf("shared %d: lookup: %v %v", g, got, err)
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	// Stay until the other rank is done with our data too.
	if err := shared.Fence(ctx, nil, false); err != nil {
		return err
	}
	select {
	case <-gotEvent:
	case <-time.After(10 * time.Second):
		return errors.New("no application event arrived")
	}
	fmt.Println("multi", me, "ok")
	return nil
}

func fenceBench(ctx context.Context, s *session.Session, args []string) error {
	n, _ := strconv.Atoi(args[0])
	if err := s.Fence(ctx, nil, false); err != nil {
		return err
	}
	t0 := time.Now()
	for range n {
		if err := s.Fence(ctx, nil, false); err != nil {
			return err
		}
	}
	if s.Rank() == 0 {
		fmt.Println("fencebench", n, time.Since(t0).Nanoseconds())
	}
	return nil
}

func getBench(ctx context.Context, s *session.Session, args []string) error {
	n, _ := strconv.Atoi(args[0])
	if s.Rank() == 0 {
		if err := s.Put("k", slices.Repeat([]byte("x"), 64)); err != nil {
			return err
		}
		if err := s.Commit(ctx); err != nil {
			return err
		}
	}
	if err := s.Fence(ctx, nil, false); err != nil {
		return err
	}
	if s.Rank() == 1 {
		var times [2]int64
		for i, opts := range [][]session.GetOption{{session.Refresh()}, nil} {
			t0 := time.Now()
			for range n {
				v, err := s.Get(ctx, 0, "k", opts...)
				if err != nil || len(v) != 64 {
					return fmt.Errorf("get: %d bytes, %v", len(v), err)
				}
			}
			times[i] = time.Since(t0).Nanoseconds()
		}
		fmt.Println("getbench", n, times[0], times[1])
	}
	return s.Fence(ctx, nil, false)
}

// lostWatch: the survivors of rank 1 stand for processes blocked in
// communication with a peer that went to handle the loss: their watch
// context ends with the failure change as its cause.
func lostWatch(ctx context.Context, s *session.Session) error {
	app := session.AppSet(s.App())
	wctx, stop := s.WatchFailure(ctx, app, nil)
	defer stop()
	if err := s.Fence(ctx, nil, false); err != nil { // everyone watches
		return err
	}
	if s.Rank() == 1 {
		p, _ := os.FindProcess(os.Getpid())
		p.Kill() // SIGKILL: a loss, not an ordinary exit
		time.Sleep(30 * time.Second)
		return errors.New("still alive after SIGKILL")
	}
	<-wctx.Done()
	r, ok := session.LostCause(wctx)
	if !ok {
		return fmt.Errorf("watch ended without a failure change: %v", context.Cause(wctx))
	}
	fmt.Println("lost", r.Lost(), r.Type, r.Failure(), r.Record.Requester)
	again, err := s.WaitFailure(ctx, app, nil)
	if err != nil || again.Delta != r.Delta {
		return fmt.Errorf("WaitFailure: %s %v, want %s", again.Delta, err, r.Delta)
	}
	acc, err := s.Accept(ctx, r.Delta, session.AcceptOptions{Bound: app}).Wait(ctx)
	if err != nil {
		return fmt.Errorf("accept %s: %w", r.Delta, err)
	}
	// Handled: no other failure change is due.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = s.WaitFailure(short, app, func(d string) bool { return d == r.Delta })
	fmt.Println("accepted", acc.Terminate, "then", wire.CodeOf(err))
	return nil
}

// rcQuery prints what QueryRC answers ("q TAG TYPE STATUS") at each step
// of two changes: a change is reported while it needs the caller, NULL
// once the caller has taken its part, and an abort once.
func rcQuery(ctx context.Context, s *session.Session) error {
	app := session.AppSet(s.App())
	me := s.Rank()
	show := func(tag string, o session.QueryOptions) (session.RC, error) {
		r, err := s.QueryRC(ctx, o)
		if err == nil {
			fmt.Println("q", tag, r.Type, r.Status)
		}
		return r, err
	}
	pending := func(r session.RC) bool { return !r.Null() }
	switch {
	case me >= 3: // the new process of the second ADD: never accepted, stopped by the abort
		<-ctx.Done()
		return errors.New("not stopped by the abort")
	case me == 2: // the new process of the first ADD
		r, err := s.QueryRC(ctx, session.QueryOptions{Bound: session.Self})
		if err != nil {
			return err
		}
		fmt.Println("q new", r.Type, r.Incl)
		if _, err := s.Confirm(ctx, r.Delta, session.ConfirmOptions{}); err != nil {
			return err
		}
		if _, err := show("confirmed", session.QueryOptions{Bound: session.Self}); err != nil {
			return err
		}
	default:
		if _, err := show("start", session.QueryOptions{}); err != nil {
			return err
		}
		if err := s.Fence(ctx, []uint32{0, 1}, false); err != nil { // both have looked
			return err
		}
		if me == 0 {
			if _, err := s.RequestRC(ctx, wire.RCAdd, 1, session.RequestOptions{}); err != nil {
				return err
			}
		}
		r, err := s.WaitRC(ctx, session.QueryOptions{Bound: app}, pending)
		if err != nil {
			return err
		}
		fmt.Println("q seen", r.Type, r.Status)
		// JobInfo describes the job after the announced change already.
		in, err := s.JobInfo(ctx)
		if err != nil {
			return err
		}
		fmt.Println("jobinfo", in.Size)
		var o session.AcceptOptions
		if me == 0 {
			if o.NewSet, err = s.SetAfter(ctx, app, r); err != nil {
				return err
			}
		}
		req := s.Accept(ctx, r.Delta, o)
		// Taken part: no longer reported, even before the accept is through.
		if _, err := show("accepting", session.QueryOptions{}); err != nil {
			return err
		}
		if _, err := req.Wait(ctx); err != nil {
			return err
		}
		if _, err := show("accepted", session.QueryOptions{}); err != nil {
			return err
		}
	}
	// The second ADD: nobody accepts, it is aborted at its confirm timeout.
	if err := s.Fence(ctx, []uint32{0, 1, 2}, false); err != nil {
		return err
	}
	if me == 0 {
		if _, err := s.RequestRC(ctx, wire.RCAdd, 1, session.RequestOptions{ConfirmTimeout: 300 * time.Millisecond}); err != nil {
			return err
		}
	}
	r, err := s.WaitRC(ctx, session.QueryOptions{Bound: app}, pending)
	if err != nil {
		return err
	}
	fmt.Println("q seen2", r.Type, r.Status)
	if _, err := s.WaitRC(ctx, session.QueryOptions{Delta: r.Delta}, func(x session.RC) bool { return x.Status == wire.RCAborted }); err != nil {
		return err
	}
	// A wait for failure changes looks at the aborted ADD and leaves it:
	// the abort is still the main loop's to learn.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = s.WaitFailure(short, app, nil)
	cancel()
	if !errors.Is(err, wire.ErrTimeout) {
		return fmt.Errorf("WaitFailure beside an aborted ADD: %v, want a timeout", err)
	}
	for _, tag := range []string{"aborted", "again"} {
		if _, err := show(tag, session.QueryOptions{}); err != nil {
			return err
		}
	}
	return s.Fence(ctx, []uint32{0, 1, 2}, false)
}

// fenceAfterSub: the removed rank 2 stays until ranks 0 and 1 have fenced
// over every live process right after the SUB, so that fence must leave
// it out (it would otherwise wait for rank 2, and fail when it exits).
func fenceAfterSub(ctx context.Context, s *session.Session) error {
	app := session.AppSet(s.App())
	if s.Rank() == 0 {
		if _, err := s.RequestRC(ctx, wire.RCSub, 0, session.RequestOptions{Ranks: []uint32{2}, Grace: 20 * time.Second}); err != nil {
			return err
		}
	}
	acc, err := acceptNext(ctx, s, app)
	if err != nil {
		return err
	}
	if acc.Terminate {
		// Leaving: wait (as a process finishing its work would) until the
		// others are through their fence.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := s.Lookup(wctx, []string{"fenced"}, session.LookupOptions{Wait: true, Timeout: 10 * time.Second})
		fmt.Println("left", outcome(err))
		return nil
	}
	// Both at once, so that each would wait for rank 2 on its own.
	var gerr error
	grouped := make(chan struct{})
	go func() {
		defer close(grouped)
		_, gerr = s.GroupConstruct(ctx, "after-sub", nil) // nil: every live process
	}()
	err = s.Fence(ctx, nil, false)
	<-grouped
	fmt.Println("fence", outcome(err))
	fmt.Println("group", outcome(gerr))
	if s.Rank() == 0 {
		return s.Publish(ctx, map[string][]byte{"fenced": []byte("yes")}, session.RangeJob)
	}
	return nil
}

// acceptNext waits for the next change of set app and accepts it, rank 0
// (the set's root) naming the set after the change.
func acceptNext(ctx context.Context, s *session.Session, app string) (session.AcceptResult, error) {
	r, err := s.WaitRC(ctx, session.QueryOptions{Bound: app}, func(r session.RC) bool { return !r.Null() })
	if err != nil {
		return session.AcceptResult{}, err
	}
	var o session.AcceptOptions
	if s.Rank() == 0 {
		if o.NewSet, err = s.SetAfter(ctx, app, r); err != nil {
			return session.AcceptResult{}, err
		}
	}
	return s.Accept(ctx, r.Delta, o).Wait(ctx)
}

// outcome is "ok" or the wire code of err.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	return string(wire.CodeOf(err))
}

// rcAtStart: rank 0 asks for a SUB of one process as soon as it runs
// (TestRequestDuringLaunch) and prints the answer; nobody accepts, so the
// change is aborted when the job ends.
func rcAtStart(ctx context.Context, s *session.Session) error {
	if s.Rank() != 0 {
		return nil
	}
	rec, err := s.RequestRC(ctx, wire.RCSub, 1, session.RequestOptions{})
	if err != nil {
		return err
	}
	fmt.Println("requested", rec.Type)
	return nil
}

// waitFile waits until path exists.
func waitFile(ctx context.Context, path string) error {
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", path, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// initDuring: the processes other than rank 0 open their session while a
// change rank 0 asked for is in flight (run waits for DIR/announced), and
// print what they were told; then every process takes its part.
func initDuring(ctx context.Context, s *session.Session, dir, typ string) error {
	shared, err := s.PsetInfo(ctx, session.Shared)
	if err != nil {
		return err
	}
	fmt.Printf("init size=%d localrank=%d peers=%v shared=%v\n", s.Size(), s.LocalRank(), s.LocalPeers(), shared.Members)
	app := session.AppSet(s.App())
	if s.Info().Delta != "" { // the ADD's new process
		if _, err := s.Confirm(ctx, s.Info().Delta, session.ConfirmOptions{}); err != nil {
			return err
		}
		fmt.Println("confirmed")
		return nil
	}
	if s.Rank() == 0 {
		o := session.RequestOptions{Grace: 20 * time.Second, ConfirmTimeout: 20 * time.Second}
		t, n := wire.RCSub, 0
		if typ == "add" {
			t, n = wire.RCAdd, 1
		} else {
			o.Ranks = []uint32{2}
		}
		if _, err := s.RequestRC(ctx, t, n, o); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "announced"), nil, 0o600); err != nil {
			return err
		}
	}
	acc, err := acceptNext(ctx, s, app)
	if err != nil {
		return err
	}
	if acc.Terminate {
		fmt.Println("left")
		return nil
	}
	fmt.Println("accepted")
	return nil
}
