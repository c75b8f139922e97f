package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Fence aggregation (kv.fence). The processes of this node that enter the
// same fence are sent to the master as one entry (FenceReq.Local lists
// them), once every local participant has entered, and released together
// by its answer. When the node has more than one participant, the first
// to enter goes ahead alone (the scout): the master may fail an instance
// at any time (a participant elsewhere ended, a resource change was
// aborted), and the scout's answer brings that verdict to the entries
// held here. So a fence costs at most two entries per node instead of one
// per process.
//
// The master's rules stay what the processes see:
//   - Local participants are the live processes of this node that the
//     fence names (for a fence over a whole job, those live when the
//     node's first entry arrives). One that ends without entering no
//     longer holds the others back: they are sent without it, and the
//     master fails the instance because it ended.
//   - An entry whose request times out before it is sent is taken back
//     here. Once sent, the master times the entry out at the earliest
//     deadline in it and takes the whole entry back; the processes whose
//     time is up get the timeout, the others wait here again.
//   - An entry whose client goes away stays entered, as it would at the
//     master (a relayed request cannot be called back).
//   - When the scout's instance fails, the held entries fail with it. A
//     scout that times out or is refused gives its role to a held entry.
//   - An entry that finds its round already sent (a process the node did
//     not expect) goes to the master alone, as does every member of an
//     entry the master refuses as invalid (one member not among the
//     participants must not fail the others).
//
// Rounds are keyed like the master's instances (job, fence id and the
// participant list in canonical form); the n-th entry of a process joins
// the oldest round of its key it is not in, as at the master.

type fenceKey struct {
	job   string // job of the entering processes
	id    string
	procs string // canonical participant list (fenceSpec)
}

// fenceRound is the node's entry into one fence instance.
type fenceRound struct {
	key    fenceKey
	procs  []wire.ProcRanges      // as the first entry gave them
	expect map[uint32]bool        // local participants (ranks of key.job) not known to have ended
	in     map[uint32]*fenceEntry // entered (the scout included)
	scout  *fenceEntry            // sent ahead alone and not answered yet
	sent   bool                   // the rest is at the master
}

// fenceEntry is one process's request.
type fenceEntry struct {
	rank     uint32
	collect  bool
	data     []wire.KV // with collect: what it had committed when it entered
	deadline time.Time // zero = none
	round    *fenceRound
	scout    bool          // sent on its own (a scout, or late for its round): not in the round's entry
	done     chan struct{} // closed once err is set
	err      error
}

type fenceTable struct {
	mu     sync.Mutex // taken after d.mu and never before it
	rounds map[fenceKey][]*fenceRound
}

func (s *sessionState) handleFence(ctx context.Context, req *wire.Request, b *wire.FenceReq) (any, error) {
	if req.Conn != nil && req.Conn.Peer().Role == wire.RoleDaemon {
		return s.d.handleFenceUp(ctx, req, b) // entries gathered up the tree (fenceup.go)
	}
	c, err := CallerOf(req)
	if err != nil {
		return nil, err
	}
	if err := s.fence(ctx, c, b); err != nil {
		return nil, err
	}
	return &wire.FenceReply{}, nil
}

// fence enters c into the fence b and returns once it completed: the
// handler of kv.fence, and the daemon's own fences of phase 3 (rc.go),
// which enter on behalf of a local process.
func (s *sessionState) fence(ctx context.Context, c Caller, b *wire.FenceReq) error {
	e := &fenceEntry{rank: c.Rank, collect: b.Collect, done: make(chan struct{})}
	if b.TimeoutMS > 0 {
		e.deadline = time.Now().Add(msDuration(b.TimeoutMS))
	}
	if b.Collect {
		s.mu.Lock()
		if m, ok := s.committed[procKey{c.Job, c.Rank}]; ok {
			e.data = kvList(m)
		}
		s.mu.Unlock()
	}
	spec, ok := fenceSpec(c.Job, b.Procs)
	if !ok { // the master explains what is wrong with it
		s.sendAlone(c.Job, b.ID, b.Procs, e)
		return e.result()
	}
	key := fenceKey{job: c.Job, id: b.ID, procs: spec}
	r, alone, scout := s.enterFence(key, b.Procs, e)
	switch {
	case alone:
		s.sendLate(e)
	case scout:
		s.sendScout(e)
	case r != nil:
		s.flushFence(r) // the last one in sends for everybody
	}
	var timer <-chan time.Time
	if !e.deadline.IsZero() {
		t := time.NewTimer(time.Until(e.deadline))
		defer t.Stop()
		timer = t.C
	}
	for {
		select {
		case <-e.done:
			return e.result()
		case <-timer:
			timer = nil
			if s.takeBack(e) {
				return wire.Errorf(wire.ErrTimeout, "daemon %s: %s of %s: timed out", s.d.node, fenceWhat(b.ID), procKey{c.Job, c.Rank})
			}
			// Sent: the master answers by the deadline.
		case <-ctx.Done():
			return ctxErr(ctx, "daemon %s: %s of %s", s.d.node, fenceWhat(b.ID), procKey{c.Job, c.Rank})
		}
	}
}

