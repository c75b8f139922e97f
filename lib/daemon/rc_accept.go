package daemon

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/lib/rc"
	"github.com/dynrt/dynrt/wire"
	"time"
)

// Phase 3 done by the daemon (docs/wire.md, "Phase 3"): a process sends
// one rc.accept or rc.confirm and gets the decision as the reply; the
// collective part runs here, on behalf of the local process, so that a
// client in any language needs no key names, fences or decision format.
//
//   - rc.accept, member form: every member of the bound set (at the
//     version of the announcement) sends one. The daemon numbers the
//     member's calls, fences the members on call 1 (fence
//     "<delta>:accept:<bound>"), forwards the root's request to the master
//     and hands every other member the root's answer, which the master
//     publishes under the decision key (RCDecisionKey). Terminate is set
//     per caller.
//   - rc.accept with Alone: the root alone; no fence, nobody waits.
//   - rc.confirm: every new process of an ADD or REPLACE sends one. The
//     daemon waits for the accept key, fences the new processes (fence
//     "<delta>:confirm"), forwards the lowest one's request and gives the
//     others the confirmation key's set.
//
// Every wait ends with the request's TimeoutMS, the client's connection,
// or the change's abort (seen in the pushed record, and published by the
// master into the keys).

// acceptKey names one member's accept calls of one change and bound set.
type acceptKey struct {
	delta, bound string
	rank         uint32
}

// acceptPlan is what an accept resolved to before it runs.
type acceptPlan struct {
	key     acceptKey
	rec     wire.RC      // the change as announced (BoundRefs, Ranks, Out)
	ref     wire.PsetRef // the bound set's version that accepts
	members wire.RankRanges
	root    uint32
	call    uint32
}

// handleRCAccept serves rc.accept from a local process.
func (d *Daemon) handleRCAccept(ctx context.Context, req *wire.Request, b *wire.RCAcceptReq) (any, error) {
	c, err := CallerOf(req)
	if err != nil {
		return nil, err
	}
	return d.rcAccept(ctx, c, b)
}

// rcAccept runs an accept of process c (a client's rc.accept, or the
// accept event of a PMIx process, pmix_events.go).
func (d *Daemon) rcAccept(ctx context.Context, c Caller, b *wire.RCAcceptReq) (_ *wire.RCAcceptReply, err error) {
	ctx, cancel := withTimeout(ctx, b.TimeoutMS)
	defer cancel()
	defer func() { d.abortSeen(ctx, err, c.Job, b.Delta) }()
	p, err := d.planAccept(c, b)
	if errors.Is(err, wire.ErrAborted) {
		d.tookPart(c.Job, c.Rank, b.Delta, "", err) // the abort is reported
	}
	if err != nil {
		return nil, err
	}
	defer func() { d.tookPart(c.Job, c.Rank, p.rec.Delta, p.ref.Name, err) }()
	consumed := false
	defer func() { d.acceptDone(c.Job, p, consumed) }()

	var rep *wire.RCAcceptReply
	switch {
	case b.Alone:
		consumed = true
		rep, err = d.forwardAccept(ctx, c, p, b)
	default:
		// A member other than the root asks for the root's answer before
		// the fence, so that the wait is in place when the root answers.
		var answer <-chan lookupResult
		if c.Rank != p.root {
			lctx, lcancel := context.WithCancel(ctx)
			defer lcancel()
			answer = d.lookupAsync(lctx, c, RCDecisionKey(p.rec.Delta, p.ref.Name, p.call))
		}
		if p.call == 1 {
			// Everyone has built the new set before the root speaks
			// for them.
			err := d.sess.fence(ctx, c, &wire.FenceReq{
				ID: p.rec.Delta + ":accept:" + p.ref.Name, Procs: []wire.ProcRanges{{Ranks: p.members}}, TimeoutMS: msLeft(ctx),
			})
			if err != nil {
				return nil, err // not consumed: a retry is call 1 again
			}
		}
		consumed = true
		if c.Rank == p.root {
			rep, err = d.forwardAccept(ctx, c, p, b)
			break
		}
		var v []byte
		v, err = d.rcWait(ctx, c.Job, p.rec.Delta, answer, "the answer of the root (rank "+uitoa(p.root)+")")
		if err == nil {
			rep, err = DecodeRCDecision(v)
		}
	}
	if err != nil {
		return nil, err
	}
	out := *rep
	out.Terminate = rc.Terminates(&p.rec, c.Rank, out.Status)
	return &out, nil
}

