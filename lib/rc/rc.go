package rc

import (
	"slices"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Request is what a tool, the application or a scheduler asks for.
type Request struct {
	Type Type
	// N is the number of processes to add or remove. For a SUB naming Ranks
	// it may be left 0 (it then becomes len(Ranks)); otherwise it must equal
	// len(Ranks).
	N int
	// Ranks names the processes a SUB removes (a REPLACE replaces); empty
	// lets the runtime choose (stack policy). Must be empty for ADD.
	Ranks []uint32
	By    Requester
}

// Accept records one accept of a bound set.
type Accept struct {
	From string    `json:"from"`
	At   time.Time `json:"at"`
}

// RC is one resource change and its state machine. Create it with New (or
// Tracker.Submit); change it only through its methods.
type RC struct {
	job     string
	seq     int
	typ     Type
	delta   string
	by      Requester
	n       int
	named   []uint32
	ranks   []uint32
	out     []uint32 // REPLACE: the processes replaced (ranks are the new ones)
	bound   []string
	status  Status
	times   Times
	accepts []Accept
	reason  string
	defined bool
	last    time.Time // latest recorded step, to keep timestamps ordered
}

// New records a request for the seq-th change of job, identified by delta,
// at time at. The RC starts in status NULL with only the requested step set.
// Malformed requests fail with wire.ErrInvalid.
func New(job string, seq int, delta string, req Request, at time.Time) (*RC, error) {
	switch {
	case job == "":
		return nil, wire.Errorf(wire.ErrInvalid, "resource change: empty job name")
	case delta == "":
		return nil, wire.Errorf(wire.ErrInvalid, "resource change for job %s: empty delta set name", job)
	case seq < 0:
		return nil, wire.Errorf(wire.ErrInvalid, "resource change %s: negative sequence number %d", delta, seq)
	case at.IsZero():
		return nil, wire.Errorf(wire.ErrInvalid, "resource change %s: zero request time", delta)
	case req.By.Kind > ByRuntime:
		return nil, wire.Errorf(wire.ErrInvalid, "resource change %s: unknown requester kind %d", delta, req.By.Kind)
	}
	n := req.N
	switch req.Type {
	case TypeAdd:
		if len(req.Ranks) > 0 {
			return nil, wire.Errorf(wire.ErrInvalid, "resource change %s: ADD cannot name ranks", delta)
		}
		if n <= 0 {
			return nil, wire.Errorf(wire.ErrInvalid, "resource change %s: ADD needs a positive number of processes, got %d", delta, n)
		}
	case TypeSub, TypeReplace:
		if len(req.Ranks) > 0 {
			if n == 0 {
				n = len(req.Ranks)
			}
			if n != len(req.Ranks) {
				return nil, wire.Errorf(wire.ErrInvalid, "resource change %s: %s of %d processes names %d ranks", delta, req.Type, n, len(req.Ranks))
			}
			if r, dup := firstDup(req.Ranks); dup {
				return nil, wire.Errorf(wire.ErrInvalid, "resource change %s: rank %d named twice", delta, r)
			}
		}
		if n <= 0 {
			return nil, wire.Errorf(wire.ErrInvalid, "resource change %s: %s needs a positive number of processes or named ranks, got %d", delta, req.Type, n)
		}
	default:
		return nil, wire.Errorf(wire.ErrInvalid, "resource change %s: type must be ADD, SUB or REPLACE, got %s", delta, req.Type)
	}
	rc := &RC{
		job: job, seq: seq, typ: req.Type, delta: delta, by: req.By, n: n,
		named: slices.Clone(req.Ranks), last: at,
	}
	rc.times.Requested = at
	return rc, nil
}

func firstDup(ranks []uint32) (uint32, bool) {
	seen := make(map[uint32]struct{}, len(ranks))
	for _, r := range ranks {
		if _, ok := seen[r]; ok {
			return r, true
		}
		seen[r] = struct{}{}
	}
	return 0, false
}

// Job returns the job (app) name.
func (rc *RC) Job() string { return rc.job }

// Seq returns the per-job sequence number n of the delta name.
func (rc *RC) Seq() int { return rc.seq }

// Type returns ADD or SUB.
func (rc *RC) Type() Type { return rc.typ }

// Delta returns the delta-set name that identifies the RC.
func (rc *RC) Delta() string { return rc.delta }

// Status returns the current status.
func (rc *RC) Status() Status { return rc.status }

// Bound returns a copy of the bound set names (empty before DefineDelta).
func (rc *RC) Bound() []string { return slices.Clone(rc.bound) }

// Ranks returns a copy of the delta's ranks (empty before DefineDelta):
// the new processes of an ADD or a REPLACE, the leaving ones of a SUB.
func (rc *RC) Ranks() []uint32 { return slices.Clone(rc.ranks) }

// Out returns the processes a REPLACE replaces (nil for ADD and SUB).
func (rc *RC) Out() []uint32 { return slices.Clone(rc.out) }

// Includes reports whether rank is a member of the delta (the incl flag of
// a query).
func (rc *RC) Includes(rank uint32) bool { return slices.Contains(rc.ranks, rank) }

// Times returns the recorded timestamps.
func (rc *RC) Times() Times { return rc.times }

// Durations is Times().Durations().
func (rc *RC) Durations() []StepTime { return rc.times.Durations() }

// Info is a self-contained snapshot of an RC for tools and the wire.
type Info struct {
	Job         string    `json:"job"`
	Seq         int       `json:"seq"`
	Type        Type      `json:"type"`
	Delta       string    `json:"delta"`
	Bound       []string  `json:"bound,omitempty"`
	Status      Status    `json:"status"`
	By          Requester `json:"requester"`
	N           int       `json:"n"`
	Named       []uint32  `json:"named_ranks,omitempty"`
	Ranks       []uint32  `json:"ranks,omitempty"`
	Out         []uint32  `json:"out,omitempty"` // REPLACE: the processes replaced
	Accepts     []Accept  `json:"accepts,omitempty"`
	Times       Times     `json:"times"`
	AbortReason string    `json:"abort_reason,omitempty"`
}

// Info returns a deep copy of the record.
func (rc *RC) Info() Info {
	return Info{
		Job: rc.job, Seq: rc.seq, Type: rc.typ, Delta: rc.delta,
		Bound: slices.Clone(rc.bound), Status: rc.status, By: rc.by, N: rc.n,
		Named: slices.Clone(rc.named), Ranks: slices.Clone(rc.ranks), Out: slices.Clone(rc.out),
		Accepts: slices.Clone(rc.accepts), Times: rc.times, AbortReason: rc.reason,
	}
}

// stateErr builds the wire.ErrState error for a step that is out of place.
func (rc *RC) stateErr(step Step, why string) error {
	return wire.Errorf(wire.ErrState, "resource change %s (%s, %s): cannot record %s: %s",
		rc.delta, rc.typ, rc.status, step, why)
}

// stamp checks the timestamp of step and records it.
func (rc *RC) stamp(step Step, at time.Time) error {
	if err := rc.checkTime(step, at); err != nil {
		return err
	}
	rc.setTime(step, at)
	return nil
}

func (rc *RC) checkTime(step Step, at time.Time) error {
	if at.IsZero() {
		return wire.Errorf(wire.ErrInvalid, "resource change %s: zero time for %s", rc.delta, step)
	}
	if at.Before(rc.last) {
		return wire.Errorf(wire.ErrInvalid, "resource change %s: %s at %s is before the previous step at %s",
			rc.delta, step, at.Format(time.RFC3339Nano), rc.last.Format(time.RFC3339Nano))
	}
	return nil
}

func (rc *RC) setTime(step Step, at time.Time) {
	*rc.times.field(step) = at
	rc.last = at
}

// to moves to status s after checking the transition table.
func (rc *RC) to(s Status) error {
	if err := CheckTransition(rc.status, s, rc.delta); err != nil {
		return err
	}
	rc.status = s
	return nil
}

// DefineDelta records that the delta set (ranks) was defined on all daemons
// and binds the RC: ADD to exactly one malleable set, SUB to the
// reference-counted sets X_c(U) of its delta (at least one). For a SUB that
// named ranks, ranks must be exactly those; in all cases len(ranks) = N.
func (rc *RC) DefineDelta(at time.Time, ranks []uint32, bound []string) error {
	if rc.typ == TypeReplace {
		return rc.stateErr(StepDeltaDefined, "a REPLACE defines both sets with DefineReplace")
	}
	return rc.define(at, ranks, nil, bound)
}

// DefineReplace is DefineDelta for a REPLACE: in are the new processes (the
// delta set), out the replaced ones (as many, and exactly the named ranks
// if the request named some); it binds to exactly one set.
func (rc *RC) DefineReplace(at time.Time, in, out []uint32, bound string) error {
	if rc.typ != TypeReplace {
		return rc.stateErr(StepDeltaDefined, "only a REPLACE has replaced processes")
	}
	return rc.define(at, in, out, []string{bound})
}

func (rc *RC) define(at time.Time, ranks, out []uint32, bound []string) error {
	const step = StepDeltaDefined
	leaving := ranks // the ranks a request may name
	if rc.typ == TypeReplace {
		leaving = out
	}
	switch {
	case rc.status != StatusNull:
		return rc.stateErr(step, "only before the announcement")
	case rc.defined:
		return rc.stateErr(step, "already defined")
	case len(ranks) != rc.n:
		return wire.Errorf(wire.ErrInvalid, "resource change %s: delta has %d ranks, the request was for %d", rc.delta, len(ranks), rc.n)
	case rc.typ == TypeReplace && len(out) != rc.n:
		return wire.Errorf(wire.ErrInvalid, "resource change %s: REPLACE of %d processes replaces %d", rc.delta, rc.n, len(out))
	}
	if r, dup := firstDup(append(slices.Clone(ranks), out...)); dup {
		return wire.Errorf(wire.ErrInvalid, "resource change %s: rank %d twice in the delta", rc.delta, r)
	}
	for _, r := range rc.named {
		if !slices.Contains(leaving, r) {
			return wire.Errorf(wire.ErrInvalid, "resource change %s: named rank %d missing from the delta", rc.delta, r)
		}
	}
	switch {
	case rc.typ != TypeSub && len(bound) != 1:
		return wire.Errorf(wire.ErrInvalid, "resource change %s: ADD binds to exactly one set, got %d", rc.delta, len(bound))
	case rc.typ == TypeSub && len(bound) == 0:
		return wire.Errorf(wire.ErrInvalid, "resource change %s: SUB needs its reference-counted sets, got none", rc.delta)
	}
	seen := make(map[string]bool, len(bound))
	for _, b := range bound {
		if b == "" || seen[b] {
			return wire.Errorf(wire.ErrInvalid, "resource change %s: bound set name %q empty or repeated", rc.delta, b)
		}
		seen[b] = true
	}
	if err := rc.stamp(step, at); err != nil {
		return err
	}
	rc.ranks = slices.Clone(ranks)
	rc.out = slices.Clone(out)
	rc.bound = slices.Clone(bound)
	rc.defined = true
	return nil
}

// PushJobData records that the updated job data reached all daemons.
func (rc *RC) PushJobData(at time.Time) error {
	const step = StepJobDataPushed
	switch {
	case rc.status != StatusNull:
		return rc.stateErr(step, "only before the announcement")
	case !rc.defined:
		return rc.stateErr(step, "the delta set is not defined yet")
	case !rc.times.JobDataPushed.IsZero():
		return rc.stateErr(step, "already recorded")
	}
	return rc.stamp(step, at)
}

// Announce makes the RC visible to queries: NULL → ANNOUNCED. The delta must
// be defined and the job data pushed first (DESIGN §5 phase 1 order).
func (rc *RC) Announce(at time.Time) error {
	const step = StepAnnounced
	if err := CheckTransition(rc.status, StatusAnnounced, rc.delta); err != nil {
		return err
	}
	if rc.times.JobDataPushed.IsZero() {
		return rc.stateErr(step, "the job data is not pushed yet")
	}
	if err := rc.stamp(step, at); err != nil {
		return err
	}
	return rc.to(StatusAnnounced)
}

// AllStarted records that every new process of an ADD or a REPLACE was launched. Allowed
// once, while ANNOUNCED, PENDING or FINALIZED (see the package comment).
func (rc *RC) AllStarted(at time.Time) error {
	const step = StepAllStarted
	switch {
	case rc.typ == TypeSub:
		return rc.stateErr(step, "a SUB starts no processes")
	case rc.status != StatusAnnounced && rc.status != StatusPending && rc.status != StatusFinalized:
		return rc.stateErr(step, "only after the announcement and before an abort")
	case !rc.times.AllStarted.IsZero():
		return rc.stateErr(step, "already recorded")
	}
	return rc.stamp(step, at)
}

// Accept records the accept of bound set from and returns the new status.
// ADD, REPLACE: ANNOUNCED → PENDING. SUB: the first accept moves ANNOUNCED → PENDING
// and the |bound|-th distinct one moves PENDING → FINALIZED.
func (rc *RC) Accept(at time.Time, from string) (Status, error) {
	const step = StepAcceptPublished
	if rc.status.Terminal() || rc.status == StatusNull || (rc.typ != TypeSub && rc.status != StatusAnnounced) {
		return rc.status, rc.stateErr(step, "accepts are taken only while ANNOUNCED (ADD, REPLACE) or ANNOUNCED/PENDING (SUB)")
	}
	if !slices.Contains(rc.bound, from) {
		return rc.status, wire.Errorf(wire.ErrInvalid, "resource change %s: set %q is not bound to it (bound: %v)", rc.delta, from, rc.bound)
	}
	for _, a := range rc.accepts {
		if a.From == from {
			return rc.status, wire.Errorf(wire.ErrState, "resource change %s: set %s already accepted at %s",
				rc.delta, from, a.At.Format(time.RFC3339Nano))
		}
	}
	if err := rc.checkTime(step, at); err != nil {
		return rc.status, err
	}
	if rc.status == StatusAnnounced {
		if err := rc.to(StatusPending); err != nil {
			return rc.status, err
		}
		rc.setTime(step, at)
	}
	rc.accepts = append(rc.accepts, Accept{From: from, At: at})
	rc.last = at
	if rc.typ == TypeSub && len(rc.accepts) == len(rc.bound) {
		if err := rc.to(StatusFinalized); err != nil {
			return rc.status, err
		}
		rc.setTime(StepFinalized, at)
	}
	return rc.status, nil
}

// Accepted returns the sets that accepted so far, in order.
func (rc *RC) Accepted() []Accept { return slices.Clone(rc.accepts) }

// Confirm records the confirmation of the new processes of an ADD or a
// REPLACE: PENDING → FINALIZED. A failed confirmation is an Abort.
func (rc *RC) Confirm(at time.Time) error {
	const step = StepConfirmed
	if rc.typ == TypeSub {
		return rc.stateErr(step, "only new processes (ADD, REPLACE) confirm")
	}
	if err := CheckTransition(rc.status, StatusFinalized, rc.delta); err != nil {
		return err
	}
	if err := rc.checkTime(step, at); err != nil {
		return err
	}
	rc.setTime(step, at)
	rc.setTime(StepFinalized, at)
	return rc.to(StatusFinalized)
}

// Enforce records that the grace period for the leaving processes ran out
// and the runtime began killing them. Once, before AllExited: for a SUB
// while PENDING or FINALIZED; for a REPLACE once FINALIZED (its replaced
// processes are told to leave only when the new ones have confirmed, so
// that an abort leaves the job as it was).
func (rc *RC) Enforce(at time.Time) error {
	const step = StepEnforced
	switch {
	case rc.typ == TypeAdd:
		return rc.stateErr(step, "an ADD terminates no processes")
	case rc.typ == TypeReplace && rc.status != StatusFinalized:
		return rc.stateErr(step, "only once the replacement is FINALIZED")
	case rc.status != StatusPending && rc.status != StatusFinalized:
		return rc.stateErr(step, "only after an accept and before an abort")
	case !rc.times.Enforced.IsZero():
		return rc.stateErr(step, "already recorded")
	case !rc.times.AllExited.IsZero():
		return rc.stateErr(step, "every delta member has already exited")
	}
	return rc.stamp(step, at)
}

// AllExited records that every leaving process (the delta of a SUB, the
// replaced processes of a REPLACE) has exited. Once, while PENDING or
// FINALIZED (a REPLACE: FINALIZED; a replaced process lost before that is
// not waited for).
func (rc *RC) AllExited(at time.Time) error {
	const step = StepAllExited
	switch {
	case rc.typ == TypeAdd:
		return rc.stateErr(step, "an ADD removes no processes")
	case rc.typ == TypeReplace && rc.status != StatusFinalized:
		return rc.stateErr(step, "only once the replacement is FINALIZED")
	case rc.status != StatusPending && rc.status != StatusFinalized:
		return rc.stateErr(step, "only after an accept and before an abort")
	case !rc.times.AllExited.IsZero():
		return rc.stateErr(step, "already recorded")
	}
	return rc.stamp(step, at)
}

// Abort ends the RC as ABORTED from NULL, ANNOUNCED or PENDING. The reason is
// required: tools show it.
func (rc *RC) Abort(at time.Time, reason string) error {
	const step = StepAborted
	if err := CheckTransition(rc.status, StatusAborted, rc.delta); err != nil {
		return err
	}
	if reason == "" {
		return wire.Errorf(wire.ErrInvalid, "resource change %s: abort needs a reason", rc.delta)
	}
	if err := rc.stamp(step, at); err != nil {
		return err
	}
	rc.reason = reason
	return rc.to(StatusAborted)
}

// AbortReason returns the reason given to Abort ("" otherwise).
func (rc *RC) AbortReason() string { return rc.reason }

// Expire finalizes a PENDING SUB whose other bound sets did not accept in
// time: PENDING → FINALIZED. Some delta members may have left already
// (their set accepted), so the change cannot be aborted; the runtime
// completes it instead, and why is kept (AbortReason) for the tools.
func (rc *RC) Expire(at time.Time, why string) error {
	const step = StepFinalized
	switch {
	case rc.typ != TypeSub:
		return rc.stateErr(step, "only a SUB is completed by the runtime")
	case rc.status != StatusPending:
		return rc.stateErr(step, "only while PENDING")
	case why == "":
		return wire.Errorf(wire.ErrInvalid, "resource change %s: expire needs a reason", rc.delta)
	}
	if err := rc.stamp(step, at); err != nil {
		return err
	}
	rc.reason = why
	return rc.to(StatusFinalized)
}
