package master

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/lib/rc"
	"github.com/dynrt/dynrt/wire"
)

// Failure policies (docs/rc.md "Failures as changes"). A job's policy says
// what the loss of a process that no change removes does to it: abort
// tears the job down, continue leaves it running without the lost ranks,
// shrink turns the loss into an ordinary SUB of exactly the lost ranks
// (a "failure change", made by the runtime, with a cause), so that a
// malleable application adapts to it on the path it uses for any change;
// replace turns it into a REPLACE of the lost ranks by as many new
// processes (rc_replace.go), so that the job keeps its size.
// Everything here runs on the loop.

// failurePolicy checks the policy a launch asks for. KeepGoing (dynrun
// --keep-going) is the continue policy under its older name.
func failurePolicy(b *wire.JobLaunchReq) (string, error) {
	p := strings.ToLower(b.OnFailure)
	switch p {
	case "":
		if b.KeepGoing {
			return wire.OnFailureContinue, nil
		}
		return wire.OnFailureAbort, nil
	case wire.OnFailureAbort, wire.OnFailureShrink, wire.OnFailureReplace:
	case wire.OnFailureContinue:
		return p, nil
	default:
		return "", wire.Errorf(wire.ErrInvalid, "master: unknown failure policy %q: want abort, continue, shrink or replace", b.OnFailure)
	}
	if b.KeepGoing {
		return "", wire.Errorf(wire.ErrInvalid, "master: keep-going is the failure policy continue; it cannot be combined with %q", p)
	}
	return p, nil
}

// lossChanges reports whether j's policy turns a loss into a change
// (shrink, replace).
func (j *job) lossChanges() bool {
	return j.policy == wire.OnFailureShrink || j.policy == wire.OnFailureReplace
}

// lostRank is one process lost under the shrink policy.
type lostRank struct {
	rank uint32
	node string
	why  string   // "rank 3 on node1 killed by signal 9"
	how  string   // wire.Fail* value
	code int      // exit status to report if the job ends because of it
	sets []string // the malleable sets that held it when it died (before flushDead took it out)
}

// lossAct is what a loss under the shrink policy does.
type lossAct int

const (
	lossJudge lossAct = iota // judged as under the abort policy (the job is already being killed, or the process never ran)
	lossEnd                  // the job cannot be kept: it ends with the loss's report
	lossFold                 // fold into the failure SUB in flight (not yet announced): it is aborted and restarted with every lost rank
	lossWait                 // wait: another change is in flight; the failure SUB goes ahead of queued requests once it settles
	lossStart                // start a failure SUB (once the burst this loss belongs to is in)
)

func (a lossAct) String() string {
	return [...]string{"judge", "end", "fold", "wait", "start"}[a]
}

// lossView is what decides a loss: pure data, for decideLoss.
type lossView struct {
	killing bool   // the job is being killed already
	static  string // why the job cannot change (an MPI job started through PMI), "" if it can
	live    int    // members of the job still alive after this loss (the new processes of a change in flight do not count)
	cur     string // the change in flight: "" none, "failure-null" a failure SUB not yet announced, "other" anything else
}

// decideLoss decides what the loss of a process of a shrink job does,
// and why the job ends when it does.
func decideLoss(v lossView) (lossAct, string) {
	switch {
	case v.killing:
		return lossJudge, ""
	case v.static != "":
		return lossEnd, "the job cannot shrink: " + v.static
	case v.live == 0:
		return lossEnd, "every process of the job was lost"
	case v.cur == "failure-null":
		return lossFold, ""
	case v.cur != "":
		return lossWait, ""
	}
	return lossStart, ""
}

