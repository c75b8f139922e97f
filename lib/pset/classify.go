package pset

import (
	"cmp"
	"slices"

	"github.com/dynrt/dynrt/wire"
)

// The classifications of thesis §6.1.3 (Definitions 2-4) over the sets of
// the application domain mpi://app/<app> (mpi://WORLD and delta sets never
// count). Each looks at the newest version of every set. Sets of size 0
// (inactive sets emptied by a resource change) are left out: an empty set is
// a subset of everything, which says nothing about the hierarchy.
//
// How "S ⊂ T" is read, and why:
//
//   - Definitions 2 and 3 use a strict subset in the membership sense: a set
//     is not malleable only if an active set with strictly more members
//     contains it. Two active sets with equal members are therefore both
//     malleable (and both reference counted). With "⊆" they would rule each
//     other out, and a SUB change on their ranks would find no set
//     responsible for accepting it.
//   - Definition 4 reads "S ⊂ T" as "T contains S and T is another set than
//     S" (equal members allowed). An inactive set that mirrors the operand,
//     for instance mpi://app/<app> made inactive while one active working
//     set holds the same ranks, must follow that operand when it grows, or
//     the root set would stop holding all processes of the application.

// appSets returns the stored sets of the application domain (this
// registry's application only), in no particular order.
func (r *Registry) appSets() []*pset {
	out := make([]*pset, 0, len(r.sets))
	for _, p := range r.sets {
		if p.name.Kind == KindApp {
			out = append(out, p)
		}
	}
	return out
}

// subsetOf reports whether s ⊆ t, rejecting cheaply on size, range and
// sample members before counting the intersection.
func subsetOf(s, t *version) bool {
	if s.size == 0 {
		return true
	}
	if s.size > t.size || s.min < t.min || s.max > t.max {
		return false
	}
	if !t.bm.Contains(s.min) || !t.bm.Contains(s.max) {
		return false
	}
	// t must hold at least |s| ranks within s's range: O(log) per
	// container, and it rejects most sets that merely overlap s.
	in := t.bm.CardinalityInRange(uint64(s.min), uint64(s.max)+1)
	if in < uint64(s.size) {
		return false
	}
	if s.contiguous() {
		return true // s is all of [min, max], and t holds as many there
	}
	if !t.bm.Contains(s.pivot) {
		return false
	}
	return int(s.bm.AndCardinality(t.bm)) == s.size
}

// intersects reports whether a and b share a rank. Disjoint ranges and
// contiguous sets are answered without roaring's general intersection,
// which builds the whole intersection for run containers.
func intersects(a, b *version) bool {
	switch {
	case a.size == 0 || b.size == 0 || a.max < b.min || b.max < a.min:
		return false
	case a.contiguous():
		return b.bm.IntersectsWithInterval(uint64(a.min), uint64(a.max)+1)
	case b.contiguous():
		return a.bm.IntersectsWithInterval(uint64(b.min), uint64(b.max)+1)
	}
	return a.bm.Intersects(b.bm)
}

// Malleable returns X_m(app) (Definition 2): the active sets that no other
// active set strictly contains, sorted by name.
func (r *Registry) Malleable() []string { return names(r.malleable()) }

// RefCounted returns X_c(U) (Definition 3) for the delta set U: the
// malleable sets sharing at least one rank with U, sorted by name. A SUB
// change is finalized once each of them has accepted it.
func (r *Registry) RefCounted(delta string) ([]string, error) {
	u, err := r.delta(delta)
	if err != nil {
		return nil, err
	}
	var out []*pset
	for _, p := range r.malleable() {
		if intersects(p.latest(), u) {
			out = append(out, p)
		}
	}
	return names(out), nil
}

// RecursivelyAffected returns X_a(op(S, U)) (Definition 4) for the set
// reference s and the delta set U: the inactive sets that share a rank with
// U or contain S (see the note on subsets above), sorted by name. When S
// itself is inactive it is listed only if it shares a rank with U.
func (r *Registry) RecursivelyAffected(s, delta string) ([]string, error) {
	u, err := r.delta(delta)
	if err != nil {
		return nil, err
	}
	a, err := r.operand("operand", s, nil)
	if err != nil {
		return nil, err
	}
	return names(r.recursivelyAffected(a.key, a.ver, u)), nil
}

func (r *Registry) recursivelyAffected(sKey string, s, u *version) []*pset {
	var out []*pset
	for _, t := range r.sets {
		tv := t.latest()
		if t.name.Kind != KindApp || t.active || tv.size == 0 {
			continue
		}
		if intersects(tv, u) || (s.size > 0 && t.key != sKey && subsetOf(s, tv)) {
			out = append(out, t)
		}
	}
	return out
}

func (r *Registry) delta(ref string) (*version, error) {
	p, v, _, err := r.lookup(ref, Latest)
	if err != nil {
		return nil, err
	}
	if p.name.Kind != KindDelta {
		return nil, wire.Errorf(wire.ErrInvalid, "%s is not a delta set (want mpi://rte/%s/rc/<n>)", p.key, r.app)
	}
	return v, nil
}

