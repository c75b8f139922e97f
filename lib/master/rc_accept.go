package master

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/dynrt/dynrt/lib/daemon"
	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/lib/rc"
	"github.com/dynrt/dynrt/wire"
)

// Phase 3 (thesis §6.4, DESIGN §5): accept and confirm, through the data
// server of the session services (pubsub.go) in the job range; the keys
// are described in lib/daemon/rc.go. The master publishes them itself, in
// the same step that records the accept or the confirmation, so a lookup
// never sees a key before the status it stands for. An abort publishes
// every key a lookup still waits for with the abort, so nobody waits for
// an aborted change.

// rcPublish puts key = value in the job range of j unless it is there.
func (s *state) rcPublish(j *job, owner procRef, key string, value []byte) {
	ss := s.m.sess
	if ss == nil {
		return
	}
	rng := "job:" + j.ns
	if _, missing := ss.pub.find(rng, []string{key}); len(missing) == 0 {
		return
	}
	if err := ss.pub.publish(rng, owner, wire.PersistDefault, []wire.KV{{Key: key, Value: value}}); err != nil {
		s.log.Warn("master: cannot publish a resource change key", "key", key, "err", err)
	}
}

// rcDecide publishes the answer the root got.
func (s *state) rcDecide(run *rcRun, key string, owner procRef, rep *wire.RCAcceptReply, err error) {
	s.rcPublish(run.jr.j, owner, key, daemon.EncodeRCDecision(rep, err))
}

// rcReleaseKeys answers every lookup still waiting for a key of an
// aborted change.
func (s *state) rcReleaseKeys(run *rcRun, why string) {
	ss := s.m.sess
	j := run.jr.j
	if ss == nil || j.done {
		return
	}
	delta := run.r.Delta()
	owner := procRef{j.ns, ^uint32(0)}
	text := []byte(daemon.RCAbortedValue + why)
	s.rcPublish(j, owner, daemon.RCAcceptKey(delta), text)
	s.rcPublish(j, owner, daemon.RCConfirmKey(delta), text)
	rng := "job:" + j.ns
	var keys []string
	for w := range ss.pub.waiters {
		if w.rng != rng {
			continue
		}
		for _, k := range w.keys {
			if strings.HasPrefix(k, delta+":accept:") {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		s.rcPublish(j, owner, k, daemon.EncodeRCDecision(nil, s.rcAbortErr(run)))
	}
	s.rcFailFences(run)
}

// rcFenceAborted refuses to enter a fence of an aborted change (the ID of
// the accept and confirm fences starts with the delta set name), so that a
// member that comes late does not wait for members that learned the abort
// otherwise.
func (s *state) rcFenceAborted(job, id string) error {
	delta, _, ok := strings.Cut(id, ":accept")
	if !ok {
		delta, _, ok = strings.Cut(id, ":confirm")
	}
	if !ok || !strings.HasPrefix(delta, "mpi://rte/") || s.rc == nil {
		return nil
	}
	run, err := s.rcFind(job, delta)
	if err != nil || run.r.Status() != rc.StatusAborted {
		return nil
	}
	return s.rcAbortErr(run)
}

// rcFailFences fails the open fences of an aborted change.
func (s *state) rcFailFences(run *rcRun) {
	ss := s.m.sess
	if ss == nil {
		return
	}
	prefix := run.r.Delta() + ":"
	for key, list := range ss.fences {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		for _, g := range slices.Clone(list) {
			ss.dropFence(g)
			g.fail(s.rcAbortErr(run))
		}
	}
}

// Accept.

func (m *Master) handleRCAccept(ctx context.Context, _ *wire.Request, b *wire.RCAcceptReq) (any, error) {
	if b.Block && b.TimeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(b.TimeoutMS)*time.Millisecond)
		defer cancel()
	}
	rep, err := ask(ctx, m, func(s *state, reply func(*wire.RCAcceptReply, error)) { s.rcAccept(b, reply) })
	if err != nil && ctx.Err() != nil {
		// A blocking accept that gave up: take it back and let the other
		// members know.
		m.post(func(s *state) { s.rcUnblock(b, err) })
	}
	return rep, err
}

