package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/lib/rc"
	"github.com/dynrt/dynrt/wire"
)

// Resource changes: the dynamic part of the session API (thesis §6.2–6.4,
// DESIGN §5). A change is named by its delta set; it is ANNOUNCED by the
// runtime, the application builds its new process sets (PsetOp, phase 2),
// the members of the bound set accept it (phase 3) and, for an ADD, the
// new processes confirm it; then it is FINALIZED. The thesis listings map
// to:
//
//	6.1 MPI_Session_get_res_change      QueryRC (WaitRC, SubscribeRC)
//	6.2 MPI_Session_pset_create_op      PsetOp
//	6.5 MPI_Session_accept_res_change   Accept
//	6.6 MPI_Session_confirm_res_change  Confirm
//	    MPI_Session_request_res_change  RequestRC (evolving jobs, §7.4.4)
//
// A typical loop (listing 6.7): a process started by an ADD finds its
// change with QueryRC(Bound: Self) (Incl is true) and calls Confirm, which
// names the set to continue with. The others, at a point of their choice
// (or when SubscribeRC reports an ANNOUNCED change), run one PsetOp on the
// root — UNION for an ADD, DIFFERENCE for a SUB, with the delta set as
// second operand — and all members of the bound set call Accept (the
// root with its result as NewSet). Accept returns a request at once; it
// completes when the change is FINALIZED (an ADD's once the new processes
// have confirmed): Test it while working, or Wait. A SUB's accept tells
// the processes it removes to Terminate: they call Finalize and exit.

// rcSession is the per-session state of the resource changes: what the
// caller has done of each change (QueryRC reports only what still needs
// it), and what never changes once known — a change's delta and bound
// sets after its announcement, the members of a set version — so that an
// accept over a channel needs no local queries on its fast path.
type rcSession struct {
	mu      sync.Mutex
	recs    map[string]wire.RC               // latest record seen, by delta
	order   []string                         // deltas in recs, parts and told, oldest first (forget)
	members map[wire.PsetRef]wire.RankRanges // members of exact versions
	vorder  []wire.PsetRef                   // keys of members, oldest first
	changed chan struct{}                    // closed on every change event (watchRC); nil until then
	watch   sync.Mutex                       // serialises the start of the subscription
	parts   map[string]bool                  // parts taken: "<delta>|<bound>" accepted ("" bound: every set), "<delta>|confirm" confirmed
	told    map[string]bool                  // aborted changes a query or a call has reported
}

// What a session remembers of past changes is bounded, as the runtime's
// history is (docs/limits.md, "Retained history"): a process that goes
// through thousands of changes keeps a constant size. The oldest settled
// change is forgotten beyond keepChanges (the runtime keeps 64 by
// default; a forgotten record is asked of the daemon again), the oldest
// set version beyond keepVersions.
const (
	keepChanges  = 64
	keepVersions = 4 * keepChanges
)

// note adds delta to the changes remembered and forgets the oldest
// settled ones beyond keepChanges. r.mu must be held.
func (r *rcSession) note(delta string) {
	if slices.Contains(r.order, delta) {
		return
	}
	r.order = append(r.order, delta)
	for i := 0; len(r.order) > keepChanges && i < len(r.order); {
		old := r.order[i]
		if rec, ok := r.recs[old]; ok && rec.Status != wire.RCFinalized && rec.Status != wire.RCAborted {
			i++ // still in flight: kept
			continue
		}
		r.order = slices.Delete(r.order, i, i+1)
		delete(r.recs, old)
		delete(r.told, old)
		for k := range r.parts {
			if strings.HasPrefix(k, old+"|") {
				delete(r.parts, k)
			}
		}
	}
}

// take records that the caller has done its part of delta: accepted for
// bound ("": for every bound set holding it), or confirmed (confirm).
// QueryRC no longer reports the change.
func (r *rcSession) take(delta, bound string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.parts == nil {
		r.parts = make(map[string]bool)
	}
	r.note(delta)
	r.parts[delta+"|"+bound] = true
}

// taken reports whether take(delta, bound) was called.
func (r *rcSession) taken(delta, bound string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.parts[delta+"|"+bound]
}

