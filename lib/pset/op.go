package pset

import (
	"slices"
	"strconv"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/dynrt/dynrt/wire"
)

// Op is a process set operation (Definition 5, plus NULL).
type Op uint8

// The operations. OpNull changes only attributes of the target.
const (
	OpNull Op = iota
	OpUnion
	OpDifference
	OpIntersection
)

var opNames = [...]string{"null", "union", "difference", "intersection"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// MarshalText encodes an Op by its name.
func (o Op) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText accepts the names produced by String, in any case.
func (o *Op) UnmarshalText(b []byte) error {
	v, err := ParseOp(string(b))
	if err == nil {
		*o = v
	}
	return err
}

// ParseOp parses "union", "difference", "intersection" or "null" (any case).
func ParseOp(s string) (Op, error) {
	for i, n := range opNames {
		if strings.EqualFold(n, s) {
			return Op(i), nil
		}
	}
	return 0, wire.Errorf(wire.ErrInvalid, "unknown process set operation %q (want union, difference, intersection or null)", s)
}

// apply computes a op b into a new bitmap.
func (o Op) apply(a, b *roaring.Bitmap) *roaring.Bitmap {
	switch o {
	case OpUnion:
		return roaring.Or(a, b)
	case OpDifference:
		return roaring.AndNot(a, b)
	default:
		return roaring.And(a, b)
	}
}

// recursive reports whether the op is carried over to the recursively
// affected sets (Def. 4) when its second operand is a delta set. The thesis
// applies every op; we leave out INTERSECTION on purpose: op(T, U) with T an
// inactive superset would shrink T to the part of it inside the delta (and
// empty it outright for an ADD delta), which destroys the hierarchy the
// recursion is meant to keep. An application intersecting with a delta wants
// to extract the changing processes, not to apply the change.
func (o Op) recursive() bool { return o == OpUnion || o == OpDifference }

// Caller identifies the process on whose behalf a request is made. It is
// needed only to resolve mpi://SELF and mpi://SHARED, which differ per
// process and are therefore not stored in the registry.
type Caller struct {
	Rank      uint32
	NodePeers []uint32 // ranks of the caller's job on its node, itself included
}

// OpRequest asks for a set operation (thesis §6.3.2).
type OpRequest struct {
	Op Op
	// P1 and P2 are operand references: a name, or "name@version" to use
	// an exact earlier membership. Ignored for OpNull.
	P1, P2 string
	// Target names the result. Empty: a fresh name mpi://app/<app>/pset-<n>
	// is generated. An existing set (P1's or any other in the application
	// domain, including mpi://app/<app>) receives a new version instead of
	// an error: re-running the same op after a resource change is then the
	// natural way to update a set in place. The target must lie in
	// mpi://app/<app>; WORLD, SELF, SHARED and delta sets are read-only.
	// OpNull requires an existing Target.
	Target string
	// Active sets mpi_ps_active on the target; nil: a new set inherits it
	// from P1, an existing target keeps its own.
	Active *bool
	// Sched overlays mpi_ps_sched_* hints key by key on the same base
	// (P1's for a new set, the target's own otherwise); an empty value
	// removes a key.
	Sched  map[string]string
	Caller *Caller // resolves SELF and SHARED operands; may be nil
}

// OpResult reports what an operation did. The master pushes every set in
// it to the daemons.
type OpResult struct {
	Result  Info // the target as it is now
	Created bool // the target did not exist before
	Changed bool // the target got a new membership (Created or a new version)
	// Affected lists the recursively affected sets (Def. 4) that received
	// a new version because P2 was a delta set, sorted by name.
	Affected []Info
}

// operand is a resolved operand: one membership plus the attributes a new
// set inherits from it.
type operand struct {
	key    string
	ver    *version
	kind   Kind
	active bool
	sched  map[string]string
}

func (r *Registry) operand(role, ref string, c *Caller) (operand, error) {
	if ref == "" {
		return operand{}, wire.Errorf(wire.ErrInvalid, "%s missing", role)
	}
	n, v, err := ParseRef(ref)
	if err != nil {
		return operand{}, err
	}
	if n.Kind == KindSelf || n.Kind == KindShared {
		if c == nil {
			return operand{}, wire.Errorf(wire.ErrInvalid, "%s %s depends on the calling process, but the request names no caller", role, n)
		}
		if v > 0 {
			return operand{}, wire.Errorf(wire.ErrNotFound, "%s has only version 0", n)
		}
		var bm *roaring.Bitmap
		if n.Kind == KindSelf {
			bm = roaring.BitmapOf(c.Rank)
		} else {
			bm = roaring.BitmapOf(c.NodePeers...)
		}
		// Never changed by a resource change as far as the registry
		// knows, hence epoch 0 like every predefined set.
		return operand{key: n.String(), ver: newVersion(bm, 0), kind: n.Kind, active: true}, nil
	}
	p, ver, _, err := r.lookup(ref, Latest)
	if err != nil {
		return operand{}, err
	}
	return operand{key: p.key, ver: ver, kind: p.name.Kind, active: p.active, sched: p.sched}, nil
}

// target validates a name that an operation is about to write. It returns
// the stored set, or nil when the name is free.
func (r *Registry) target(name string) (Name, *pset, error) {
	n, err := Parse(name)
	if err != nil {
		return Name{}, nil, err
	}
	if n.Kind != KindApp {
		return Name{}, nil, wire.Errorf(wire.ErrPermission, "cannot write %s: results must be named in the %s domain; WORLD, SELF, SHARED and delta sets are read-only", n, r.root)
	}
	if n.App != r.app {
		return Name{}, nil, wire.Errorf(wire.ErrPermission, "cannot write %s: it is in the domain of application %q, this is %q (%s)", n, n.App, r.app, r.root)
	}
	return n, r.sets[n.String()], nil
}

// attrs computes the attributes of a written set: its own when it exists,
// inherited from src otherwise, with the request's values on top.
func attrs(existing *pset, src operand, active *bool, sched map[string]string) (bool, map[string]string, error) {
	a, base := src.active, src.sched
	if existing != nil {
		a, base = existing.active, existing.sched
	}
	if active != nil {
		a = *active
	}
	s, err := mergeSched(base, sched)
	return a, s, err
}

// write is one validated, not yet applied, change to a set.
type write struct {
	name   Name
	p      *pset // nil: create
	bm     *roaring.Bitmap
	epoch  int
	active bool
	sched  map[string]string
}

// commit applies w and reports the resulting set and what happened.
func (r *Registry) commit(w write) OpResult {
	r.changed()
	p := w.p
	if p == nil {
		key := w.name.String()
		base := r.deleted[key] // 0 unless the name was deleted before
		delete(r.deleted, key)
		p = &pset{name: w.name, key: key, base: base, hist: []*version{newVersion(w.bm, w.epoch)}, active: w.active, sched: w.sched}
		r.sets[key] = p
		return OpResult{Result: p.info(p.newest(), p.latest()), Created: true, Changed: true}
	}
	p.active, p.sched = w.active, w.sched
	changed := false
	if old := p.latest(); uint64(old.size) != w.bm.GetCardinality() || !old.bm.Equals(w.bm) {
		// Same members: no new version and no new epoch, since both only
		// move when the membership does (§6.1.3, Def. 1).
		p.hist = append(p.hist, newVersion(w.bm, w.epoch))
		changed = true
	}
	return OpResult{Result: p.info(p.newest(), p.latest()), Changed: changed}
}

// ApplyOp performs a set operation (Definition 5) or, for OpNull, an
// attribute update of an existing target without a new version. An empty
// result is an error. The result's epoch is max(P1, P2) (Definition 1).
//
// When P2 is a delta set and the op is UNION or DIFFERENCE, the same op is
// applied to every recursively affected set X_a(op(P1, P2)) other than the
// target (Definition 4), each getting a new version with epoch
// max(own, delta) when its membership changes; see RecursivelyAffected for
// how the subset test is read. These sets are inactive, i.e. maintained by
// the runtime, so a DIFFERENCE may leave one of them empty: that is kept as
// a version of size 0 rather than failing the application's request or
// leaving stale ranks behind. Nothing is changed when an error is returned.
func (r *Registry) ApplyOp(req OpRequest) (OpResult, error) {
	if err := checkSched(req.Sched); err != nil {
		return OpResult{}, err
	}
	if req.Op == OpNull {
		return r.setAttrs(req)
	}
	if req.Op > OpIntersection {
		return OpResult{}, wire.Errorf(wire.ErrInvalid, "unknown process set operation %d", req.Op)
	}
	a, err := r.operand("first operand", req.P1, req.Caller)
	if err != nil {
		return OpResult{}, err
	}
	b, err := r.operand("second operand", req.P2, req.Caller)
	if err != nil {
		return OpResult{}, err
	}
	bm := req.Op.apply(a.ver.bm, b.ver.bm)
	if bm.IsEmpty() {
		return OpResult{}, wire.Errorf(wire.ErrInvalid, "%s(%s, %s) has no members; a process set cannot be empty", strings.ToUpper(req.Op.String()), req.P1, req.P2)
	}
	var tn Name
	var tp *pset
	if req.Target == "" {
		tn = r.generate("pset")
	} else if tn, tp, err = r.target(req.Target); err != nil {
		return OpResult{}, err
	}
	w := write{name: tn, p: tp, bm: bm, epoch: max(a.ver.epoch, b.ver.epoch)}
	if w.active, w.sched, err = attrs(tp, a, req.Active, req.Sched); err != nil {
		return OpResult{}, err
	}

	var rec []write
	if b.kind == KindDelta && req.Op.recursive() {
		for _, t := range r.recursivelyAffected(a.key, a.ver, b.ver) {
			if t.key == tn.String() {
				continue // the target already holds op(P1, P2)
			}
			if nw, ok := deltaWrite(req.Op, t, b.ver); ok {
				rec = append(rec, nw)
			}
		}
	}

	slices.SortFunc(rec, func(x, y write) int { return strings.Compare(x.p.key, y.p.key) })
	res := r.commit(w)
	for _, nw := range rec {
		res.Affected = append(res.Affected, r.commit(nw).Result)
	}
	return res, nil
}

// deltaWrite prepares op(T, U) for a runtime-maintained set T and reports
// whether it changes T. For UNION and DIFFERENCE the result contains resp.
// is contained in T, so equal sizes mean equal sets.
func deltaWrite(op Op, t *pset, u *version) (write, bool) {
	old := t.latest()
	nb := op.apply(old.bm, u.bm)
	if nb.GetCardinality() == uint64(old.size) {
		return write{}, false
	}
	return write{name: t.name, p: t, bm: nb, epoch: max(old.epoch, u.epoch), active: t.active, sched: t.sched}, true
}

func (r *Registry) setAttrs(req OpRequest) (OpResult, error) {
	if req.Target == "" {
		return OpResult{}, wire.Errorf(wire.ErrInvalid, "NULL operation needs a target whose attributes to update")
	}
	_, tp, err := r.target(req.Target)
	if err != nil {
		return OpResult{}, err
	}
	if tp == nil {
		return OpResult{}, wire.Errorf(wire.ErrNotFound, "NULL operation: target %s not found", req.Target)
	}
	active, sched, err := attrs(tp, operand{}, req.Active, req.Sched)
	if err != nil {
		return OpResult{}, err
	}
	tp.active, tp.sched = active, sched
	r.changed()
	return OpResult{Result: tp.info(tp.newest(), tp.latest())}, nil
}

// ApplyDeltaToInactive applies op (UNION or DIFFERENCE) with the delta set
// to every inactive set of the application domain that shares ranks with
// it, and returns the sets that got a new version.
//
// Why it exists: an inactive set is the runtime's to keep consistent
// (§6.1.3), but ApplyOp only reaches inactive sets when the application
// runs an op with the delta as second operand. When no application part is
// responsible for a SUB delta (X_c(U) is empty because all sets holding
// those ranks are inactive) or the application built its new sets another
// way, terminated ranks would stay in inactive sets forever. The RC code
// therefore calls this with DIFFERENCE when a SUB change is finalized. It
// is idempotent: sets the recursion already updated no longer intersect
// the delta. For an ADD delta it usually does nothing, since the new ranks
// are in no set yet; inactive supersets grow through the application's own
// UNION with the delta (Def. 4's subset clause).
func (r *Registry) ApplyDeltaToInactive(delta string, op Op) ([]Info, error) {
	p, u, _, err := r.lookup(delta, Latest)
	if err != nil {
		return nil, err
	}
	if p.name.Kind != KindDelta {
		return nil, wire.Errorf(wire.ErrInvalid, "%s is not a delta set (want mpi://rte/%s/rc/<n>)", p.key, r.app)
	}
	if !op.recursive() {
		return nil, wire.Errorf(wire.ErrInvalid, "%s cannot be applied to inactive sets; use union or difference", op)
	}
	var ws []write
	for _, t := range r.appSets() {
		if t.active || !intersects(t.latest(), u) {
			continue
		}
		if w, ok := deltaWrite(op, t, u); ok {
			ws = append(ws, w)
		}
	}
	out := make([]Info, 0, len(ws))
	for _, w := range ws {
		out = append(out, r.commit(w).Result)
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// SplitRequest asks to split one set into parts (thesis §6.3.3 names
// splitting as a needed extension). Exactly one of Parts and Ranks is set.
type SplitRequest struct {
	Set string // reference of the set to split ("name" or "name@version")
	// Parts > 0 splits into that many parts in rank order whose sizes
	// differ by at most one (the first parts take the extra ranks).
	Parts int
	// Ranks gives the parts explicitly. Each must be a non-empty subset of
	// Set and the parts must be pairwise disjoint; they need not cover Set,
	// so picking a few groups out of a set is a split too. Overlapping parts
	// are rejected because they are almost always a mistake and would make
	// "split" mean nothing more than "define".
	Ranks [][]uint32
	// Names of the parts, one per part. If empty, part i is named
	// "<Target>/<i>" (i from 0); an empty Target means Set's own name when
	// Set is in the application domain, else a generated name. Existing
	// names get a new version, as for ApplyOp's target.
	Names  []string
	Target string
	Active *bool             // as in OpRequest; new parts inherit from Set
	Sched  map[string]string // as in OpRequest
}

// Split splits a set as described by req. The parts take the epoch of the
// split set's version. It returns one result per part, in part order;
// nothing is changed when an error is returned.
func (r *Registry) Split(req SplitRequest) ([]OpResult, error) {
	if err := checkSched(req.Sched); err != nil {
		return nil, err
	}
	src, err := r.operand("set to split", req.Set, nil)
	if err != nil {
		return nil, err
	}
	var parts []*roaring.Bitmap
	switch {
	case req.Parts > 0 && len(req.Ranks) > 0:
		return nil, wire.Errorf(wire.ErrInvalid, "split %s: give either a number of parts or explicit rank lists, not both", req.Set)
	case req.Parts > 0:
		if parts, err = splitEven(src, req.Parts); err != nil {
			return nil, err
		}
	case len(req.Ranks) > 0:
		if parts, err = splitExplicit(src, req.Ranks); err != nil {
			return nil, err
		}
	default:
		return nil, wire.Errorf(wire.ErrInvalid, "split %s: give a positive number of parts or explicit rank lists", req.Set)
	}

	names := req.Names
	if len(names) == 0 {
		base := req.Target
		if base == "" {
			if src.kind == KindApp {
				base = src.key
			} else {
				base = r.generate("split").String()
			}
		}
		for i := range parts {
			names = append(names, base+"/"+strconv.Itoa(i))
		}
	} else if len(names) != len(parts) {
		return nil, wire.Errorf(wire.ErrInvalid, "split %s: %d names given for %d parts", req.Set, len(names), len(parts))
	}

	ws := make([]write, len(parts))
	seen := map[string]bool{}
	for i, bm := range parts {
		n, p, err := r.target(names[i])
		if err != nil {
			return nil, err
		}
		if key := n.String(); seen[key] {
			return nil, wire.Errorf(wire.ErrInvalid, "split %s: name %s given twice", req.Set, key)
		} else {
			seen[key] = true
		}
		ws[i] = write{name: n, p: p, bm: bm, epoch: src.ver.epoch}
		if ws[i].active, ws[i].sched, err = attrs(p, src, req.Active, req.Sched); err != nil {
			return nil, err
		}
	}
	out := make([]OpResult, len(ws))
	for i, w := range ws {
		out[i] = r.commit(w)
	}
	return out, nil
}

func splitEven(src operand, k int) ([]*roaring.Bitmap, error) {
	n := src.ver.size
	if k > n {
		return nil, wire.Errorf(wire.ErrInvalid, "cannot split %s (%d members) into %d non-empty parts", src.key, n, k)
	}
	ranks := src.ver.bm.ToArray()
	q, rem := n/k, n%k
	parts := make([]*roaring.Bitmap, k)
	lo := 0
	for i := range parts {
		hi := lo + q
		if i < rem {
			hi++
		}
		parts[i] = roaring.BitmapOf(ranks[lo:hi]...)
		lo = hi
	}
	return parts, nil
}

func splitExplicit(src operand, lists [][]uint32) ([]*roaring.Bitmap, error) {
	parts := make([]*roaring.Bitmap, len(lists))
	seen := roaring.New()
	for i, l := range lists {
		bm := roaring.BitmapOf(l...)
		if bm.IsEmpty() {
			return nil, wire.Errorf(wire.ErrInvalid, "split %s: part %d is empty", src.key, i)
		}
		if out := roaring.AndNot(bm, src.ver.bm); !out.IsEmpty() {
			return nil, wire.Errorf(wire.ErrInvalid, "split %s: part %d has %d rank(s) outside the set (first: %d)", src.key, i, out.GetCardinality(), out.Minimum())
		}
		if both := roaring.And(bm, seen); !both.IsEmpty() {
			return nil, wire.Errorf(wire.ErrInvalid, "split %s: part %d overlaps an earlier part (rank %d); parts must be disjoint", src.key, i, both.Minimum())
		}
		seen.Or(bm)
		parts[i] = bm
	}
	return parts, nil
}