// acceptKey resolves the bound set an accept speaks for and its decision
// key.
func acceptKey(run *rcRun, b *wire.RCAcceptReq) (bound, key string) {
	bound = b.Bound
	if bound == "" && len(run.bound) == 1 {
		bound = run.bound[0]
	} else if bound != "" {
		if n, err := pset.Parse(bound); err == nil {
			bound = n.String()
		}
	}
	return bound, daemon.RCDecisionKey(run.r.Delta(), bound, max(b.Call, 1))
}

// rcAccept records an accept, or answers a repeated (polling) call.
func (s *state) rcAccept(b *wire.RCAcceptReq, reply func(*wire.RCAcceptReply, error)) {
	run, err := s.rcFind(b.Job, b.Delta)
	if err != nil {
		reply(nil, err)
		return
	}
	j := run.jr.j
	delta := run.r.Delta()
	bound, key := acceptKey(run, b)
	owner := procRef{j.ns, b.Rank}
	fail := func(err error) {
		s.rcDecide(run, key, owner, nil, err)
		reply(nil, err)
	}
	switch {
	case bound == "":
		fail(wire.Errorf(wire.ErrInvalid, "master: %s is bound to %s; say which set accepts", delta, strings.Join(run.bound, ", ")))
		return
	case !slices.Contains(run.bound, bound):
		fail(wire.Errorf(wire.ErrInvalid, "master: %s is not bound to %s (bound: %s)", delta, bound, strings.Join(run.bound, ", ")))
		return
	case run.r.Status() == rc.StatusAborted:
		fail(s.rcAbortErr(run))
		return
	case run.bmem == nil:
		fail(wire.Errorf(wire.ErrState, "master: %s is not announced yet", delta))
		return
	case !run.bmem[bound].Contains(b.Rank):
		fail(wire.Errorf(wire.ErrPermission, "master: rank %d is not a member of %s, which accepts %s", b.Rank, bound, delta))
		return
	}
	accepted := slices.ContainsFunc(run.r.Accepted(), func(a rc.Accept) bool { return a.From == bound })
	switch {
	case !accepted:
		var set *wire.PsetRef
		if b.Set.Name != "" {
			ref, err := s.rcSetRef(j, b.Set)
			if err != nil {
				fail(err)
				return
			}
			set = &ref
		} else if run.adds() {
			fail(wire.Errorf(wire.ErrInvalid, "master: accepting %s %s needs the new set to continue with", run.typ, delta))
			return
		}
		st, err := run.r.Accept(time.Now(), bound)
		if err != nil {
			fail(err)
			return
		}
		if set != nil {
			if run.sets == nil {
				run.sets = make(map[string]wire.PsetRef)
			}
			run.sets[bound] = *set
		}
		if run.adds() {
			run.newSet = set
			s.rcPublish(j, owner, daemon.RCAcceptKey(delta), []byte(refString(*set)))
		}
		if st == rc.StatusFinalized {
			s.rcFinalized(run)
		} else {
			s.rcUpdate(run, nil)
		}
	case b.Call <= 1:
		fail(wire.Errorf(wire.ErrState, "master: %s has already accepted %s", bound, delta))
		return
	}
	st := run.r.Status()
	// A replaced process learns that it leaves only once the REPLACE is
	// FINALIZED (a blocked accept is answered then): until then it may
	// still be aborted, and the process must stay.
	term := (run.typ == wire.RCSub && run.delta.Contains(b.Rank)) || (run.typ == wire.RCReplace && run.outRR.Contains(b.Rank))
	if b.Block && !st.Terminal() {
		run.blocked = append(run.blocked, rcBlocked{key: key, bound: bound, owner: owner, term: term, reply: reply})
		return
	}
	term = term && (run.typ != wire.RCReplace || st == rc.StatusFinalized)
	rep := &wire.RCAcceptReply{Status: st.String(), Terminate: term, Set: run.sets[bound]}
	s.rcDecide(run, key, owner, rep, nil)
	reply(rep, nil)
}

// rcUnblock takes back a blocking accept whose requester gave up.
func (s *state) rcUnblock(b *wire.RCAcceptReq, err error) {
	run, ferr := s.rcFind(b.Job, b.Delta)
	if ferr != nil {
		return
	}
	_, key := acceptKey(run, b)
	owner := procRef{run.jr.j.ns, b.Rank}
	i := slices.IndexFunc(run.blocked, func(x rcBlocked) bool { return x.key == key && x.owner == owner })
	if i < 0 {
		return
	}
	run.blocked = slices.Delete(run.blocked, i, i+1)
	s.rcDecide(run, key, owner, nil, wire.Errorf(wire.ErrTimeout,
		"master: %s is still %s: %v", run.r.Delta(), run.r.Status(), err))
}