// toldOf reports whether tell(delta) was called.
func (r *rcSession) toldOf(delta string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.told[delta]
}

// tell records that the caller has learnt that delta was aborted; it
// reports whether it had not before.
func (r *rcSession) tell(delta string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.told[delta] {
		return false
	}
	if r.told == nil {
		r.told = make(map[string]bool)
	}
	r.note(delta)
	r.told[delta] = true
	return true
}

// saw keeps a record unless a newer one of the same change is known.
func (r *rcSession) saw(rec wire.RC) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recs == nil {
		r.recs = make(map[string]wire.RC)
	}
	if old, ok := r.recs[rec.Delta]; !ok || old.Seq <= rec.Seq {
		r.note(rec.Delta)
		r.recs[rec.Delta] = rec
	}
}

// announced returns the known record of delta if it has been announced.
func (r *rcSession) announced(delta string) (wire.RC, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.recs[delta]
	return rec, ok && len(rec.BoundRefs) > 0
}

// record returns the change delta: the known record once announced (its
// delta and bound sets no longer change), else the daemon's answer.
func (s *Session) record(ctx context.Context, delta string) (wire.RC, error) {
	if n, err := pset.Parse(delta); err == nil {
		if rec, ok := s.rc.announced(n.String()); ok {
			return rec, nil
		}
	}
	r, err := s.WaitRC(ctx, QueryOptions{Delta: delta}, func(RC) bool { return true })
	return r.Record, err
}

// Members returns the members of one exact version of a set. Since a
// (name, version) pair always names the same members, the answer is kept
// for later calls.
func (s *Session) Members(ctx context.Context, ref SetVersion) (wire.RankRanges, error) {
	s.rc.mu.Lock()
	m, ok := s.rc.members[ref]
	s.rc.mu.Unlock()
	if ok {
		return m, nil
	}
	p, err := s.PsetInfo(ctx, ref.String())
	if err != nil {
		return nil, err
	}
	s.rc.mu.Lock()
	if s.rc.members == nil {
		s.rc.members = make(map[wire.PsetRef]wire.RankRanges)
	}
	if _, ok := s.rc.members[ref]; !ok {
		s.rc.vorder = append(s.rc.vorder, ref)
		if len(s.rc.vorder) > keepVersions {
			delete(s.rc.members, s.rc.vorder[0])
			s.rc.vorder = slices.Delete(s.rc.vorder, 0, 1)
		}
	}
	s.rc.members[ref] = p.Members
	s.rc.mu.Unlock()
	return p.Members, nil
}

// RC is the answer of QueryRC: the change, or Type and Status NULL when
// there is none.
type RC struct {
	Type   string // wire.RCAdd, wire.RCSub, wire.RCReplace, or wire.RCNull
	Delta  string // the delta set naming the change
	Incl   bool   // the caller is in the delta: a new process (ADD, REPLACE) or one to remove (SUB)
	Status string // wire.RCAnnounced, RCPending, RCFinalized, RCAborted, or RCNull
	// Record is the runtime's full record: bound sets with their
	// versions, ranks, step times, abort reason.
	Record wire.RC
}

// Null reports whether there is no change.
func (r RC) Null() bool { return r.Type == wire.RCNull }

// QueryOptions select the change QueryRC reports.
type QueryOptions struct {
	// Bound is the set whose change is wanted (the thesis's
	// MPI_RC_BOUND_PSET): "" means the application set mpi://app/<app>
	// (application-level changes), Self any set holding the caller.
	Bound string
	// Delta names one change exactly: its record is returned whatever
	// its status, and Bound is ignored.
	Delta string
}

