package top

import (
	"slices"

	"github.com/dynrt/dynrt/wire"
)

// Need says what a batch of events leaves unknown, for the feeder to
// fetch: events carry what changed, but not always everything the screen
// shows (a new job's command line, the members of a set).
type Need struct {
	Snapshot bool     // nodes came or went: fetch everything
	Jobs     []string // jobs to describe again (new, or changed state)
	Psets    []string // jobs whose sets to fetch with members
	Slots    bool     // processes came or went: fetch the slot map
}

// Empty reports whether nothing needs fetching.
func (n Need) Empty() bool { return !n.Snapshot && !n.Slots && len(n.Jobs) == 0 && len(n.Psets) == 0 }

// NeedsOf computes what to fetch after evs.
func NeedsOf(evs []wire.Event) Need {
	var n Need
	add := func(l *[]string, job string) {
		if job != "" && !slices.Contains(*l, job) {
			*l = append(*l, job)
		}
	}
	for _, ev := range evs {
		switch ev.Kind {
		case wire.EvNodeUp, wire.EvNodeSuspect, wire.EvNodeDown, wire.EvNodeJoining, wire.EvNodeAdded, wire.EvNodeLeaving, wire.EvNodeRemoved:
			n.Snapshot = true
		case wire.EvJobState:
			add(&n.Jobs, ev.Job)
			n.Slots = true
		case wire.EvProcState, wire.EvRCState, wire.EvRCUpdate:
			// events say which node runs a rank, not which slot
			n.Slots = true
		case wire.EvPsetDef:
			if ev.Pset == nil || ev.Pset.Members.Count() != int(ev.Pset.Size) {
				add(&n.Psets, ev.Job)
			}
		}
	}
	return n
}

// Merge adds o to n.
func (n *Need) Merge(o Need) {
	n.Snapshot = n.Snapshot || o.Snapshot
	n.Slots = n.Slots || o.Slots
	for _, j := range o.Jobs {
		if !slices.Contains(n.Jobs, j) {
			n.Jobs = append(n.Jobs, j)
		}
	}
	for _, j := range o.Psets {
		if !slices.Contains(n.Psets, j) {
			n.Psets = append(n.Psets, j)
		}
	}
}
