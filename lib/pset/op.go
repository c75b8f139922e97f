package pset

import (
	"maps"
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
	// SPLIT is listed too: it is one of the operations of pset.op, but it
	// has its own request (Registry.Split) since it makes several sets.
	return 0, wire.Errorf(wire.ErrInvalid, "unknown process set operation %q (want union, difference, intersection, null or split)", s)
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

// SplitMode says how Split divides a set.
type SplitMode uint8

// The ways to split (wire.SplitParts, wire.SplitRanks, wire.SplitNode).
const (
	SplitByCount SplitMode = iota + 1 // k near-equal parts in rank order
	SplitByRanks                      // explicit rank lists that partition the set
	SplitByNode                       // one part per node holding members
)

var splitModeNames = [...]string{"", wire.SplitParts, wire.SplitRanks, wire.SplitNode}

func (m SplitMode) String() string {
	if m > 0 && int(m) < len(splitModeNames) {
		return splitModeNames[m]
	}
	return "split-mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseSplitMode parses "parts", "ranks" or "node" (any case).
func ParseSplitMode(s string) (SplitMode, error) {
	for i, n := range splitModeNames[1:] {
		if strings.EqualFold(n, s) {
			return SplitMode(i + 1), nil
		}
	}
	if s == "" {
		return 0, wire.Errorf(wire.ErrInvalid, "split: no mode given (want %s, %s or %s)", wire.SplitParts, wire.SplitRanks, wire.SplitNode)
	}
	return 0, wire.Errorf(wire.ErrInvalid, "split: unknown mode %q (want %s, %s or %s)", s, wire.SplitParts, wire.SplitRanks, wire.SplitNode)
}

// SplitRequest asks to split one set into parts (SPLIT, named by thesis
// §6.6 and psetop v2 as a needed extension). Each mode uses its own field;
// the others must be zero.
type SplitRequest struct {
	Set  string // reference of the set to split ("name" or "name@version")
	Mode SplitMode
	// Parts (SplitByCount) is k, 1..|Set|: part i holds the next
	// ceil/floor(|Set|/k) members in rank order, larger parts first.
	Parts int
	// Ranks (SplitByRanks) are the parts: each non-empty, pairwise
	// disjoint, and together exactly the members of Set (a partition), so
	// that no member is lost or counted twice by accident.
	Ranks []wire.RankRanges
	// Nodes (SplitByNode) holds the ranks on each node by node index; the
	// parts follow the index order. The master passes its placement of
	// the job: the registry knows no nodes.
	Nodes map[int]wire.RankRanges
	// Names of the parts, one per part. If empty, part i is named
	// "<Target>/<i>" (i from 0), or, without Target, "<root>/split-<n>/<i>"
	// with a fresh n. An existing name gets a new version, as for
	// ApplyOp's target.
	Names  []string
	Target string
	Active *bool             // as in OpRequest; new parts inherit from Set
	Sched  map[string]string // as in OpRequest
	Caller *Caller           // resolves SELF and SHARED; may be nil
}

// SplitResult reports a split: one result per part, in part order.
type SplitResult struct {
	Parts []OpResult
	Nodes []int // SplitByNode: the node index of each part
}

// Split splits a set as described by req into new sets (or new versions of
// the named ones). The parts take the epoch of the split version (Def. 1:
// the result of an operation has the newest epoch of its operands), and
// no other set changes: there is no delta operand, so no set is
// recursively affected (Def. 4). Delta sets cannot be split: they record a
// change, and their parts would mean nothing to the change engine. Nothing
// is changed when an error is returned.
func (r *Registry) Split(req SplitRequest) (SplitResult, error) {
	if err := checkSched(req.Sched); err != nil {
		return SplitResult{}, err
	}
	src, err := r.operand("set to split", req.Set, req.Caller)
	if err != nil {
		return SplitResult{}, err
	}
	if src.kind == KindDelta {
		return SplitResult{}, wire.Errorf(wire.ErrInvalid, "cannot split %s: a delta set records a resource change and is read-only; split the set the change was applied to", src.key)
	}
	if err := req.checkMode(); err != nil {
		return SplitResult{}, err
	}
	var parts []*roaring.Bitmap
	var nodes []int
	switch req.Mode {
	case SplitByCount:
		parts, err = splitEven(src, req.Parts)
	case SplitByRanks:
		parts, err = splitExplicit(src, req.Ranks)
	case SplitByNode:
		parts, nodes, err = splitByNode(src, req.Nodes)
	}
	if err != nil {
		return SplitResult{}, err
	}
	if len(req.Names) > 0 && len(req.Names) != len(parts) {
		return SplitResult{}, wire.Errorf(wire.ErrInvalid, "split %s: %d name(s) given for %d part(s)", src.key, len(req.Names), len(parts))
	}
	names := req.Names
	if len(names) == 0 && req.Target != "" {
		for i := range parts {
			names = append(names, req.Target+"/"+strconv.Itoa(i))
		}
	}
	ws := make([]write, len(parts))
	seen := map[string]bool{}
	for i, bm := range parts {
		var n Name
		var p *pset
		if names != nil {
			if n, p, err = r.target(names[i]); err != nil {
				return SplitResult{}, err
			}
			if key := n.String(); seen[key] {
				return SplitResult{}, wire.Errorf(wire.ErrInvalid, "split %s: name %s given twice", src.key, key)
			}
			seen[n.String()] = true
		}
		ws[i] = write{name: n, p: p, bm: bm, epoch: src.ver.epoch}
		if ws[i].active, ws[i].sched, err = attrs(p, src, req.Active, req.Sched); err != nil {
			return SplitResult{}, err
		}
	}
	if names == nil {
		// Generated only once the request is known to be good, so that a
		// refused split does not use up a number.
		base := r.generateSplit(len(parts))
		for i := range ws {
			ws[i].name = Name{Kind: KindApp, App: r.app, Sub: base + "/" + strconv.Itoa(i)}
		}
	}
	out := SplitResult{Parts: make([]OpResult, len(ws)), Nodes: nodes}
	for i, w := range ws {
		out.Parts[i] = r.commit(w)
	}
	return out, nil
}

// checkMode checks that the fields of the other modes are unset.
func (req *SplitRequest) checkMode() error {
	set := map[SplitMode]bool{SplitByCount: req.Parts != 0, SplitByRanks: len(req.Ranks) > 0, SplitByNode: req.Nodes != nil}
	switch req.Mode {
	case SplitByCount, SplitByRanks, SplitByNode:
	default:
		return wire.Errorf(wire.ErrInvalid, "split %s: unknown mode %s (want %s, %s or %s)", req.Set, req.Mode, SplitByCount, SplitByRanks, SplitByNode)
	}
	for m, given := range set {
		if given && m != req.Mode {
			return wire.Errorf(wire.ErrInvalid, "split %s by %s: the %s of split by %s given too; give one mode", req.Set, req.Mode, map[SplitMode]string{SplitByCount: "number of parts", SplitByRanks: "rank lists", SplitByNode: "node map"}[m], m)
		}
	}
	return nil
}

// generateSplit returns a fresh stem "split-<n>" under which none of the
// k part names is taken.
func (r *Registry) generateSplit(k int) string {
	for {
		stem := r.generate("split").Sub
		free := true
		for i := range k {
			key := r.root + "/" + stem + "/" + strconv.Itoa(i)
			if _, used := r.sets[key]; used {
				free = false
				break
			}
			if _, used := r.deleted[key]; used {
				free = false
				break
			}
		}
		if free {
			return stem
		}
	}
}

func splitEven(src operand, k int) ([]*roaring.Bitmap, error) {
	n := src.ver.size
	if k < 1 || k > n {
		return nil, wire.Errorf(wire.ErrInvalid, "cannot split %s (%d members) into %d parts: want 1 to %d non-empty parts", src.key, n, k, n)
	}
	// Each part is the set cut to the ranks between its first and last
	// member (found by position): no expansion of the set into a list.
	q, rem := n/k, n%k
	parts := make([]*roaring.Bitmap, k)
	lo := 0
	for i := range parts {
		hi := lo + q
		if i < rem {
			hi++
		}
		first, err := src.ver.bm.Select(uint32(lo))
		if err != nil {
			return nil, wire.Errorf(wire.ErrInternal, "split %s: member %d of %d: %v", src.key, lo, n, err)
		}
		last, err := src.ver.bm.Select(uint32(hi - 1))
		if err != nil {
			return nil, wire.Errorf(wire.ErrInternal, "split %s: member %d of %d: %v", src.key, hi-1, n, err)
		}
		window := roaring.New()
		window.AddRange(uint64(first), uint64(last)+1)
		parts[i] = roaring.And(src.ver.bm, window)
		lo = hi
	}
	return parts, nil
}

// splitExplicit checks that lists partition src and reports every rank
// that breaks it, so one answer names all mistakes.
func splitExplicit(src operand, lists []wire.RankRanges) ([]*roaring.Bitmap, error) {
	parts := make([]*roaring.Bitmap, len(lists))
	seen, dup, out := roaring.New(), roaring.New(), roaring.New()
	var empty []string
	for i, l := range lists {
		bm := roaring.New()
		for _, g := range l {
			bm.AddRange(uint64(g.Lo), uint64(g.Hi)+1)
		}
		if bm.IsEmpty() {
			empty = append(empty, strconv.Itoa(i))
		}
		out.Or(roaring.AndNot(bm, src.ver.bm))
		dup.Or(roaring.And(bm, seen))
		seen.Or(bm)
		parts[i] = bm
	}
	missing := roaring.AndNot(src.ver.bm, seen)
	var errs []string
	if len(empty) > 0 {
		errs = append(errs, "part(s) "+strings.Join(empty, ", ")+" empty")
	}
	if !out.IsEmpty() {
		errs = append(errs, "not members: "+rankList(out))
	}
	if !dup.IsEmpty() {
		errs = append(errs, "in more than one part: "+rankList(dup))
	}
	if !missing.IsEmpty() {
		errs = append(errs, "members in no part: "+rankList(missing))
	}
	if len(errs) > 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "split %s: the rank lists must be non-empty, disjoint and cover the set exactly; %s", src.key, strings.Join(errs, "; "))
	}
	return parts, nil
}