// QueryRC reports the change bound to o.Bound that still needs the caller
// (listing 6.1), or NULL (Null() is true) when there is none: the
// thesis's MPI_RC_NULL. A change needs the caller when the caller is
// concerned by it (a member of one of its bound sets at the version the
// change was announced with, or one of its new processes) and
//
//   - it is ANNOUNCED or PENDING and the caller has not taken its part in
//     this session yet: a member has not started its Accept for every
//     bound set it is in (an accept request that fails other than by an
//     abort gives the change back), a new process has not confirmed; or
//   - it is ABORTED and neither a query nor an accept or confirm of this
//     session has reported that yet (an abort is reported once, so that a
//     caller in the middle of phase 2 learns it).
//
// A FINALIZED change never needs the caller (it took its part, or the
// runtime completed the change without it); once the caller has taken
// its part it follows the change with the result of its accept or with
// QueryRC(QueryOptions{Delta: ...}), which returns any change by name.
// So a loop needs no memory of the changes it handled. The daemon answers
// from its copy of the runtime's records, without a round trip to the
// master (one more, once per set version, to learn its members).
func (s *Session) QueryRC(ctx context.Context, o QueryOptions) (RC, error) {
	return s.query(ctx, o, true)
}

// query is QueryRC; with consume false, an abort it reports still counts
// as not reported (WaitRC reports it only if its caller takes it).
//
// QueryRC asks the daemon to apply the rule itself (RCQueryReq.Need), so
// that the answer is the same for every client implementation. The
// session's own memory stays as a second filter for what the daemon
// cannot see: an Accept that has returned but whose request has not
// reached the daemon yet, and the members of an Accept over a channel,
// whose root alone sends a request. A peek (WaitRC) must not use up the
// abort at the daemon, so it asks for the plain record.
func (s *Session) query(ctx context.Context, o QueryOptions, consume bool) (RC, error) {
	r, err := s.queryRC(ctx, o, consume)
	if err != nil || o.Delta != "" || r.Null() {
		return r, err
	}
	need, err := s.needs(ctx, r, consume)
	if err != nil || !need {
		return RC{Type: wire.RCNull, Status: wire.RCNull}, err
	}
	return r, nil
}

// queryRC is one rc.query: the change bound to o.Bound that still needs
// the caller (need), or the daemon's latest record bound to o.Bound
// whatever its status, or the one named o.Delta.
func (s *Session) queryRC(ctx context.Context, o QueryOptions, need bool) (RC, error) {
	var rep wire.RCQueryReply
	if err := s.call(ctx, wire.KindRCQuery, &wire.RCQueryReq{Delta: o.Delta, Bound: o.Bound, Need: need && o.Delta == ""}, &rep); err != nil {
		return RC{}, err
	}
	if rep.RC == nil {
		return RC{Type: wire.RCNull, Status: wire.RCNull}, nil
	}
	s.rc.saw(*rep.RC)
	return RC{Type: rep.RC.Type, Delta: rep.RC.Delta, Incl: rep.Incl, Status: rep.RC.Status, Record: *rep.RC}, nil
}

// needs says whether r still needs the caller (QueryRC).
func (s *Session) needs(ctx context.Context, r RC, consume bool) (bool, error) {
	rec := &r.Record
	newProc := r.Incl && (r.Type == wire.RCAdd || r.Type == wire.RCReplace)
	switch r.Status {
	case wire.RCAnnounced, wire.RCPending:
		if newProc {
			return !s.rc.taken(r.Delta, confirm), nil
		}
		for _, ref := range rec.BoundRefs {
			if s.rc.taken(r.Delta, ref.Name) || s.rc.taken(r.Delta, "") {
				continue
			}
			m, err := s.Members(ctx, ref)
			if err != nil {
				return false, err
			}
			if m.Contains(s.info.Rank) {
				return true, nil
			}
		}
		return false, nil
	case wire.RCAborted:
		in := newProc
		for _, ref := range rec.BoundRefs {
			if in {
				break
			}
			m, err := s.Members(ctx, ref)
			if errors.Is(err, wire.ErrNotFound) {
				continue // a version the runtime no longer keeps: long over
			}
			if err != nil {
				return false, err
			}
			in = m.Contains(s.info.Rank)
		}
		if !consume {
			return in && !s.rc.toldOf(r.Delta), nil
		}
		return in && s.rc.tell(r.Delta), nil
	}
	return false, nil
}