// shrinkLoss handles the loss of a process of a job with the shrink
// policy; false means the loss is to be judged as a failure as usual.
func (s *state) shrinkLoss(j *job, l lostRank) bool {
	jr := s.jobRC(j)
	l.sets = s.heldBy(j, []uint32{l.rank})[l.rank]
	if n := len(jr.order); len(l.sets) == 0 && n > 0 && jr.order[n-1].r.Status() != rc.StatusFinalized {
		// The latest change took it out of its sets (a SUB's phase 2 ran
		// before it died; its death has just aborted that SUB): bind to
		// the sets that held it before.
		l.sets = jr.order[n-1].held[l.rank]
	}
	v := lossView{killing: j.kill != nil, live: j.live}
	if cur := jr.cur; cur != nil && !cur.settled && cur.adds() && cur.r.Status() != rc.StatusFinalized {
		// The new processes of an ADD or REPLACE not yet FINALIZED are no
		// members: if the loss leaves none, the change aborts and they go.
		for _, r := range cur.ranks {
			if !cur.gone[r] && s.procLive(procRef{j.ns, r}) {
				v.live--
			}
		}
	}
	if err := j.staticErr(); err != nil {
		v.static = strings.TrimPrefix(err.Error(), "master: ")
	}
	if cur := jr.cur; cur != nil && !cur.settled {
		v.cur = "other"
		if cur.lost != nil && cur.r.Status() == rc.StatusNull {
			v.cur = "failure-null"
		}
	}
	act, why := decideLoss(v)
	if act == lossJudge {
		return false
	}
	jr.lost = append(jr.lost, l)
	switch act {
	case lossEnd:
		s.lossEnd(j, jr.lost, why)
		jr.lost = nil
	case lossFold:
		// Its delta is defined already: abort it and start one change
		// with every lost rank (rcRefold carries its ranks over).
		_ = s.rcAbort(jr.cur, fmt.Sprintf("folded into the next failure change: %s before this one was announced", l.why), true)
	case lossStart:
		s.rcLossSoon(jr)
	}
	return true
}

// lossEnd ends a shrink job that cannot be kept, with a report naming
// the lost ranks, how each ended, why the job could not go on and what
// to do.
func (s *state) lossEnd(j *job, lost []lostRank, why string) {
	if len(lost) == 0 || j.done {
		return
	}
	whys := make([]string, len(lost))
	for i, l := range lost {
		whys[i] = l.why
	}
	first := lost[0]
	if j.failure == nil {
		j.failure = &failure{
			rank: first.rank, code: first.code, how: first.how,
			msg: fmt.Sprintf("lost %s (%s); %s", lostRanges(lost), strings.Join(whys, "; "), why),
		}
	}
	s.killJob(j, killOrder{reason: reasonFailed})
}

// lossUnhandled makes the losses of a job that ended before a failure
// change took them over its failure (unless it has one already): the
// processes that were left ended by themselves before they accepted, so
// the job did not adapt to the loss, and ending with status 0 would hide
// it. Called while the job ends, before its state is set.
func (s *state) lossUnhandled(j *job, lost []lostRank) {
	if len(lost) == 0 || j.failure != nil {
		return
	}
	whys := make([]string, len(lost))
	for i, l := range lost {
		whys[i] = l.why
	}
	first := lost[0]
	why := fmt.Sprintf("the job ended before a failure change took them over (--on-failure %s: the other processes ended without accepting it)", j.policy)
	if !s.endedWell(j, lostRanges(lost)) {
		// Nobody was left to go on: the others had left through changes.
		why = "every process of the job was lost (the others had left through resource changes)"
	}
	j.failure = &failure{
		rank: first.rank, code: first.code, how: first.how,
		msg: fmt.Sprintf("lost %s (%s); %s", lostRanges(lost), strings.Join(whys, "; "), why),
	}
}

// endedWell reports whether a process of j other than lost ended by
// itself with status 0 as a member of a set (not removed by a change).
func (s *state) endedWell(j *job, lost wire.RankRanges) bool {
	for _, name := range j.reg.Malleable() {
		ms, err := j.reg.Members(name)
		if err != nil {
			continue
		}
		for _, r := range ms {
			if p := j.procs.at(r); p != nil && !lost.Contains(r) && p.state == wire.ProcStateExited && p.code == 0 {
				return true
			}
		}
	}
	return false
}

// rcLossSoon starts the failure SUB of the lost ranks of jr once the
// loop has handled what is queued now: a burst of losses (a node with
// several ranks, exits arriving together) folds into one change.
func (s *state) rcLossSoon(jr *jobRC) {
	if jr.lossPosted {
		return
	}
	jr.lossPosted = true
	m := s.m
	go m.post(func(s *state) {
		jr.lossPosted = false
		s.rcLossStart(jr)
	})
}