// rcSetRef checks that the set named by an accept exists and pins its
// version (the latest when the name carries none).
func (s *state) rcSetRef(j *job, ref wire.PsetRef) (wire.PsetRef, error) {
	name := ref.Name
	v := int(ref.Version)
	if strings.Contains(name, "@") || ref.Version == 0 {
		v = pset.Latest // the version is in the name, or none was given
	}
	in, err := j.reg.Get(name, v)
	if err != nil {
		return wire.PsetRef{}, wire.Errorf(wire.ErrNotFound, "master: the set to continue with: %w", err)
	}
	return wire.PsetRef{Name: in.Name, Version: uint32(in.Version)}, nil
}

func refString(r wire.PsetRef) string { return r.Name + "@" + uitoa(r.Version) }

// rcFinalized runs when a change becomes FINALIZED.
func (s *state) rcFinalized(run *rcRun) {
	s.rcStopTimer(run)
	s.rcUnpin(run)
	for _, b := range run.blocked {
		rep := &wire.RCAcceptReply{Status: wire.RCFinalized, Terminate: b.term, Set: run.sets[b.bound]}
		s.rcDecide(run, b.key, b.owner, rep, nil)
		b.reply(rep, nil)
	}
	run.blocked = nil
	if run.lost != nil {
		s.rcFailureFinalized(run)
	}
	if run.typ != wire.RCAdd { // SUB, REPLACE: the leaving processes have the grace period
		d := s.m.cfg.RCGrace
		if run.req.GraceMS > 0 {
			d = time.Duration(run.req.GraceMS) * time.Millisecond
		}
		if d <= 0 {
			d = DefaultRCGrace
		}
		m := s.m
		run.timer = time.AfterFunc(d, func() { m.post(func(s *state) { s.rcGraceOver(run) }) })
	}
	s.rcUpdate(run, nil)
	s.rcSettle(run)
}

// Confirm.

func (m *Master) handleRCConfirm(ctx context.Context, _ *wire.Request, b *wire.RCConfirmReq) (any, error) {
	return ask(ctx, m, func(s *state, reply func(*wire.RCAcceptReply, error)) { reply(s.rcConfirm(b)) })
}

func (s *state) rcConfirm(b *wire.RCConfirmReq) (*wire.RCAcceptReply, error) {
	run, err := s.rcFind(b.Job, b.Delta)
	if err != nil {
		return nil, err
	}
	delta := run.r.Delta()
	switch {
	case !run.adds():
		return nil, wire.Errorf(wire.ErrInvalid, "master: only the new processes of an ADD or a REPLACE confirm; %s is a SUB", delta)
	case !run.delta.Contains(b.Rank):
		return nil, wire.Errorf(wire.ErrPermission, "master: rank %d is not a new process of %s", b.Rank, delta)
	}
	switch run.r.Status() {
	case rc.StatusAborted:
		return nil, s.rcAbortErr(run)
	case rc.StatusFinalized:
	case rc.StatusPending:
		if b.Set.Name != "" && run.newSet != nil && (b.Set.Name != run.newSet.Name || b.Set.Version != run.newSet.Version) {
			return nil, wire.Errorf(wire.ErrInvalid, "master: %s was accepted with %s, not %s", delta, refString(*run.newSet), refString(b.Set))
		}
		if err := run.r.Confirm(time.Now()); err != nil {
			return nil, err
		}
		s.rcPublish(run.jr.j, procRef{run.jr.j.ns, b.Rank}, daemon.RCConfirmKey(delta), []byte(refString(*run.newSet)))
		s.rcFinalized(run)
	default:
		return nil, wire.Errorf(wire.ErrState, "master: %s is %s: nothing to confirm before it is accepted", delta, run.r.Status())
	}
	rep := &wire.RCAcceptReply{Status: wire.RCFinalized}
	if run.newSet != nil {
		rep.Set = *run.newSet
	}
	return rep, nil
}