// SubscribeRC calls fn with the record of every update of a change of the
// caller's job (on the session's event goroutine, in order): an
// application can react to an announcement instead of polling QueryRC.
// When fn runs, the caller's daemon already answers queries with that
// update. Unsubscribe ends it.
func (s *Session) SubscribeRC(ctx context.Context, fn func(wire.RC)) (uint64, error) {
	if fn == nil {
		return 0, wire.Errorf(wire.ErrInvalid, "session: subscribe without a callback")
	}
	job := s.info.Job
	// "rc." takes rc.update as well as rc.state: every update, not only
	// the new statuses; of the caller's job only.
	return s.subscribe(ctx, []string{"rc."}, job, func(ev wire.Event) {
		if ev.Job == job && ev.RC != nil {
			s.rc.saw(*ev.RC)
			fn(*ev.RC)
		}
	})
}

// WaitRC queries the change selected by o until done accepts it, querying
// again after every update of a change of the job (no polling). It
// returns the accepted answer, or an error when ctx ends. A change named by
// o.Delta that the caller's daemon does not know yet is waited for (a peer
// on another node may have seen it first). An abort (which QueryRC reports
// once) counts as reported only if done accepts it.
//
// The session subscribes to the change events once, at the first WaitRC,
// and keeps the subscription until Finalize.
func (s *Session) WaitRC(ctx context.Context, o QueryOptions, done func(RC) bool) (RC, error) {
	if err := s.watchRC(ctx); err != nil {
		return RC{}, err
	}
	for {
		s.rc.mu.Lock()
		wake := s.rc.changed // taken before the query: no update can fall in between
		s.rc.mu.Unlock()
		// Peek: an abort done rejects stays to be reported to others
		// (a WatchFailure beside the main loop, say).
		r, err := s.query(ctx, o, false)
		switch {
		case o.Delta != "" && errors.Is(err, wire.ErrNotFound):
			// Not here yet: the master pushes a change to the daemons one
			// by one, and a peer may have named it first.
		case err != nil:
			return r, err
		}
		if err == nil && done(r) {
			if r.Status == wire.RCAborted && o.Delta == "" {
				s.rc.tell(r.Delta)
			}
			return r, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return r, ctxErr(ctx, "session: wait for a resource change")
		}
	}
}

// watchRC makes sure the session's own subscription to change events
// exists: every event closes rc.changed and replaces it.
func (s *Session) watchRC(ctx context.Context) error {
	s.rc.watch.Lock() // one subscription even if several WaitRC start at once
	defer s.rc.watch.Unlock()
	s.rc.mu.Lock()
	on := s.rc.changed != nil
	if !on {
		s.rc.changed = make(chan struct{})
	}
	s.rc.mu.Unlock()
	if on {
		return nil
	}
	_, err := s.SubscribeRC(ctx, func(wire.RC) {
		s.rc.mu.Lock()
		close(s.rc.changed)
		s.rc.changed = make(chan struct{})
		s.rc.mu.Unlock()
	})
	if err != nil {
		s.rc.mu.Lock()
		s.rc.changed = nil
		s.rc.mu.Unlock()
	}
	return err
}

func ctxErr(ctx context.Context, what string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return wire.Errorf(wire.ErrTimeout, "%s: %w", what, ctx.Err())
	}
	return wire.Errorf(wire.ErrCanceled, "%s: %w", what, ctx.Err())
}

// RequestOptions complete a RequestRC.
type RequestOptions struct {
	Ranks []uint32 // SUB, REPLACE: exactly these ranks (n may then be 0)
	// Bound: ADD binds to this malleable set instead of the application
	// set; SUB removes (REPLACE replaces) processes of this set only.
	Bound string
	// Wait makes the call return only once the change is settled
	// (FINALIZED with its processes started or gone, or ABORTED). The
	// caller must not be needed to accept it.
	Wait bool
	// Queue waits for a change in flight instead of failing with
	// wire.ErrBusy.
	Queue bool
	// Grace (SUB, REPLACE) and ConfirmTimeout override the runtime's defaults for
	// this change.
	Grace, ConfirmTimeout time.Duration
	Hints                 map[string]string
}