func (e *fenceEntry) result() error {
	<-e.done
	return e.err
}

func fenceWhat(id string) string {
	if id == "" {
		return "fence"
	}
	return fmt.Sprintf("fence %q", id)
}

// enterFence puts e into the round it belongs to. It returns the round if
// e completed it (the caller sends it), or alone if e's round is already
// at the master, or scout if e is to go ahead as the round's scout.
func (s *sessionState) enterFence(key fenceKey, procs []wire.ProcRanges, e *fenceEntry) (ready *fenceRound, alone, scout bool) {
	d := s.d
	// d.mu first: a process's end (d.live) is then either in the snapshot
	// of a new round or reported to it by fenceProcEnded.
	d.mu.Lock()
	defer d.mu.Unlock()
	t := &s.fences
	t.mu.Lock()
	defer t.mu.Unlock()
	var r *fenceRound
	for _, x := range t.rounds[key] {
		if x.in[e.rank] == nil {
			r = x
			break
		}
	}
	if r != nil && r.sent {
		// Late for its round: it goes on its own, but is in the round,
		// so that its next entry does not take this round for its next
		// instance while the round's answer is being handed out.
		e.scout = true
		r.in[e.rank] = e
		e.round = r
		return nil, true, false
	}
	if r == nil {
		r = &fenceRound{key: key, procs: procs, expect: d.localParticipants(key.job, procs), in: map[uint32]*fenceEntry{}}
		t.rounds[key] = append(t.rounds[key], r)
	}
	r.in[e.rank] = e
	e.round = r
	if r.complete() {
		r.sent = true
		return r, false, false
	}
	if r.scout == nil {
		e.scout = true
		r.scout = e
		return nil, false, true
	}
	return nil, false, false
}

// localParticipants returns the ranks of job that run here, are alive and
// are named by procs; for a fence over all of job's live processes, not
// those a change is taking away (leaving), as at the master. d.mu must be
// held.
func (d *Daemon) localParticipants(job string, procs []wire.ProcRanges) map[uint32]bool {
	all, ranks := namedRanks(job, procs)
	jc := d.jobs[job]
	out := map[uint32]bool{}
	for k := range d.live {
		if k.job != job {
			continue
		}
		if all && !jc.leaving(k.rank) || slices.ContainsFunc(ranks, func(rr wire.RankRanges) bool { return rr.Contains(k.rank) }) {
			out[k.rank] = true
		}
	}
	return out
}

// namedRanks reads a participant list for job: all of its live processes
// (all), or these ranks.
func namedRanks(job string, procs []wire.ProcRanges) (all bool, ranks []wire.RankRanges) {
	all = len(procs) == 0
	for _, pr := range procs {
		if pr.Job != "" && pr.Job != job {
			continue
		}
		if len(pr.Ranks) == 0 {
			return true, ranks
		}
		ranks = append(ranks, pr.Ranks)
	}
	return all, ranks
}

// leaving reports whether the master's records say that rank is on its
// way out of the job: removed by a SUB past its first accept, or replaced
// by a FINALIZED REPLACE (lib/master procLeaving). d.mu must be held.
func (jc *jobCache) leaving(rank uint32) bool {
	if jc == nil || jc.rcs == nil {
		return false
	}
	for _, r := range jc.rcs.order {
		if goingAway(r) && (r.Type == wire.RCSub && r.Ranks.Contains(rank) || r.Type == wire.RCReplace && r.Out.Contains(rank)) {
			return true
		}
	}
	return false
}

// goingAway reports whether the processes r takes away are leaving now.
func goingAway(r *wire.RC) bool {
	if r.Settled {
		return false // they are gone
	}
	switch r.Type {
	case wire.RCSub:
		return r.Status == wire.RCPending || r.Status == wire.RCFinalized
	case wire.RCReplace:
		return r.Status == wire.RCFinalized
	}
	return false
}

// fenceLeaving stops the open rounds over all of a job's live processes
// from waiting for the local processes r takes away, once they are
// leaving: they will not enter. d.mu must be held.
func (d *Daemon) fenceLeaving(r *wire.RC) {
	if s := d.sess; s != nil && goingAway(r) {
		jc := d.jobs[r.Job]
		s.releaseRounds(r.Job, func(fr *fenceRound, rank uint32) bool {
			all, _ := namedRanks(r.Job, fr.procs)
			return all && fr.in[rank] == nil && jc.leaving(rank)
		})
	}
}

