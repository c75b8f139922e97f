package rawclient_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/internal/rawclient"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

var progs = &dvmtest.Programs{Race: dvmtest.Race}

func TestMain(m *testing.M) { dvmtest.Main(m, progs) }

type M = rawclient.M

// call bounds every request of the tests: a reply that does not come is a
// failure, never a hang.
const call = 20 * time.Second

// pipeJob is a job of rawpipe processes: the test holds each rank's
// connection to its daemon and writes every frame on it itself.
type pipeJob struct {
	t     *testing.T
	d     *dvmtest.DVM
	c     *tool.Client
	job   string
	app   string
	ln    net.Listener
	mu    sync.Mutex
	ranks map[uint32]*rawclient.Conn
	added chan uint32 // ranks whose pipe connected
}

func startPipeJob(t *testing.T, n int) *pipeJob {
	t.Helper()
	pipe := progs.Build(t, "github.com/dynrt/dynrt/internal/rawclient/rawpipe")
	d := dvmtest.Start(t, dvmtest.Options{Nodes: 2, Slots: 5})
	c := d.Attach(t)
	// A short path: unix socket paths are limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "p3")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	j := &pipeJob{t: t, d: d, c: c, ln: ln, ranks: map[uint32]*rawclient.Conn{}, added: make(chan uint32, 16)}
	go j.accept()
	t.Cleanup(func() {
		ln.Close()
		j.mu.Lock()
		for _, rc := range j.ranks {
			rc.Close()
		}
		j.mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(context.Background(), call)
	defer cancel()
	rep, err := c.Launch(ctx, wire.JobLaunchReq{Argv: []string{pipe, "-to", ln.Addr().String()}, N: uint32(n), Env: d.Env, Name: "p3"})
	if err != nil {
		t.Fatal(err)
	}
	j.job, j.app = rep.Job, "p3"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), call)
		defer cancel()
		_ = c.KillJob(ctx, j.job, 0, 0)
		_, _ = c.WaitJob(ctx, j.job)
	})
	for range n {
		j.await()
	}
	return j
}

// accept takes the pipes of the job's processes: each says who it is, then
// the test sends the hello and session.init through it.
func (j *pipeJob) accept() {
	for {
		nc, err := j.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			br := bufio.NewReader(nc)
			line, err := br.ReadString('\n')
			f := strings.Fields(line)
			if err != nil || len(f) != 3 {
				nc.Close()
				return
			}
			rank, _ := strconv.ParseUint(f[1], 10, 32)
			pid, _ := strconv.Atoi(f[2])
			rc, err := rawclient.New(readerConn{br, nc}, f[0], uint32(rank), pid)
			if err != nil {
				j.t.Errorf("hello of rank %d: %v", rank, err)
				nc.Close()
				return
			}
			if _, err := rc.Call("session.init", M{"j": f[0], "r": rank, "pid": pid}, call); err != nil {
				j.t.Errorf("session.init of rank %d: %v", rank, err)
			}
			j.mu.Lock()
			j.ranks[uint32(rank)] = rc
			j.mu.Unlock()
			j.added <- uint32(rank)
		}()
	}
}

// readerConn reads through the buffered reader that read the first line.
type readerConn struct {
	r *bufio.Reader
	net.Conn
}