// rankList shows the ranks of bm as ranges, the first few only.
func rankList(bm *roaring.Bitmap) string {
	var rr wire.RankRanges
	it := bm.Iterator()
	for it.HasNext() && len(rr) <= 8 {
		rr = rr.Add(it.Next())
	}
	if len(rr) > 8 {
		return wire.RankRanges(rr[:8]).String() + ",... (" + strconv.FormatUint(bm.GetCardinality(), 10) + " ranks)"
	}
	return rr.String()
}

// splitByNode intersects the set with each node's ranks: the work grows
// with the nodes and the bitmap containers, not with the members.
func splitByNode(src operand, onNode map[int]wire.RankRanges) ([]*roaring.Bitmap, []int, error) {
	var parts []*roaring.Bitmap
	var nodes []int
	seen := roaring.New()
	for _, n := range slices.Sorted(maps.Keys(onNode)) {
		on := roaring.New()
		for _, g := range onNode[n] {
			on.AddRange(uint64(g.Lo), uint64(g.Hi)+1)
		}
		part := roaring.And(src.ver.bm, on)
		if part.IsEmpty() {
			continue
		}
		if both := roaring.And(part, seen); !both.IsEmpty() {
			return nil, nil, wire.Errorf(wire.ErrInternal, "cannot split %s by node: rank(s) %s placed on two nodes", src.key, rankList(both))
		}
		seen.Or(part)
		parts, nodes = append(parts, part), append(nodes, n)
	}
	if lost := roaring.AndNot(src.ver.bm, seen); !lost.IsEmpty() {
		return nil, nil, wire.Errorf(wire.ErrState, "cannot split %s by node: rank(s) %s run on no node (exited or lost); remove them from the set first", src.key, rankList(lost))
	}
	return parts, nodes, nil
}