// RequestRC asks the runtime to add (typ wire.RCAdd) or remove (wire.RCSub)
// n processes of the caller's own job: an evolving application (thesis
// §7.4.4). It returns the record once the change is announced (with Wait:
// settled). The request goes through the same path as dynrc's.
func (s *Session) RequestRC(ctx context.Context, typ string, n int, o RequestOptions) (wire.RC, error) {
	if n < 0 {
		return wire.RC{}, wire.Errorf(wire.ErrInvalid, "session: negative number of processes %d", n)
	}
	req := &wire.RCRequest{
		Type: strings.ToUpper(typ), N: uint32(n), Ranks: wire.RangesOf(o.Ranks), Wait: o.Wait, Queue: o.Queue,
		GraceMS: o.Grace.Milliseconds(), ConfirmMS: o.ConfirmTimeout.Milliseconds(), Hints: o.Hints,
	}
	if len(o.Ranks) == 0 {
		req.Ranks = nil
	}
	if o.Bound != "" {
		req.Bound = []string{o.Bound}
	}
	if o.Wait {
		req.TimeoutMS = timeoutMS(ctx, 0)
	}
	var rc wire.RC
	err := s.call(ctx, wire.KindRCRequest, req, &rc)
	return rc, err
}

// JobInfo reads the process's identity and the job data again from the
// daemon: after a change the job size, the local peers and the local rank
// differ from what Init saw. From the announcement of a change on, it
// describes the job after the change (docs/session.md).
func (s *Session) JobInfo(ctx context.Context) (wire.SessionInfo, error) {
	var in wire.SessionInfo
	err := s.call(ctx, wire.KindSessionInit, &wire.SessionInitReq{Job: s.info.Job, Rank: s.info.Rank, PID: os.Getpid(), Latest: true}, &in)
	return in, err
}

// took notes the outcome of the caller's part of delta for the bound set
// named bound ("" for every set holding the caller; confirm for a
// confirmation): done, told of the abort, or (another failure) still to
// be done.
func (r *rcSession) took(delta, bound string, err error) {
	delta, bound = canonical(delta), canonical(bound)
	switch {
	case err == nil:
		r.take(delta, bound)
	case errors.Is(err, wire.ErrAborted):
		r.tell(delta)
	default:
		r.mu.Lock()
		delete(r.parts, delta+"|"+bound)
		r.mu.Unlock()
	}
}

// canonical writes a set name the way the runtime does ("" and names it
// cannot read as they are).
func canonical(name string) string {
	if n, err := pset.Parse(name); err == nil && name != "" {
		return n.String()
	}
	return name
}

// confirm is the part taken by a confirmation (rcSession.took).
const confirm = "confirm"

// boundOf resolves the bound set a member accepts for and its members at
// the announcement.
func (s *Session) boundOf(ctx context.Context, rec *wire.RC, name string) (wire.PsetRef, wire.RankRanges, error) {
	ref, m, err := rc.BoundOf(rec, s.info.Rank, name, func(ref wire.PsetRef) (wire.RankRanges, error) { return s.Members(ctx, ref) })
	if err != nil {
		return ref, m, fmt.Errorf("session: %w", err)
	}
	return ref, m, nil
}

// ConfirmOptions complete a Confirm.
type ConfirmOptions struct {
	// Timeout bounds the wait for the accept and the fence of the new
	// processes (0: ctx's deadline only; the runtime aborts a change that
	// is not confirmed within its own limit anyway).
	Timeout time.Duration
}

// Confirm is called by every process an ADD or a REPLACE started (listing
// 6.6). It is one rc.confirm request (docs/wire.md, "Phase 3"): the
// daemon waits until the running processes have accepted, fences the new
// processes, lets the lowest of them confirm (status FINALIZED), and
// answers the set to continue with. If the change is aborted it returns
// an error matching wire.ErrAborted.
func (s *Session) Confirm(ctx context.Context, delta string, o ConfirmOptions) (_ SetVersion, err error) {
	defer func() { s.rc.took(delta, confirm, err) }()
	var rep wire.RCAcceptReply
	if err := s.call(ctx, wire.KindRCConfirm, &wire.RCConfirmReq{Delta: delta, TimeoutMS: timeoutMS(ctx, o.Timeout)}, &rep); err != nil {
		return wire.PsetRef{}, err
	}
	return rep.Set, nil
}