func (c readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (j *pipeJob) await() uint32 {
	j.t.Helper()
	select {
	case r := <-j.added:
		return r
	case <-time.After(call):
		j.t.Fatal("a process of the job did not connect")
	}
	return 0
}

// leave ends a rank the way a client told to terminate does: session.fin,
// then the connection closes and its process (the pipe) exits.
func (j *pipeJob) leave(r uint32) {
	j.t.Helper()
	if _, err := j.rank(r).Call("session.fin", M{}, call); err != nil {
		j.t.Errorf("session.fin of rank %d: %v", r, err)
	}
	j.rank(r).Close()
}

func (j *pipeJob) rank(r uint32) *rawclient.Conn {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.ranks[r]
}

// request asks for a change as an operator, takes the pipes of its new
// processes, and waits until the daemons of ranks report it ANNOUNCED.
func (j *pipeJob) request(req wire.RCRequest, news int, ranks ...uint32) M {
	j.t.Helper()
	req.Job, req.Queue = j.job, true // after the change before it has settled
	ctx, cancel := context.WithTimeout(context.Background(), call)
	defer cancel()
	rc, err := j.c.RequestRC(ctx, req)
	if err != nil {
		j.t.Fatalf("request %s: %v", req.Type, err)
	}
	for range news {
		j.await()
	}
	var rec M
	for _, r := range ranks {
		rec = j.queryUntil(r, rc.Delta, func(st string) bool { return st != "" && st != "NULL" })
	}
	return rec
}

// queryUntil queries delta at rank's daemon until its status satisfies ok.
func (j *pipeJob) queryUntil(rank uint32, delta string, ok func(string) bool) M {
	j.t.Helper()
	deadline := time.Now().Add(call)
	for {
		q, err := j.rank(rank).Call("rc.query", M{"d": delta}, call)
		rc := rawclient.Map(q, "rc")
		if err == nil && ok(rawclient.Str(rc, "st")) {
			return rc
		}
		if time.Now().After(deadline) {
			j.t.Fatalf("rank %d: %s: %v %v", rank, delta, rc, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// acceptAll sends one rc.accept from every rank at once and returns the
// replies and errors by rank.
func (j *pipeJob) acceptAll(bodies map[uint32]M) (map[uint32]M, map[uint32]error) {
	reps, errs := map[uint32]M{}, map[uint32]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for r, b := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := j.rank(r).Call("rc.accept", b, call)
			mu.Lock()
			reps[r], errs[r] = rep, err
			mu.Unlock()
		}()
	}
	wg.Wait()
	return reps, errs
}

// psetOp runs a set operation from rank (phase 2 of the root) and returns
// the result as a PsetRef map.
func (j *pipeJob) psetOp(rank uint32, op, p1, p2 string) M {
	j.t.Helper()
	rep, err := j.rank(rank).Call("pset.op", M{"op": op, "p1": p1, "p2": p2, "t": p1}, call)
	if err != nil {
		j.t.Fatalf("pset.op %s: %v", op, err)
	}
	return M{"n": rawclient.Str(rep, "n"), "ver": rep["ver"]}
}

func setString(s M) string {
	return fmt.Sprintf("%s@%d", rawclient.Str(s, "n"), rawclient.Uint(s["ver"]))
}

// wantReplies checks that every rank got status st and set, and term
// exactly for the ranks in term.
func wantReplies(t *testing.T, what string, reps map[uint32]M, errs map[uint32]error, st string, set M, term ...uint32) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("%s: rank %d: %v", what, r, err)
		}
		rep := reps[r]
		wantTerm := false
		for _, x := range term {
			wantTerm = wantTerm || x == r
		}
		got := rawclient.Str(rep, "st")
		if got != st || (set != nil && setString(rawclient.Map(rep, "set")) != setString(set)) || (rep["term"] == true) != wantTerm {
			t.Errorf("%s: rank %d got %v, want st %s set %v term %v", what, r, rep, st, set, wantTerm)
		}
	}
}

func wantCode(t *testing.T, what string, err error, code string, in ...string) {
	t.Helper()
	if rawclient.CodeOf(err) != code {
		t.Fatalf("%s: got %v, want code %s", what, err, code)
	}
	for _, s := range in {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: %q does not say %q", what, err, s)
		}
	}
}