// releaseRounds stops the open rounds of job from waiting for the local
// processes drop selects, and sends those that are complete then.
func (s *sessionState) releaseRounds(job string, drop func(r *fenceRound, rank uint32) bool) {
	t := &s.fences
	var ready []*fenceRound
	t.mu.Lock()
	for key, list := range t.rounds {
		if key.job != job {
			continue
		}
		for _, r := range list {
			if r.sent {
				continue
			}
			n := len(r.expect)
			for rank := range r.expect {
				if drop(r, rank) {
					delete(r.expect, rank)
				}
			}
			if len(r.expect) < n && r.complete() {
				r.sent = true
				ready = append(ready, r)
			}
		}
	}
	t.mu.Unlock()
	for _, r := range ready {
		go s.flushFence(r)
	}
}

// complete reports whether every expected process has entered.
func (r *fenceRound) complete() bool {
	for rank := range r.expect {
		if r.in[rank] == nil {
			return false
		}
	}
	return true
}

// takeBack removes e from its round if the round has not been sent.
func (s *sessionState) takeBack(e *fenceEntry) bool {
	t := &s.fences
	t.mu.Lock()
	defer t.mu.Unlock()
	r := e.round
	if r == nil || r.sent || e.scout || r.in[e.rank] != e {
		return false
	}
	delete(r.in, e.rank)
	e.round = nil
	if len(r.in) == 0 {
		t.drop(r)
	}
	return true
}

// drop forgets a round. t.mu must be held.
func (t *fenceTable) drop(r *fenceRound) {
	list := slices.DeleteFunc(t.rounds[r.key], func(x *fenceRound) bool { return x == r })
	if len(list) == 0 {
		delete(t.rounds, r.key)
		return
	}
	t.rounds[r.key] = list
}

// fenceProcEnded is called once a local process's end has been reported
// to the master: the rounds waiting for it are sent without it.
func (d *Daemon) fenceProcEnded(k procKey) {
	if s := d.sess; s != nil {
		s.releaseRounds(k.job, func(_ *fenceRound, rank uint32) bool { return rank == k.rank })
	}
}