// rcLossStart starts the failure SUB of every rank lost so far, if no
// change is in flight (else rcNext calls again once it has settled).
func (s *state) rcLossStart(jr *jobRC) {
	j := jr.j
	if j.done || jr.cur != nil || len(jr.lost) == 0 {
		return
	}
	if j.kill != nil {
		jr.lost = nil // the job is ending anyway; the losses were booked as exits
		return
	}
	s.flushDead(j) // no set lists the dead: the survivors are what the bound sets hold now
	lost := jr.lost
	jr.lost = nil
	slices.SortFunc(lost, func(a, b lostRank) int { return int(a.rank) - int(b.rank) })
	lost = slices.CompactFunc(lost, func(a, b lostRank) bool { return a.rank == b.rank })
	// X_c of the lost ranks as the sets were before the dead were taken
	// out: the sets that held them and are still active. A set whose
	// every member was lost is bound too (it held them); the runtime
	// accepts for it once the change is announced (rcAcceptOrphans).
	// A REPLACE binds to one set whose members accept and carry on with
	// the new processes, so under replace an emptied set is not bound.
	var bound, empty []string
	xm := j.reg.Malleable()
	for _, l := range lost {
		for _, name := range l.sets {
			if slices.Contains(bound, name) || slices.Contains(empty, name) {
				continue
			}
			in, err := j.reg.Get(name, pset.Latest)
			if err != nil || !in.Active {
				continue
			}
			switch live := s.anyLive(j, name); {
			case live && slices.Contains(xm, name):
				bound = append(bound, name)
			case !live && j.policy == wire.OnFailureReplace:
				empty = append(empty, name)
			case !live:
				bound = append(bound, name) // an emptied set is no longer malleable (it is inside every set)
			}
		}
	}
	if len(bound) == 0 && len(empty) > 0 {
		s.lossEnd(j, lost, fmt.Sprintf("every member of %s was lost, so nobody could accept their replacement", strings.Join(empty, ", ")))
		return
	}
	// A lost rank that no active set held (the application had taken it
	// out of its sets) needs no change: nobody has to adapt to its loss.
	var kept []lostRank
	for _, l := range lost {
		if slices.ContainsFunc(l.sets, func(n string) bool { return slices.Contains(bound, n) }) {
			kept = append(kept, l)
			continue
		}
		s.noteShrunk(j, l, "in no active set: no change needed")
	}
	lost = kept
	if len(bound) == 0 {
		s.rcNext(jr) // nothing to change: queued requests go on
		return
	}
	slices.Sort(bound)
	ranks := make([]uint32, len(lost))
	for i, l := range lost {
		ranks[i] = l.rank
	}
	b := &wire.RCRequest{
		Job: j.ns, Type: wire.RCSub, N: uint32(len(ranks)), Ranks: wire.RangesOf(ranks),
		Requester: wire.ByRuntime, RequesterID: "failure policy " + j.policy,
	}
	reply := func(_ *wire.RC, err error) {
		if err != nil {
			s.log.Warn("master: failure change", "job", j.ns, "ranks", b.Ranks.String(), "err", err)
		}
	}
	if j.policy == wire.OnFailureReplace {
		s.rcLossReplace(jr, b, reply, lost, bound)
		return
	}
	s.rcBegin(jr, b, time.Now(), reply, rcPlan{typ: wire.RCSub, ranks: ranks, bound: bound, lost: lost})
}

// rcLossReplace starts the failure REPLACE of lost (replace policy): as
// many new processes as were lost, bound to one set that held them. Lost
// ranks of other sets wait for the next failure change (a REPLACE binds to
// one set); a job whose lost ranks cannot be replaced (no free slots)
// ends with the loss's report, as a job that cannot be kept.
func (s *state) rcLossReplace(jr *jobRC, b *wire.RCRequest, reply func(*wire.RC, error), lost []lostRank, bound []string) {
	j := jr.j
	set := bound[0]
	var now []lostRank
	for _, l := range lost {
		if slices.Contains(l.sets, set) {
			now = append(now, l)
		} else {
			jr.lost = append(jr.lost, l) // another set's: the next failure change
		}
	}
	ranks := make([]uint32, len(now))
	for i, l := range now {
		ranks[i] = l.rank
	}
	add := wire.RCRequest{Job: j.ns, Type: wire.RCAdd, N: uint32(len(ranks)), Bound: []string{set}}
	placed, _, err := s.rcPlanAdd(j, &add)
	if err != nil {
		s.lossEnd(j, append(now, jr.lost...), fmt.Sprintf("no new processes can replace them (%v); run with --on-failure shrink to go on without them, or give the DVM more slots", err))
		jr.lost = nil
		return
	}
	b.Type, b.N, b.Ranks = wire.RCReplace, uint32(len(ranks)), wire.RangesOf(ranks)
	var news []uint32
	for _, p := range placed {
		news = append(news, p.Rank)
	}
	s.rcBegin(jr, b, time.Now(), reply, rcPlan{typ: wire.RCReplace, ranks: news, out: ranks, placed: placed, bound: []string{set}, lost: now})
}

