package pset

import (
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/dynrt/dynrt/wire"
)

// Writes the runtime makes on its own behalf, outside the application's
// operations: taking dead processes out of the sets and undoing what an
// aborted resource change did to them. They touch only the application
// domain (mpi://WORLD names the processes started at launch and delta sets
// are records), give every set whose membership changes a new version, so
// that (name, version) still names one membership forever, and keep the
// set's epoch: a version made by the runtime brings no new delta.

// Snapshot records, for a group of ranks, which sets of the application
// domain held which of them at one moment (see Restore).
type Snapshot struct {
	ranks *roaring.Bitmap
	had   map[string]*roaring.Bitmap // set → the watched ranks it held
}

// Snapshot records which of ranks every application-domain set holds now.
// It costs one intersection per set; nothing is copied when a set holds
// none of them.
func (r *Registry) Snapshot(ranks []uint32) Snapshot {
	s := Snapshot{ranks: roaring.BitmapOf(ranks...), had: make(map[string]*roaring.Bitmap)}
	for _, p := range r.appSets() {
		s.had[p.key] = roaring.And(p.latest().bm, s.ranks)
	}
	return s
}

// Restore gives the watched ranks of snap back the membership they had
// when snap was taken, in every application-domain set, leaving every
// other rank as it is now: a set that existed then holds exactly the
// watched ranks it held then, and a set created since holds none of them.
// Ranks in gone (processes that ended meanwhile) are taken out instead of
// being put back. A set created since that would be left empty is deleted
// (unless pinned, when it keeps an empty version). It returns the sets
// that got a new version, sorted by name, and the deleted ones.
func (r *Registry) Restore(snap Snapshot, gone []uint32) (changed []Info, deleted []string) {
	if snap.ranks == nil {
		return nil, nil
	}
	dead := roaring.BitmapOf(gone...)
	for _, p := range r.appSets() {
		old := p.latest()
		want := roaring.AndNot(old.bm, snap.ranks)
		had, existed := snap.had[p.key]
		if existed {
			want.Or(roaring.AndNot(had, dead))
		}
		want.AndNot(dead)
		if want.Equals(old.bm) {
			continue
		}
		if want.IsEmpty() && !existed && p.pins == 0 {
			delete(r.sets, p.key)
			r.deleted[p.key] = p.newest() + 1
			deleted = append(deleted, p.key)
			continue
		}
		p.hist = append(p.hist, newVersion(want, old.epoch))
		changed = append(changed, p.info(p.newest(), p.latest()))
	}
	r.changed()
	slices.SortFunc(changed, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(deleted)
	return changed, deleted
}

// DropRanks takes ranks (processes that ended) out of every
// application-domain set that holds one of them and returns the sets that
// got a new version, sorted by name. A set may be left with size 0: the
// runtime keeps it (the application may still refer to it) rather than
// let it list processes that no longer exist.
func (r *Registry) DropRanks(ranks []uint32) []Info {
	if len(ranks) == 0 {
		return nil
	}
	drop := roaring.BitmapOf(ranks...)
	var out []Info
	for _, p := range r.appSets() {
		old := p.latest()
		if !old.bm.Intersects(drop) {
			continue
		}
		p.hist = append(p.hist, newVersion(roaring.AndNot(old.bm, drop), old.epoch))
		out = append(out, p.info(p.newest(), p.latest()))
	}
	if len(out) > 0 {
		r.changed()
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Retention (DESIGN §4: a long job must not grow the master without
// limit). The runtime calls these once a resource change has settled.

// PruneAll keeps the newest keep versions of every stored set (at least
// one) and drops the older ones; pinned sets are skipped, since a change in
// flight may still name an old version. It returns how many versions were
// dropped.
func (r *Registry) PruneAll(keep int) int {
	keep = max(keep, 1)
	n := 0
	for _, p := range r.sets {
		if p.pins > 0 || len(p.hist) <= keep {
			continue
		}
		drop := len(p.hist) - keep
		clear(p.hist[:drop]) // let the bitmaps go
		p.hist = slices.Clone(p.hist[drop:])
		p.base += drop
		n += drop
	}
	return n
}

// ForgetDelta drops the delta set of a settled resource change. Its
// number is never handed out again (numbers only grow), so the name can
// never come to mean another change; a later lookup says it was
// forgotten. Pinned sets and other kinds are refused.
func (r *Registry) ForgetDelta(name string) error {
	p, err := r.find(name)
	if err != nil {
		return err
	}
	if p.name.Kind != KindDelta {
		return wire.Errorf(wire.ErrInvalid, "%s is not a delta set", p.key)
	}
	if p.pins > 0 {
		return pinnedErr(p, "forget")
	}
	if p.name.Out {
		return wire.Errorf(wire.ErrInvalid, "%s goes with its change's delta set: forget that one", p.key)
	}
	out := p.name
	out.Out = true
	if q := r.sets[out.String()]; q != nil && q.pins > 0 {
		return pinnedErr(q, "forget")
	}
	delete(r.sets, p.key) // not in r.deleted: byName tells from the number
	delete(r.sets, out.String())
	return nil
}

// Versions returns how many versions the registry holds over all sets and
// how many sets it holds (for tests and the master's retention check).
func (r *Registry) Versions() (versions, sets int) {
	for _, p := range r.sets {
		versions += len(p.hist)
	}
	return versions, len(r.sets)
}