// flushFence sends a complete round (marked sent) to the master and
// settles its entries with the answer.
func (s *sessionState) flushFence(r *fenceRound) {
	t := &s.fences
	for {
		t.mu.Lock()
		body := &wire.FenceReq{ID: r.key.id, Procs: r.procs, Job: r.key.job, Stored: true}
		ranks := slices.Sorted(maps.Keys(r.in))
		ranks = slices.DeleteFunc(ranks, func(rank uint32) bool { return r.in[rank].scout })
		body.Local = wire.RangesOf(ranks)
		var first time.Time
		for _, rank := range ranks {
			e := r.in[rank]
			if e.collect {
				body.Collect = true
				if e.data != nil {
					body.Data = append(body.Data, wire.ProcKV{Job: r.key.job, Rank: rank, Data: e.data})
				}
			}
			if !e.deadline.IsZero() && (first.IsZero() || e.deadline.Before(first)) {
				first = e.deadline
			}
		}
		if !first.IsZero() {
			body.TimeoutMS = ceilMS(time.Until(first))
		}
		if len(ranks) == 0 {
			// Only the scout entered (the others ended): its answer is
			// the round's.
			t.drop(r)
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()

		var rep wire.FenceReply
		err := s.d.callFence(body, &rep, false, r)

		t.mu.Lock()
		switch {
		case err != nil && errors.Is(err, wire.ErrTimeout) && !first.IsZero():
			// The master took the entry back. Those whose time is up
			// get the timeout; the others wait for the ones missing.
			now := time.Now()
			var out []*fenceEntry
			for rank, e := range r.in {
				if !e.scout && !e.deadline.IsZero() && !now.Before(e.deadline) {
					delete(r.in, rank)
					e.round = nil
					out = append(out, e)
				}
			}
			r.sent = len(r.in) > 0 && r.complete()
			if len(r.in) == 0 {
				t.drop(r)
			}
			again := r.sent
			t.mu.Unlock()
			for _, e := range out {
				e.err = err
				close(e.done)
			}
			if again {
				continue
			}
			return
		case err != nil && errors.Is(err, wire.ErrInvalid) && len(ranks) > 1:
			// Probably one member is not a participant: let the master
			// judge each on its own.
			t.drop(r)
			entries := r.members()
			t.mu.Unlock()
			for _, e := range entries {
				go s.sendAlone(r.key.job, r.key.id, r.procs, e)
			}
			return
		}
		t.drop(r)
		entries := r.members()
		t.mu.Unlock()
		if err == nil && !rep.Stored {
			s.fenced(r.key.job, r.procs, body.Collect, rep.Data)
		}
		for _, e := range entries {
			e.err = err
			close(e.done)
		}
		return
	}
}

// sendLate sends an entry that came after its round was sent.
func (s *sessionState) sendLate(e *fenceEntry) {
	r := e.round
	err := s.callAlone(r.key.job, r.key.id, r.procs, e)
	if err != nil {
		t := &s.fences
		t.mu.Lock()
		if r.in[e.rank] == e { // not entered: its next entry belongs here
			delete(r.in, e.rank)
		}
		t.mu.Unlock()
	}
	e.err = err
	close(e.done)
}

// members returns the entries of the round's own entry (not the scout).
// t.mu must be held.
func (r *fenceRound) members() []*fenceEntry {
	var out []*fenceEntry
	for _, e := range r.in {
		if !e.scout {
			out = append(out, e)
		}
	}
	return out
}

// sendScout sends a round's scout ahead and, unless its instance
// completed, applies its answer to the round: a failed instance fails the
// entries held here; a scout taken back (timeout) or refused leaves the
// round, and a held entry goes ahead in its place.
func (s *sessionState) sendScout(e *fenceEntry) {
	t := &s.fences
	r := e.round
	// e is settled last: once answered, its process may enter again, and
	// must find the round as the answer left it.
	err := s.callAlone(r.key.job, r.key.id, r.procs, e)
	defer func() {
		e.err = err
		close(e.done)
	}()
	{
		var failed []*fenceEntry
		var next *fenceEntry
		flush := false
		t.mu.Lock()
		if r.scout == e {
			r.scout = nil
		}
		switch {
		case err == nil || r.sent:
			// Completed (the rest is at the master too), or the rest's
			// own answer settles it.
			if err != nil && r.in[e.rank] == e {
				delete(r.in, e.rank)
			}
		case errors.Is(err, wire.ErrTimeout) || errors.Is(err, wire.ErrInvalid):
			if r.in[e.rank] == e {
				delete(r.in, e.rank)
			}
			if len(r.in) == 0 {
				t.drop(r)
				break
			}
			if r.complete() {
				r.sent = true
				flush = true
				break
			}
			for _, x := range r.in {
				if !x.scout {
					next = x
					break
				}
			}
			if next != nil {
				next.scout = true
				r.scout = next
			}
		default:
			// The instance failed (or the master is gone): so does
			// everybody who entered it here.
			t.drop(r)
			failed = r.members()
			r.sent = true // nothing is sent for it any more
		}
		t.mu.Unlock()
		for _, x := range failed {
			x.err = err
			close(x.done)
		}
		// Not on this goroutine: the scout's own answer must not wait.
		if flush {
			go s.flushFence(r)
		}
		if next != nil {
			go s.sendScout(next)
		}
	}
}

// sendAlone enters e into the fence at the master by itself and settles
// it with the answer.
func (s *sessionState) sendAlone(job, id string, procs []wire.ProcRanges, e *fenceEntry) {
	e.err = s.callAlone(job, id, procs, e)
	close(e.done)
}

// callAlone enters e into the fence at the master by itself.
func (s *sessionState) callAlone(job, id string, procs []wire.ProcRanges, e *fenceEntry) error {
	body := &wire.FenceReq{ID: id, Procs: procs, Collect: e.collect, Job: job, Stored: true}
	body.Local = wire.Span(e.rank, e.rank)
	if e.data != nil {
		body.Data = []wire.ProcKV{{Job: job, Rank: e.rank, Data: e.data}}
	}
	if !e.deadline.IsZero() {
		body.TimeoutMS = ceilMS(time.Until(e.deadline))
	}
	var rep wire.FenceReply
	err := s.d.callFence(body, &rep, true, e.round)
	if err == nil && !rep.Stored {
		s.fenced(job, procs, e.collect, rep.Data)
	}
	return err
}

// ceilMS is d in whole ms, rounded up and at least 1, so that the master
// never gives up before the deadline it stands for.
func ceilMS(d time.Duration) int64 {
	return max(int64((d+time.Millisecond-1)/time.Millisecond), 1)
}

// fenceSpec is the canonical form of a participant list, as the master
// forms it (master's participants): no entries = the caller's job, a job
// named without ranks = every rank of it, ranks sorted and merged. It
// reports false for lists the master will refuse.
func fenceSpec(callerJob string, procs []wire.ProcRanges) (string, bool) {
	spec, err := wire.CanonProcs(callerJob, procs)
	return spec.Key, err == nil
}
