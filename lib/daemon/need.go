package daemon

import (
	"errors"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// rc.query's need (wire.RCQueryReq.Need): the daemon answers a change
// only while it still needs the caller, the thesis's MPI_RC_NULL
// otherwise. It knows what its local ranks have done of each change
// because their phase 3 requests pass through it; the rule lives here so
// that a client in any language gets it from one query.

// rcPart names one thing a rank has done of a change: started its accept
// for a bound set (part: the set's name), started its confirmation
// (partConfirm), or been told of the abort (partTold). Set names start
// with mpi://, so the two constants never collide with one.
type rcPart struct {
	delta, part string
	rank        uint32
}

const (
	partConfirm = "confirm"
	partTold    = "aborted"
)

// needs says whether rec still needs rank (wire.RCQueryReq.Need), and
// counts a reported abort as told. d.mu must be held.
func (jc *jobCache) needs(rec *wire.RC, rank uint32) bool {
	parts := jc.rcs.parts
	newProc := rec.Ranks.Contains(rank) && (rec.Type == wire.RCAdd || rec.Type == wire.RCReplace)
	switch rec.Status {
	case wire.RCAnnounced, wire.RCPending:
		if newProc {
			return !parts[rcPart{rec.Delta, partConfirm, rank}]
		}
		for _, ref := range rec.BoundRefs {
			if !parts[rcPart{rec.Delta, ref.Name, rank}] && jc.memberAt(ref, rank) {
				return true
			}
		}
	case wire.RCAborted:
		in := newProc
		for _, ref := range rec.BoundRefs {
			in = in || jc.memberAt(ref, rank)
		}
		told := rcPart{rec.Delta, partTold, rank}
		if in && !parts[told] {
			jc.rcs.mark(told)
			return true
		}
	}
	return false
}

// memberAt reports whether rank is a member of the exact set version ref,
// as far as this daemon knows it. d.mu must be held.
func (jc *jobCache) memberAt(ref wire.PsetRef, rank uint32) bool {
	if h := jc.sets[ref.Name]; h != nil {
		if p, ok := h.at(ref.Version); ok {
			return p.Members.Contains(rank)
		}
	}
	return false
}

func (c *rcCache) mark(k rcPart) {
	if c.parts == nil {
		c.parts = make(map[rcPart]bool)
	}
	c.parts[k] = true
}

// tookPart notes the outcome of rank's accept (part: the bound set's
// name) or confirmation (partConfirm) of delta: started or done (err
// nil), told of the abort, or — another failure — not taken, so that the
// queries report the change again.
func (d *Daemon) tookPart(job string, rank uint32, delta, part string, err error) {
	n, perr := pset.Parse(delta)
	if perr != nil {
		return
	}
	delta = n.String()
	d.mu.Lock()
	defer d.mu.Unlock()
	jc := d.jobs[job]
	if jc == nil || jc.rcs == nil || jc.rcs.byDelta[delta] == nil {
		return // the change is forgotten: nothing to remember of it
	}
	switch {
	case err == nil:
		jc.rcs.mark(rcPart{delta, part, rank})
	case errors.Is(err, wire.ErrAborted):
		jc.rcs.mark(rcPart{delta, partTold, rank})
	default:
		delete(jc.rcs.parts, rcPart{delta, part, rank})
	}
}