// heldBy lists, for each of ranks, the malleable sets of j that hold it
// now (ranks in none are left out).
func (s *state) heldBy(j *job, ranks []uint32) map[uint32][]string {
	out := map[uint32][]string{}
	for _, name := range j.reg.Malleable() {
		ms, err := j.reg.Members(name)
		if err != nil {
			continue
		}
		for _, r := range ranks {
			if slices.Contains(ms, r) {
				out[r] = append(out[r], name)
			}
		}
	}
	return out
}

// anyLive reports whether a live process of j is in the latest version
// of set.
func (s *state) anyLive(j *job, set string) bool {
	ms, err := j.reg.Members(set)
	return err == nil && slices.ContainsFunc(ms, func(r uint32) bool { return s.procLive(procRef{j.ns, r}) })
}

// rcAcceptOrphans accepts a failure SUB, for the runtime, on behalf of
// each bound set none of whose members is alive: nobody is left there to
// accept, and nothing is left there to adapt. A change bound only to such
// sets is FINALIZED at once.
func (s *state) rcAcceptOrphans(run *rcRun) {
	j := run.jr.j
	if run.typ != wire.RCSub {
		return // a REPLACE is bound to a set with survivors (rcLossStart)
	}
	for _, b := range run.bound {
		if run.r.Status() != rc.StatusAnnounced && run.r.Status() != rc.StatusPending {
			return
		}
		if slices.ContainsFunc(run.bmem[b].Ranks(), func(r uint32) bool { return s.procLive(procRef{j.ns, r}) }) {
			continue
		}
		st, err := run.r.Accept(time.Now(), b)
		if err != nil {
			s.log.Warn("master: cannot accept a failure change for a set without survivors", "delta", run.r.Delta(), "set", b, "err", err)
			continue
		}
		if st == rc.StatusFinalized {
			s.rcFinalized(run)
			return
		}
		s.rcUpdate(run, nil)
	}
}

// rcRefold gives the lost ranks of an aborted failure change back to the
// job's losses, so that the next failure change removes them (with
// whatever was lost meanwhile): a lost rank is never dropped. Not when
// the job is ending. A failure REPLACE whose new processes failed ends
// the job instead (trying again would fail again).
func (s *state) rcRefold(run *rcRun) {
	j := run.jr.j
	if run.lost == nil || j.done || j.kill != nil {
		return
	}
	if run.newFailed != "" {
		s.lossEnd(j, run.lost, "the processes that were to replace them failed: "+run.newFailed+"; run with --on-failure shrink to go on without them")
		return
	}
	run.jr.lost = append(slices.Clone(run.lost), run.jr.lost...)
}

// rcFailureTimeout ends a shrink job whose survivors did not accept a
// failure SUB in time: the application does not take part in changes.
func (s *state) rcFailureTimeout(run *rcRun, d time.Duration) {
	j := run.jr.j
	why := fmt.Sprintf("the surviving processes did not accept the failure change %s within %v: the application does not take part in resource changes; run it with --on-failure abort, or make it accept changes (docs/rc.md)",
		run.r.Delta(), d)
	if run.r.Status() == rc.StatusPending {
		why = fmt.Sprintf("the processes that were to replace them did not confirm the failure change %s within %v", run.r.Delta(), d)
	}
	s.lossEnd(j, run.lost, why)
	_ = s.rcAbort(run, fmt.Sprintf("not accepted within %v", d), true)
}

// rcFailureFinalized books the ranks a failure SUB removed for the job's
// end report.
func (s *state) rcFailureFinalized(run *rcRun) {
	for _, l := range run.lost {
		s.noteShrunk(run.jr.j, l, run.r.Delta())
	}
}

// noteShrunk books a lost rank the job went on without.
func (s *state) noteShrunk(j *job, l lostRank, how string) {
	if j.shrunk.n == 0 {
		j.shrunk.first = fmt.Sprintf("%s (%s)", l.why, how)
	}
	j.shrunk.n++
}

// lostRanges lists the ranks of lost compactly ("3,5-7").
func lostRanges(lost []lostRank) wire.RankRanges {
	var rr wire.RankRanges
	for _, l := range lost {
		rr = rr.Add(l.rank)
	}
	return rr
}

// lostCause is the record's cause of a failure SUB (nil for others).
func lostCause(lost []lostRank) *wire.RCCause {
	if lost == nil {
		return nil
	}
	c := &wire.RCCause{Kind: wire.CauseFailure, Ranks: lostRanges(lost)}
	for _, l := range lost {
		c.Why = append(c.Why, l.why)
	}
	return c
}