// malleable returns X_m, computed at most once between two changes.
func (r *Registry) malleable() []*pset {
	if !r.xmValid {
		r.xm, r.xmValid = r.computeMalleable(), true
	}
	return r.xm
}

// computeMalleable computes X_m without comparing all pairs of sets.
//
// X_m is exactly the set of maximal active sets (those no active set
// strictly contains), and strict containment is transitive, so a set is
// not malleable iff some *maximal* set with more members contains it.
// Visiting the sets by decreasing size, every maximal set that could
// contain the current one has already been found. Candidates are found
// through one member: any superset of S contains S's pivot (its median
// rank), so each maximal set is filed under the pivots of all sets that it
// contains, and S is compared only against the maximal sets filed under
// its own pivot. For hierarchies built by splitting and merging this is
// close to linear; the worst case (many large overlapping random sets) is
// still quadratic, as subset detection is in general.
func (r *Registry) computeMalleable() []*pset {
	type cand struct {
		size int
		pid  int32 // index of the pivot in piv
		v    *version
		p    *pset
	}
	cs := make([]cand, 0, len(r.sets))
	piv := make([]uint32, 0, len(r.sets))
	for _, p := range r.sets {
		if p.name.Kind != KindApp || !p.active {
			continue
		}
		if v := p.latest(); v.size > 0 {
			cs = append(cs, cand{size: v.size, v: v, p: p})
			piv = append(piv, v.pivot)
		}
	}
	if len(cs) == 0 {
		return nil
	}
	// Order among equal sizes does not matter: equal-sized sets never
	// strictly contain each other, and twins end up malleable together.
	slices.SortFunc(cs, func(a, b cand) int { return cmp.Compare(b.size, a.size) })
	slices.Sort(piv)
	piv = slices.Compact(piv)
	pids := newPivotIDs(piv)
	for i := range cs {
		cs[i].pid = pids.id(cs[i].v.pivot)
	}

	// The index is a linked list per pivot in flat arrays: head[pid] is
	// the newest entry, next chains to older ones. Newer entries are
	// smaller sets, so a walk meets the tightest supersets first.
	head := make([]int32, len(piv))
	for i := range head {
		head[i] = -1
	}
	next := make([]int32, 0, 4*len(cs))
	set := make([]int32, 0, 4*len(cs))
	file := func(pid int32, i int) {
		next = append(next, head[pid])
		set = append(set, int32(i))
		head[pid] = int32(len(set) - 1)
	}

	var out []*pset
	buf := make([]uint32, 256)
	for i, c := range cs {
		covered, dup := false, false
		for e := head[c.pid]; e >= 0; e = next[e] {
			t := cs[set[e]]
			if !subsetOf(c.v, t.v) {
				continue
			}
			// Sizes never grow along cs, so t.size >= c.size here.
			if t.size > c.size {
				covered = true
			} else {
				dup = true // equal to a maximal set: maximal too
			}
			break
		}
		if covered {
			continue
		}
		out = append(out, c.p)
		if dup {
			continue // its twin is already filed
		}
		// File c under every pivot it contains, walking whichever is
		// shorter: the pivots within c's range, or c's members.
		lo, _ := slices.BinarySearch(piv, c.v.min)
		hi := len(piv)
		if c.v.max < ^uint32(0) {
			hi, _ = slices.BinarySearch(piv, c.v.max+1)
		}
		if hi-lo <= c.size/4 {
			for k := lo; k < hi; k++ {
				if c.v.bm.Contains(piv[k]) {
					file(int32(k), i)
				}
			}
			continue
		}
		it := c.v.bm.ManyIterator()
		for n := it.NextMany(buf); n > 0; n = it.NextMany(buf) {
			for _, x := range buf[:n] {
				if k := pids.id(x); k >= 0 {
					file(k, i)
				}
			}
		}
	}
	return out
}

// pivotIDs maps a rank to its index in the sorted pivot list, or -1. Ranks
// are handed out by a counter, so they usually span a modest range and a
// flat table works; sparse rank spaces fall back to a map.
type pivotIDs struct {
	base  uint32
	table []int32
	m     map[uint32]int32
}

func newPivotIDs(piv []uint32) pivotIDs {
	base, span := piv[0], uint64(piv[len(piv)-1]-piv[0])+1
	if span <= max(1<<16, 16*uint64(len(piv))) {
		t := make([]int32, span)
		for i := range t {
			t[i] = -1
		}
		for i, x := range piv {
			t[x-base] = int32(i)
		}
		return pivotIDs{base: base, table: t}
	}
	m := make(map[uint32]int32, len(piv))
	for i, x := range piv {
		m[x] = int32(i)
	}
	return pivotIDs{m: m}
}

func (p pivotIDs) id(x uint32) int32 {
	if p.table != nil {
		if x < p.base || uint64(x-p.base) >= uint64(len(p.table)) {
			return -1
		}
		return p.table[x-p.base]
	}
	if k, ok := p.m[x]; ok {
		return k
	}
	return -1
}

func names(ps []*pset) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.key
	}
	slices.Sort(out)
	return out
}
