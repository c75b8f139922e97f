package rc

import (
	"slices"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// TrackerOptions configures a Tracker.
type TrackerOptions struct {
	// Queue makes requests that arrive while a change is in flight wait in
	// FIFO order instead of failing with wire.ErrBusy.
	Queue bool
	// Name builds the delta name of the n-th change; nil means DeltaName.
	// The master may plug in the pset package's own constructor here.
	Name func(app string, n int) string
}

// Tracker keeps the resource changes of one job and enforces "one RC in
// flight per job" (DESIGN §5): an RC is in flight from its request until it
// is FINALIZED or ABORTED, including phase 1 while it is still NULL. Changes
// are numbered 0, 1, 2, … in request order; a request rejected by New does
// not use a number. Not safe for concurrent use.
type Tracker struct {
	job    string
	opts   TrackerOptions
	next   int
	active *RC
	queue  []*RC
	all    []*RC
	byName map[string]*RC
}

// NewTracker returns an empty tracker for job (the app name).
func NewTracker(job string, opts TrackerOptions) *Tracker {
	if opts.Name == nil {
		opts.Name = DeltaName
	}
	return &Tracker{job: job, opts: opts, byName: make(map[string]*RC)}
}

// Job returns the job name the tracker was made for.
func (t *Tracker) Job() string { return t.job }

// inFlight reports whether the active RC still blocks new ones.
func (t *Tracker) inFlight() bool { return t.active != nil && !t.active.Status().Terminal() }

// Submit records a request. When nothing is in flight and nothing waits,
// the new RC becomes the active one (queued=false) and the caller starts
// phase 1. When a change is in flight, Submit fails with wire.ErrBusy naming
// it, unless the tracker queues, in which case the RC is created (status
// NULL, numbered, request time set) and waits (queued=true) until Next hands
// it out.
func (t *Tracker) Submit(at time.Time, req Request) (rc *RC, queued bool, err error) {
	busy := t.inFlight()
	if busy && !t.opts.Queue {
		a := t.active
		return nil, false, wire.Errorf(wire.ErrBusy,
			"job %s: resource change %s (%s, %s) is still in flight; one change per job at a time",
			t.job, a.Delta(), a.Type(), a.Status())
	}
	rc, err = New(t.job, t.next, t.opts.Name(t.job, t.next), req, at)
	if err != nil {
		return nil, false, err
	}
	if _, dup := t.byName[rc.Delta()]; dup {
		return nil, false, wire.Errorf(wire.ErrExists, "job %s: delta name %s already used", t.job, rc.Delta())
	}
	t.next++
	t.all = append(t.all, rc)
	t.byName[rc.Delta()] = rc
	if busy || len(t.queue) > 0 {
		t.queue = append(t.queue, rc)
		return rc, true, nil
	}
	t.active = rc
	return rc, false, nil
}

// Next starts the oldest waiting request once the active RC is final. It
// returns nil while a change is still in flight or when nothing waits.
// Queued RCs that were aborted meanwhile are skipped.
func (t *Tracker) Next() *RC {
	if t.inFlight() {
		return nil
	}
	for len(t.queue) > 0 {
		rc := t.queue[0]
		t.queue[0] = nil
		t.queue = t.queue[1:]
		if !rc.Status().Terminal() {
			t.active = rc
			return rc
		}
	}
	return nil
}

// Active returns the RC in flight, or nil.
func (t *Tracker) Active() *RC {
	if t.inFlight() {
		return t.active
	}
	return nil
}

// Last returns the most recently started RC whatever its status (nil if
// none): what a query about the job's current change looks at.
func (t *Tracker) Last() *RC { return t.active }

// Queued returns the waiting requests, oldest first (aborted ones excluded).
func (t *Tracker) Queued() []*RC {
	out := make([]*RC, 0, len(t.queue))
	for _, rc := range t.queue {
		if !rc.Status().Terminal() {
			out = append(out, rc)
		}
	}
	return out
}

// Get returns the RC with the given delta name.
func (t *Tracker) Get(delta string) (*RC, error) {
	rc, ok := t.byName[delta]
	if !ok {
		return nil, wire.Errorf(wire.ErrNotFound, "job %s: no resource change %s", t.job, delta)
	}
	return rc, nil
}

// All returns every RC of the job in numbering order.
func (t *Tracker) All() []*RC { return append([]*RC(nil), t.all...) }

// Forget drops a final RC from the tracker (retention: the master keeps
// the latest records only). Its number is never handed out again. An RC
// in flight or waiting cannot be forgotten.
func (t *Tracker) Forget(delta string) error {
	rc, ok := t.byName[delta]
	if !ok {
		return wire.Errorf(wire.ErrNotFound, "job %s: no resource change %s", t.job, delta)
	}
	if !rc.Status().Terminal() {
		return wire.Errorf(wire.ErrState, "job %s: resource change %s is %s; only a final one can be forgotten", t.job, delta, rc.Status())
	}
	delete(t.byName, delta)
	if i := slices.Index(t.all, rc); i >= 0 {
		t.all = slices.Delete(t.all, i, i+1)
	}
	if t.active == rc {
		t.active = nil
	}
	return nil
}
