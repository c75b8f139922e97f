package daemon

import (
	"context"
	"slices"
	"strconv"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// Resource changes (DESIGN §5). The master pushes every update of a change
// record (rc.push); the daemon keeps them per job and answers rc.query
// from that copy, so the query of listing 6.1 costs one local round trip.
// Requests, accepts, confirmations and set operations go to the master
// with the caller's identity stamped in.

// Keys of phase 3 in the job range of the data server (published by the
// master, looked up by the daemons for their processes, rc_accept.go;
// internal: clients send rc.accept and rc.confirm and never see them):
//
//	<delta>:accept           "<set>@<version>": the root of the bound set
//	                         accepted an ADD (status PENDING)
//	<delta>:confirm          "<set>@<version>": a new process confirmed
//	                         (status FINALIZED)
//	<delta>:accept:<set>:<n> the answer the root of <set> got for its n-th
//	                         accept call, so that the other members of the
//	                         set return the same answer
//
// An aborted change gets its text keys published as RCAbortedValue plus
// the reason, and the decision keys as errors, so no lookup waits for it.

// RCAbortedValue starts the value of a text key of an aborted change.
const RCAbortedValue = "ABORTED: "

// RCAcceptKey names the key of an ADD's accept.
func RCAcceptKey(delta string) string { return delta + ":accept" }

// RCConfirmKey names the key of an ADD's confirmation.
func RCConfirmKey(delta string) string { return delta + ":confirm" }

// RCDecisionKey names the key of the answer to the call-th accept of set.
func RCDecisionKey(delta, set string, call uint32) string {
	return delta + ":accept:" + set + ":" + strconv.FormatUint(uint64(call), 10)
}

// EncodeRCDecision encodes the answer of an accept as published under its
// decision key: 'R' and the msgpack reply, or 'E' and the wire error.
func EncodeRCDecision(rep *wire.RCAcceptReply, err error) []byte {
	if err != nil {
		b, _ := wire.Marshal(wire.ToWire(err))
		return append([]byte{'E'}, b...)
	}
	b, _ := wire.Marshal(rep)
	return append([]byte{'R'}, b...)
}

// DecodeRCDecision is the inverse of EncodeRCDecision.
func DecodeRCDecision(v []byte) (*wire.RCAcceptReply, error) {
	if len(v) == 0 {
		return nil, wire.Errorf(wire.ErrMalformed, "empty accept decision")
	}
	switch v[0] {
	case 'R':
		rep := new(wire.RCAcceptReply)
		if err := wire.Unmarshal(v[1:], rep); err != nil {
			return nil, err
		}
		return rep, nil
	case 'E':
		var we wire.Error
		if err := wire.Unmarshal(v[1:], &we); err != nil {
			return nil, err
		}
		return nil, &we
	}
	return nil, wire.Errorf(wire.ErrMalformed, "accept decision starts with %q", v[0])
}

// rcCache holds the change records of one job, oldest first. It lives in
// jobCache and is guarded by Daemon.mu.
type rcCache struct {
	order   []*wire.RC
	byDelta map[string]*wire.RC
	wake    chan struct{} // closed and replaced on every update (phase 3 waits watch for aborts)
	// Phase 3 accepts of the local processes (rc_accept.go): calls
	// counted so far, and the ones under way.
	calls map[acceptKey]uint32
	busy  map[acceptKey]bool
	// What each local rank has done of a change, for rc.query's need
	// (need.go); dropped with the change.
	parts map[rcPart]bool
}

func newRCCache() *rcCache {
	return &rcCache{byDelta: make(map[string]*wire.RC), wake: make(chan struct{})}
}

// forget drops the record of delta (the master forgot the change).
func (c *rcCache) forget(delta string) {
	if c == nil || c.byDelta[delta] == nil {
		return
	}
	rec := c.byDelta[delta]
	delete(c.byDelta, delta)
	if i := slices.Index(c.order, rec); i >= 0 {
		c.order = slices.Delete(c.order, i, i+1)
	}
	for k := range c.calls {
		if k.delta == delta {
			delete(c.calls, k)
		}
	}
	for k := range c.parts {
		if k.delta == delta {
			delete(c.parts, k)
		}
	}
}

// rcRoutes registers the resource change requests: called once from
// routes.
func (d *Daemon) rcRoutes() {
	wire.HandleTyped(d.fromMaster, wire.KindRCPush, d.handleRCPush)
	wire.HandleTyped(d.clients, wire.KindRCQuery, d.handleRCQuery)

	relay(d, wire.KindRCRequest, func(b *wire.RCRequest, c Caller) {
		b.Job, b.Requester, b.RequesterID = c.Job, wire.ByApp, "rank "+strconv.FormatUint(uint64(c.Rank), 10)
	})
	wire.HandleTyped(d.clients, wire.KindRCAccept, d.handleRCAccept)
	wire.HandleTyped(d.clients, wire.KindRCConfirm, d.handleRCConfirm)
	relay(d, wire.KindPsetOp, func(b *wire.PsetOpReq, c Caller) { b.Job, b.Rank = c.Job, c.Rank })
	relay(d, wire.KindPsetDelete, func(b *wire.PsetDeleteReq, c Caller) { b.Job = c.Job })
	relay(d, wire.KindRCCancel, func(b *wire.RCCancelReq, c Caller) { b.Job, b.Rank = c.Job, c.Rank })
}

// handleRCPush stores a record unless a newer update of it is here
// already.
func (d *Daemon) handleRCPush(_ context.Context, _ *wire.Request, b *wire.RC) (any, error) {
	if b.Delta == "" || b.Job == "" {
		return nil, wire.Errorf(wire.ErrInvalid, "daemon %s: rc.push without a delta set or job", d.node)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	jc := d.jobs[b.Job]
	if jc == nil {
		return nil, wire.Errorf(wire.ErrNotFound, "daemon %s: resource change for unknown job %s", d.node, b.Job)
	}
	if jc.rcs == nil {
		jc.rcs = newRCCache()
	}
	defer func() { // wake the phase 3 waits of this job
		close(jc.rcs.wake)
		jc.rcs.wake = make(chan struct{})
	}()
	rec := *b
	defer d.fenceLeaving(&rec)
	if old := jc.rcs.byDelta[b.Delta]; old != nil {
		if old.Seq <= b.Seq {
			changed := old.Status != rec.Status
			*old = rec
			if changed {
				d.pmix.announce(&rec, false) // pmix_events.go
			}
		}
		return nil, nil
	}
	p := &rec
	jc.rcs.byDelta[b.Delta] = p
	jc.rcs.order = append(jc.rcs.order, p)
	d.pmix.announce(&rec, true)
	return nil, nil
}

// handleRCQuery answers listing 6.1: the change named by Delta, or the
// latest change bound to Bound (mpi://app/<app> by default; mpi://SELF:
// the latest that adds or removes the caller or binds a set holding it).
func (d *Daemon) handleRCQuery(_ context.Context, req *wire.Request, b *wire.RCQueryReq) (any, error) {
	c, err := CallerOf(req)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	job := b.Job
	if job == "" {
		job = c.Job
	}
	jc := d.jobs[job]
	if jc == nil {
		return nil, wire.Errorf(wire.ErrNotFound, "daemon %s: job %s is not known here", d.node, job)
	}
	rank := c.Rank
	if job != c.Job && b.Rank != nil {
		rank = *b.Rank
	}
	var rec *wire.RC
	switch {
	case b.Delta != "":
		n, err := pset.Parse(b.Delta)
		if err != nil {
			return nil, err
		}
		if jc.rcs != nil {
			rec = jc.rcs.byDelta[n.String()]
		}
		if rec == nil {
			return nil, wire.Errorf(wire.ErrNotFound, "daemon %s: job %s has no resource change %s", d.node, job, n)
		}
	case jc.rcs != nil:
		bound := pset.AppName(jc.data.App)
		if b.Bound != "" {
			n, err := pset.Parse(b.Bound)
			if err != nil {
				return nil, err
			}
			bound = n.String()
		}
		for i := len(jc.rcs.order) - 1; i >= 0 && rec == nil; i-- {
			r := jc.rcs.order[i]
			if bound == pset.NameSelf {
				if jc.concerns(r, rank) {
					rec = r
				}
				continue
			}
			for _, s := range r.Bound {
				if s == bound {
					rec = r
					break
				}
			}
		}
	}
	if rec != nil && b.Need && b.Delta == "" && job == c.Job && !jc.needs(rec, rank) {
		rec = nil
	}
	if rec == nil {
		return &wire.RCQueryReply{}, nil
	}
	out := *rec
	return &wire.RCQueryReply{RC: &out, Incl: rec.Ranks.Contains(rank)}, nil
}

// concerns reports whether rank is in the delta of r or was a member of
// one of its bound sets when it was announced. d.mu must be held.
func (jc *jobCache) concerns(r *wire.RC, rank uint32) bool {
	if r.Ranks.Contains(rank) {
		return true
	}
	for _, ref := range r.BoundRefs {
		if h := jc.sets[ref.Name]; h != nil {
			if p, ok := h.at(ref.Version); ok && p.Members.Contains(rank) {
				return true
			}
		}
	}
	return false
}

// launchDelta names the ADD or REPLACE that started rank ("" for a process of the
// launch). d.mu must be held.
func (jc *jobCache) launchDelta(rank uint32) string {
	if jc.rcs == nil {
		return ""
	}
	for i := len(jc.rcs.order) - 1; i >= 0; i-- {
		if r := jc.rcs.order[i]; (r.Type == wire.RCAdd || r.Type == wire.RCReplace) && r.Ranks.Contains(rank) {
			return r.Delta
		}
	}
	return ""
}