// TestPhase3RawFrames speaks phase 3 (docs/wire.md, "Phase 3") with raw
// frames, as a client in another language would, through the daemons of a
// real DVM: the member form of rc.accept for an ADD (polled while
// PENDING), a SUB and a REPLACE, the alone form, rc.confirm, and the
// error replies (permission, invalid with the set version and members,
// not_found, busy, timeout, aborted).
func TestPhase3RawFrames(t *testing.T) {
	j := startPipeJob(t, 3) // ranks 0, 1, 2
	app := "mpi://app/" + j.app

	// ADD 2: ranks 3 and 4.
	rec := j.request(wire.RCRequest{Type: wire.RCAdd, N: 2}, 2, 0, 1, 2, 3, 4)
	delta := rawclient.Str(rec, "d")
	t.Run("errors before the accept", func(t *testing.T) {
		_, err := j.rank(0).Call("rc.accept", M{"d": delta, "root": 7}, call)
		wantCode(t, "root outside the set", err, "invalid", app+"@", "0-2")
		_, err = j.rank(1).Call("rc.accept", M{"d": delta, "set": M{"n": app}}, call)
		wantCode(t, "set from a non-root", err, "invalid", "only the root")
		_, err = j.rank(1).Call("rc.accept", M{"d": delta, "alone": true}, call)
		wantCode(t, "alone from a non-root", err, "invalid", "alone")
		_, err = j.rank(3).Call("rc.accept", M{"d": delta}, call)
		wantCode(t, "accept from a new process", err, "permission")
		_, err = j.rank(0).Call("rc.confirm", M{"d": delta}, call)
		wantCode(t, "confirm from a member", err, "permission", "not a new process")
		_, err = j.rank(0).Call("rc.accept", M{"d": "mpi://rte/" + j.app + "/rc/99"}, call)
		wantCode(t, "unknown change", err, "not_found")
	})
	var set M
	t.Run("ADD member form, polled", func(t *testing.T) {
		// As in the example of docs/wire.md: the set as launched is
		// version 0 (bv carries no ver), its union with the delta 1.
		if bv, _ := rec["bv"].([]any); len(bv) != 1 || rawclient.Uint(bv[0].(M)["ver"]) != 0 {
			t.Errorf("bound sets %v, want the application set at version 0", rec["bv"])
		}
		set = j.psetOp(0, "union", app, delta)
		if rawclient.Uint(set["ver"]) != 1 {
			t.Errorf("union gave %v, want version 1", set)
		}
		reps, errs := j.acceptAll(map[uint32]M{0: {"d": delta, "set": set}, 1: {"d": delta}, 2: {"d": delta, "b": app}})
		wantReplies(t, "call 1", reps, errs, "PENDING", set)
		// Not confirmed yet: call 2 is PENDING for everyone too.
		reps, errs = j.acceptAll(map[uint32]M{0: {"d": delta}, 1: {"d": delta}, 2: {"d": delta}})
		wantReplies(t, "call 2", reps, errs, "PENDING", set)
		confirms := map[uint32]chan error{}
		for _, r := range []uint32{3, 4} {
			confirms[r] = make(chan error, 1)
			go func() {
				rep, err := j.rank(r).Call("rc.confirm", M{"d": delta, "tmo": 10000}, call)
				if err == nil && (rawclient.Str(rep, "st") != "FINALIZED" || setString(rawclient.Map(rep, "set")) != setString(set)) {
					err = fmt.Errorf("got %v, want FINALIZED %s", rep, setString(set))
				}
				confirms[r] <- err
			}()
		}
		for r, ch := range confirms {
			if err := <-ch; err != nil {
				t.Fatalf("confirm of rank %d: %v", r, err)
			}
		}
		reps, errs = j.acceptAll(map[uint32]M{0: {"d": delta}, 1: {"d": delta}, 2: {"d": delta}})
		wantReplies(t, "call 3", reps, errs, "FINALIZED", set)
		// A repeated confirm gets the answer again (it used to enter the
		// confirm fence a second time and wait there for rank 3).
		j.queryUntil(4, delta, func(st string) bool { return st == "FINALIZED" })
		rep, err := j.rank(4).Call("rc.confirm", M{"d": delta, "tmo": 2000}, call)
		if err != nil || rawclient.Str(rep, "st") != "FINALIZED" || setString(rawclient.Map(rep, "set")) != setString(set) {
			t.Fatalf("repeated confirm: %v %v, want FINALIZED %s", rep, err, setString(set))
		}
	})

	// SUB of rank 2.
	rec = j.request(wire.RCRequest{Type: wire.RCSub, Ranks: wire.Span(2, 2)}, 0, 0, 1, 2, 3, 4)
	delta = rawclient.Str(rec, "d")
	t.Run("SUB member form", func(t *testing.T) {
		_, err := j.rank(2).Call("rc.confirm", M{"d": delta}, call)
		wantCode(t, "confirm of a SUB", err, "invalid", "SUB")
		set = j.psetOp(0, "difference", app, delta)
		reps, errs := j.acceptAll(map[uint32]M{0: {"d": delta, "set": set}, 1: {"d": delta}, 2: {"d": delta}, 3: {"d": delta}, 4: {"d": delta}})
		wantReplies(t, "accept", reps, errs, "FINALIZED", set, 2)
		j.leave(2)
	})

	// REPLACE of rank 1 by rank 5.
	rec = j.request(wire.RCRequest{Type: wire.RCReplace, Ranks: wire.Span(1, 1)}, 1, 0, 1, 3, 4, 5)
	delta = rawclient.Str(rec, "d")
	t.Run("REPLACE member form", func(t *testing.T) {
		j.psetOp(0, "union", app, delta)
		set = j.psetOp(0, "difference", app, rawclient.Str(rec, "os"))
		reps, errs := j.acceptAll(map[uint32]M{0: {"d": delta, "set": set}, 1: {"d": delta}, 3: {"d": delta}, 4: {"d": delta}})
		wantReplies(t, "call 1", reps, errs, "PENDING", set) // no term before FINALIZED
		if _, err := j.rank(5).Call("rc.confirm", M{"d": delta}, call); err != nil {
			t.Fatal(err)
		}
		reps, errs = j.acceptAll(map[uint32]M{0: {"d": delta}, 1: {"d": delta}, 3: {"d": delta}, 4: {"d": delta}})
		wantReplies(t, "call 2", reps, errs, "FINALIZED", set, 1)
		j.leave(1)
	})

	// ADD 1 (rank 6), accepted by the root alone.
	rec = j.request(wire.RCRequest{Type: wire.RCAdd, N: 1}, 1, 0, 3, 4, 5, 6)
	delta = rawclient.Str(rec, "d")
	t.Run("alone form", func(t *testing.T) {
		set = j.psetOp(0, "union", app, delta)
		reps, errs := j.acceptAll(map[uint32]M{0: {"d": delta, "set": set, "alone": true}})
		wantReplies(t, "call 1", reps, errs, "PENDING", set)
		if _, err := j.rank(6).Call("rc.confirm", M{"d": delta}, call); err != nil {
			t.Fatal(err)
		}
		reps, errs = j.acceptAll(map[uint32]M{0: {"d": delta, "alone": true}})
		wantReplies(t, "call 2", reps, errs, "FINALIZED", set)
	})

	// ADD 1 (rank 7), canceled while members wait.
	rec = j.request(wire.RCRequest{Type: wire.RCAdd, N: 1}, 1, 0, 3, 4, 5, 6)
	delta = rawclient.Str(rec, "d")
	t.Run("timeout, busy, abort", func(t *testing.T) {
		// The others never come: the fence times out, and the call does
		// not count (the next one is call 1 again and fences).
		_, err := j.rank(3).Call("rc.accept", M{"d": delta, "tmo": 200}, call)
		wantCode(t, "lonely accept", err, "timeout")
		var waiting chan error
		wait := func() {
			waiting = make(chan error, 1)
			go func() {
				_, err := j.rank(3).Call("rc.accept", M{"d": delta}, call)
				waiting <- err
			}()
		}
		wait()
		// A second accept of rank 3 while the first waits. Should it get
		// to the daemon first, the waiting one is the one refused: then
		// that one goes again.
		deadline := time.Now().Add(call)
		for {
			time.Sleep(20 * time.Millisecond)
			_, err = j.rank(3).Call("rc.accept", M{"d": delta, "tmo": 100}, call)
			if rawclient.CodeOf(err) == "busy" || time.Now().After(deadline) {
				break
			}
			select {
			case werr := <-waiting:
				wantCode(t, "the waiting accept, refused", werr, "busy")
				wait()
			default:
			}
		}
		wantCode(t, "second accept under way", err, "busy", "under way")
		ctx, cancel := context.WithTimeout(context.Background(), call)
		defer cancel()
		if _, err := j.c.CancelRC(ctx, delta, "the test cancels it"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-waiting:
			wantCode(t, "accept waiting in the fence", err, "aborted", "the test cancels it")
		case <-time.After(call):
			t.Fatal("the waiting accept was not answered after the abort")
		}
		_, err = j.rank(0).Call("rc.accept", M{"d": delta}, call)
		wantCode(t, "accept after the abort", err, "aborted", "the test cancels it")
	})

	// ADD 1 (rank 8), canceled while a member waits for the root's answer
	// to its call 2.
	rec = j.request(wire.RCRequest{Type: wire.RCAdd, N: 1}, 1, 0, 3, 4, 5, 6)
	delta = rawclient.Str(rec, "d")
	t.Run("abort while waiting for the root", func(t *testing.T) {
		set = j.psetOp(0, "union", app, delta)
		reps, errs := j.acceptAll(map[uint32]M{0: {"d": delta, "set": set}, 3: {"d": delta}, 4: {"d": delta}, 5: {"d": delta}, 6: {"d": delta}})
		wantReplies(t, "call 1", reps, errs, "PENDING", set)
		waiting := make(chan error, 1)
		go func() {
			_, err := j.rank(3).Call("rc.accept", M{"d": delta}, call) // call 2: the root never sends its own
			waiting <- err
		}()
		time.Sleep(50 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), call)
		defer cancel()
		if _, err := j.c.CancelRC(ctx, delta, "canceled during the poll"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-waiting:
			wantCode(t, "accept waiting for the root", err, "aborted", "canceled during the poll")
		case <-time.After(call):
			t.Fatal("the waiting accept was not answered after the abort")
		}
	})
}