// planAccept checks an accept against the daemon's copy of the change and
// of the bound set, and numbers the call. The member's key is marked busy
// until acceptDone.
func (d *Daemon) planAccept(c Caller, b *wire.RCAcceptReq) (*acceptPlan, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	jc, rec, err := d.rcRecord(c, b.Delta)
	if err != nil {
		return nil, err
	}
	ref, members, err := d.boundOf(jc, c, rec, b.Bound)
	if err != nil {
		return nil, err
	}
	setv := ref.Name + "@" + uitoa(ref.Version)
	root := members[0].Lo
	if b.Root != nil {
		root = *b.Root
		if !members.Contains(root) {
			return nil, wire.Errorf(wire.ErrInvalid, "daemon %s: accept of %s: root %d is not a member of %s (members %s)", d.node, rec.Delta, root, setv, members)
		}
	}
	switch {
	case b.Alone && root != c.Rank:
		return nil, wire.Errorf(wire.ErrInvalid, "daemon %s: accept of %s: only the root (rank %d of %s) sends the alone form, not rank %d", d.node, rec.Delta, root, setv, c.Rank)
	case b.Set.Name != "" && root != c.Rank:
		return nil, wire.Errorf(wire.ErrInvalid, "daemon %s: accept of %s: rank %d names a new set, but only the root (rank %d of %s) does", d.node, rec.Delta, c.Rank, root, setv)
	}
	k := acceptKey{delta: rec.Delta, bound: ref.Name, rank: c.Rank}
	rcs := jc.rcs
	if rcs.busy[k] {
		return nil, wire.Errorf(wire.ErrBusy, "daemon %s: rank %d already has an accept of %s for %s under way", d.node, c.Rank, rec.Delta, ref.Name)
	}
	call := b.Call
	if call == 0 {
		call = rcs.calls[k] + 1
	}
	if rcs.busy == nil {
		rcs.busy = make(map[acceptKey]bool)
		rcs.calls = make(map[acceptKey]uint32)
	}
	rcs.busy[k] = true
	rcs.mark(rcPart{rec.Delta, ref.Name, c.Rank}) // started: queries with need skip it from now on
	return &acceptPlan{key: k, rec: *rec, ref: ref, members: members, root: root, call: call}, nil
}

// acceptDone ends an accept: it counts the call if it was consumed (the
// fence passed, or it went to the master).
func (d *Daemon) acceptDone(job string, p *acceptPlan, consumed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	jc := d.jobs[job]
	if jc == nil || jc.rcs == nil {
		return
	}
	delete(jc.rcs.busy, p.key)
	if consumed && jc.rcs.byDelta[p.key.delta] != nil && p.call > jc.rcs.calls[p.key] {
		jc.rcs.calls[p.key] = p.call
	}
}

// rcRecord finds the caller's job and its record of delta, refusing an
// aborted change. d.mu must be held.
func (d *Daemon) rcRecord(c Caller, delta string) (*jobCache, *wire.RC, error) {
	jc := d.jobs[c.Job]
	if jc == nil {
		return nil, nil, wire.Errorf(wire.ErrNotFound, "daemon %s: job %s is not known here", d.node, c.Job)
	}
	n, err := pset.Parse(delta)
	if err != nil {
		return nil, nil, wire.Errorf(wire.ErrInvalid, "daemon %s: delta set: %w", d.node, err)
	}
	var rec *wire.RC
	if jc.rcs != nil {
		rec = jc.rcs.byDelta[n.String()]
	}
	if rec == nil {
		return nil, nil, wire.Errorf(wire.ErrNotFound, "daemon %s: job %s has no resource change %s", d.node, c.Job, n)
	}
	if rec.Status == wire.RCAborted {
		return nil, nil, abortedErr(d.node, rec.Delta, rec.Reason)
	}
	return jc, rec, nil
}

func abortedErr(node, delta, why string) error {
	return wire.Errorf(wire.ErrAborted, "daemon %s: resource change %s was aborted: %s", node, delta, why)
}

// boundOf resolves the bound set the caller accepts for and its members
// at the announcement, from this daemon's copy of the sets. d.mu must be
// held.
func (d *Daemon) boundOf(jc *jobCache, c Caller, rec *wire.RC, name string) (wire.PsetRef, wire.RankRanges, error) {
	ref, m, err := rc.BoundOf(rec, c.Rank, name, func(ref wire.PsetRef) (wire.RankRanges, error) {
		if h := jc.sets[ref.Name]; h != nil {
			if p, ok := h.at(ref.Version); ok {
				return p.Members, nil
			}
		}
		return nil, wire.Errorf(wire.ErrNotFound, "version %d of %s (bound to %s) is not known here", ref.Version, ref.Name, rec.Delta)
	})
	if err != nil {
		return ref, m, fmt.Errorf("daemon %s: %w", d.node, err)
	}
	return ref, m, nil
}

// forwardAccept sends the root's accept to the master.
func (d *Daemon) forwardAccept(ctx context.Context, c Caller, p *acceptPlan, b *wire.RCAcceptReq) (*wire.RCAcceptReply, error) {
	body := &wire.RCAcceptReq{
		Delta: p.rec.Delta, Job: c.Job, Rank: c.Rank, Set: b.Set, Block: b.Block, Bound: p.ref.Name, Call: p.call,
	}
	if b.Block {
		body.TimeoutMS = msLeft(ctx)
	}
	rep := new(wire.RCAcceptReply)
	if err := d.master.Call(ctx, wire.KindRCAccept, body, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// handleRCConfirm serves rc.confirm from a new process.
func (d *Daemon) handleRCConfirm(ctx context.Context, req *wire.Request, b *wire.RCConfirmReq) (any, error) {
	c, err := CallerOf(req)
	if err != nil {
		return nil, err
	}
	return d.rcConfirm(ctx, c, b)
}

// rcConfirm runs a confirm of the new process c (a client's rc.confirm,
// or the confirm event of a PMIx process, pmix_space.go).
func (d *Daemon) rcConfirm(ctx context.Context, c Caller, b *wire.RCConfirmReq) (_ *wire.RCAcceptReply, err error) {
	ctx, cancel := withTimeout(ctx, b.TimeoutMS)
	defer cancel()
	defer func() { d.abortSeen(ctx, err, c.Job, b.Delta) }()
	d.mu.Lock()
	_, r, err := d.rcRecord(c, b.Delta)
	var rec wire.RC
	if err == nil {
		rec = *r
	}
	d.mu.Unlock()
	switch {
	case err != nil:
		if errors.Is(err, wire.ErrAborted) {
			d.tookPart(c.Job, c.Rank, b.Delta, partConfirm, err) // the abort is reported
		}
		return nil, err
	case rec.Type != wire.RCAdd && rec.Type != wire.RCReplace:
		return nil, wire.Errorf(wire.ErrInvalid, "daemon %s: %s is a %s; only the new processes of an ADD or a REPLACE confirm", d.node, rec.Delta, rec.Type)
	case !rec.Ranks.Contains(c.Rank):
		return nil, wire.Errorf(wire.ErrPermission, "daemon %s: rank %d is not a new process of %s (new: %s)", d.node, c.Rank, rec.Delta, rec.Ranks)
	case rec.Status == wire.RCFinalized && rec.NewSet != nil:
		// Confirmed: every new process entered the confirm fence before
		// the lowest confirmed, so this is a repeated confirm, and a
		// fence again would wait for the others in vain.
		return &wire.RCAcceptReply{Status: wire.RCFinalized, Set: *rec.NewSet}, nil
	}
	d.tookPart(c.Job, c.Rank, rec.Delta, partConfirm, nil) // started: queries with need skip it from now on
	defer func() { d.tookPart(c.Job, c.Rank, rec.Delta, partConfirm, err) }()
	set, err := d.rcWaitSet(ctx, c, rec.Delta, RCAcceptKey(rec.Delta), "the accept")
	if err != nil {
		return nil, err
	}
	err = d.sess.fence(ctx, c, &wire.FenceReq{
		ID: rec.Delta + ":confirm", Procs: []wire.ProcRanges{{Ranks: rec.Ranks}}, TimeoutMS: msLeft(ctx),
	})
	if err != nil {
		return nil, err
	}
	if c.Rank == rec.Ranks[0].Lo {
		rep := new(wire.RCAcceptReply)
		body := &wire.RCConfirmReq{Delta: rec.Delta, Job: c.Job, Rank: c.Rank, Set: set}
		if err := d.master.Call(ctx, wire.KindRCConfirm, body, rep); err != nil {
			return nil, err
		}
		return rep, nil
	}
	set, err = d.rcWaitSet(ctx, c, rec.Delta, RCConfirmKey(rec.Delta), "the confirmation of rank "+uitoa(rec.Ranks[0].Lo))
	if err != nil {
		return nil, err
	}
	return &wire.RCAcceptReply{Status: wire.RCFinalized, Set: set}, nil
}

// rcWaitSet waits for a phase 3 text key: "<set>@<version>", or the abort.
func (d *Daemon) rcWaitSet(ctx context.Context, c Caller, delta, key, what string) (wire.PsetRef, error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v, err := d.rcWait(ctx, c.Job, delta, d.lookupAsync(lctx, c, key), what)
	if err != nil {
		return wire.PsetRef{}, err
	}
	sv := string(v)
	if why, ok := strings.CutPrefix(sv, RCAbortedValue); ok {
		return wire.PsetRef{}, abortedErr(d.node, delta, why)
	}
	n, ver, err := pset.ParseRef(sv)
	if err != nil || ver < 0 {
		return wire.PsetRef{}, wire.Errorf(wire.ErrInternal, "daemon %s: resource change %s: bad set %q under %s", d.node, delta, sv, key)
	}
	return wire.PsetRef{Name: n.String(), Version: uint32(ver)}, nil
}

type lookupResult struct {
	v   []byte
	err error
}

// lookupAsync waits at the master's data server for one key of the
// caller's job range, until ctx ends.
func (d *Daemon) lookupAsync(ctx context.Context, c Caller, key string) <-chan lookupResult {
	ch := make(chan lookupResult, 1)
	go func() {
		var rep wire.LookupReply
		err := d.master.Call(ctx, wire.KindLookup, &wire.LookupReq{
			Job: c.Job, Rank: c.Rank, Keys: []string{key}, Wait: true, TimeoutMS: msLeft(ctx),
		}, &rep)
		switch {
		case err != nil:
			ch <- lookupResult{err: err}
		case len(rep.Data) != 1:
			ch <- lookupResult{err: wire.Errorf(wire.ErrInternal, "daemon %s: lookup of %q returned %d values", d.node, key, len(rep.Data))}
		default:
			ch <- lookupResult{v: rep.Data[0].Value}
		}
	}()
	return ch
}

// rcWait waits for an answer of phase 3, ending early when the change is
// aborted (its record here says so) or ctx ends.
func (d *Daemon) rcWait(ctx context.Context, job, delta string, answer <-chan lookupResult, what string) ([]byte, error) {
	for {
		d.mu.Lock()
		var wake chan struct{}
		var rec *wire.RC
		if jc := d.jobs[job]; jc != nil && jc.rcs != nil {
			wake, rec = jc.rcs.wake, jc.rcs.byDelta[delta]
		}
		var why string
		aborted := rec != nil && rec.Status == wire.RCAborted
		if aborted {
			why = rec.Reason
		}
		d.mu.Unlock()
		if aborted {
			select {
			case r := <-answer: // it may have come with the abort
				return r.v, r.err
			default:
				return nil, abortedErr(d.node, delta, why)
			}
		}
		select {
		case r := <-answer:
			return r.v, r.err
		case <-wake:
		case <-ctx.Done():
			return nil, ctxErr(ctx, "daemon %s: %s: waiting for %s", d.node, delta, what)
		}
	}
}

// abortSeenWait bounds abortSeen: the abort's pushes follow its answer
// closely unless the daemon's connection is in trouble.
const abortSeenWait = 10 * time.Second

// abortSeen returns, when err says that the change delta of job was
// aborted, once this daemon's copy of that change says so too. The master
// answers the waiting requests of an aborted change directly, and pushes
// the reverted job data and sets, then the record, through the daemon's
// ordered queue; a process told of the abort by the answer must find the
// job as the abort left it when it next asks its daemon (its size, its
// sets), not as the change had made it.
func (d *Daemon) abortSeen(ctx context.Context, err error, job, delta string) {
	if !errors.Is(err, wire.ErrAborted) {
		return
	}
	n, perr := pset.Parse(delta)
	if perr != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortSeenWait)
	defer cancel()
	for {
		d.mu.Lock()
		var wake chan struct{}
		seen := true // nothing to wait for: no record here, or it says so
		if jc := d.jobs[job]; jc != nil && jc.rcs != nil {
			if rec := jc.rcs.byDelta[n.String()]; rec != nil && rec.Status != wire.RCAborted {
				wake, seen = jc.rcs.wake, false
			}
		}
		d.mu.Unlock()
		if seen {
			return
		}
		select {
		case <-wake:
		case <-ctx.Done():
			d.log.Warn("daemon: a resource change's abort was answered, but its record has not arrived", "job", job, "delta", delta)
			return
		}
	}
}

func uitoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
