package pset

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/dynrt/dynrt/wire"
)

// Limits on scheduling hints, so a client cannot grow a set without bound.
const (
	SchedPrefix    = "mpi_ps_sched_"
	MaxSchedKeys   = 64
	MaxSchedKeyLen = 128
	MaxSchedValLen = 1024
)

// Info describes one version of a process set: its attributes as cached on
// the set (thesis §6.1.3) plus bookkeeping for the tools. Active and Sched
// are not versioned: they are the set's current values whichever version
// Info describes.
type Info struct {
	Name    string            `json:"name" msgpack:"name"`
	Kind    Kind              `json:"kind" msgpack:"kind"`
	Size    int               `json:"mpi_size" msgpack:"mpi_size"`
	Version int               `json:"mpi_ps_version" msgpack:"mpi_ps_version"`
	Epoch   int               `json:"mpi_ps_epoch" msgpack:"mpi_ps_epoch"`
	Active  bool              `json:"mpi_ps_active" msgpack:"mpi_ps_active"`
	Sched   map[string]string `json:"sched,omitempty" msgpack:"sched,omitempty"`
	// Newest and Oldest bound the versions still held (Oldest > 0 after
	// PruneVersions or when a deleted name was created again).
	Newest int `json:"newest" msgpack:"newest"`
	Oldest int `json:"oldest" msgpack:"oldest"`
	Pins   int `json:"pins" msgpack:"pins"`
}

// version is one immutable membership of a set. Bitmaps are never mutated
// after they are stored, so they can be shared between versions and sets.
type version struct {
	bm       *roaring.Bitmap
	epoch    int
	size     int
	min, max uint32 // valid when size > 0
	pivot    uint32 // the median member; see classify.go
}

func newVersion(bm *roaring.Bitmap, epoch int) *version {
	bm.RunOptimize() // ranks are mostly contiguous: runs make them tiny
	v := &version{bm: bm, epoch: epoch, size: int(bm.GetCardinality())}
	if v.size > 0 {
		v.min, v.max = bm.Minimum(), bm.Maximum()
		v.pivot, _ = bm.Select(uint32(v.size / 2))
	}
	return v
}

// contiguous reports whether v holds every rank from its minimum to its
// maximum, as sets of a job's ranks often do.
func (v *version) contiguous() bool {
	return v.size > 0 && uint64(v.max-v.min)+1 == uint64(v.size)
}

type pset struct {
	name   Name
	key    string     // canonical name
	hist   []*version // retained versions, oldest first
	base   int        // version number of hist[0]
	active bool
	sched  map[string]string
	pins   int
}

func (p *pset) latest() *version { return p.hist[len(p.hist)-1] }
func (p *pset) newest() int      { return p.base + len(p.hist) - 1 }

func (p *pset) at(v int) (*version, error) {
	if v == Latest {
		return p.latest(), nil
	}
	if v < p.base || v > p.newest() {
		if v >= 0 && v < p.base {
			return nil, wire.Errorf(wire.ErrNotFound, "version %d of %s was pruned (oldest kept is %d)", v, p.key, p.base)
		}
		return nil, wire.Errorf(wire.ErrNotFound, "%s has no version %d (newest is %d)", p.key, v, p.newest())
	}
	return p.hist[v-p.base], nil
}

func (p *pset) info(v int, ver *version) Info {
	in := Info{
		Name: p.key, Kind: p.name.Kind, Size: ver.size, Version: v, Epoch: ver.epoch,
		Active: p.active, Newest: p.newest(), Oldest: p.base, Pins: p.pins,
	}
	if len(p.sched) > 0 {
		in.Sched = maps.Clone(p.sched)
	}
	return in
}

// Registry holds the process sets of one job (application): the predefined
// sets, the sets the application created, and the delta sets of its
// resource changes. It is not safe for concurrent use: the master's event
// loop owns one Registry per job and serialises all calls, which is also
// what thesis §6.3.2 asks of set operations.
type Registry struct {
	app     string
	root    string // mpi://app/<app>
	sets    map[string]*pset
	lastRC  uint64         // number of the newest delta set (0: none yet)
	rcEpoch int            // epoch of the newest delta set (Def. 1)
	seq     uint64         // counter for generated names
	deleted map[string]int // deleted name → next version number

	// xm caches X_m (Definition 2) until the next change of any
	// application-domain set: the RC code asks for it at every
	// announcement and accept, and X_c is derived from it.
	xm      []*pset
	xmValid bool
}

// changed drops cached classifications; every mutation of an
// application-domain set (members, attributes, existence) calls it.
func (r *Registry) changed() { r.xm, r.xmValid = nil, false }

// New returns the registry of application app whose processes at launch
// are members. It predefines mpi://WORLD and mpi://app/<app>, both with
// those members, version 0 and epoch 0.
func New(app string, members []uint32) (*Registry, error) {
	n, err := Parse(AppName(app))
	if err != nil || !n.IsRoot() {
		return nil, wire.Errorf(wire.ErrInvalid, "invalid application name %q: want one segment of letters, digits, '-', '_', '.' of at most %d bytes", app, MaxAppLen)
	}
	if len(members) == 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "application %q: no initial processes", app)
	}
	r := &Registry{app: app, root: n.String(), sets: map[string]*pset{}, deleted: map[string]int{}}
	v := newVersion(roaring.BitmapOf(members...), 0)
	r.sets[NameWorld] = &pset{name: Name{Kind: KindWorld}, key: NameWorld, hist: []*version{v}, active: true}
	r.sets[r.root] = &pset{name: n, key: r.root, hist: []*version{v}, active: true}
	return r, nil
}

// App returns the application name the registry was created for.
func (r *Registry) App() string { return r.app }

// Get describes version v (or Latest) of the named set. name may also carry
// an "@<version>" suffix when v is Latest.
func (r *Registry) Get(name string, v int) (Info, error) {
	p, ver, num, err := r.lookup(name, v)
	if err != nil {
		return Info{}, err
	}
	return p.info(num, ver), nil
}

// Members returns the ranks of ref ("name" or "name@version") in ascending
// order.
func (r *Registry) Members(ref string) ([]uint32, error) {
	_, ver, _, err := r.lookup(ref, Latest)
	if err != nil {
		return nil, err
	}
	return ver.bm.ToArray(), nil
}

// Bitmap returns a copy of the membership of ref, for callers that ship or
// combine memberships without expanding them.
func (r *Registry) Bitmap(ref string) (*roaring.Bitmap, error) {
	_, ver, _, err := r.lookup(ref, Latest)
	if err != nil {
		return nil, err
	}
	return ver.bm.Clone(), nil
}

// List describes the newest version of every stored set, sorted by name.
func (r *Registry) List() []Info {
	out := make([]Info, 0, len(r.sets))
	for _, p := range r.sets {
		out = append(out, p.info(p.newest(), p.latest()))
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// DefineDelta stores a new delta set mpi://rte/<app>/rc/<n> for a resource
// change, n counting up from 1. Its epoch follows Definition 1: one more
// than the newest delta's, 1 for the first. Delta sets are read-only and
// never deleted, so the numbering and the epochs never repeat. For an ADD
// change members are the new ranks (in no set yet); for SUB they are the
// ranks to be removed.
func (r *Registry) DefineDelta(members []uint32) (Info, error) {
	if len(members) == 0 {
		return Info{}, wire.Errorf(wire.ErrInvalid, "delta set for %s: no members", r.root)
	}
	n := Name{Kind: KindDelta, App: r.app, RC: r.lastRC + 1}
	key := n.String()
	if _, dup := r.sets[key]; dup { // cannot happen: numbers only grow
		return Info{}, wire.Errorf(wire.ErrInternal, "delta set %s already defined", key)
	}
	p := &pset{name: n, key: key, hist: []*version{newVersion(roaring.BitmapOf(members...), r.rcEpoch+1)}, active: true}
	r.sets[key] = p
	r.lastRC, r.rcEpoch = n.RC, r.rcEpoch+1
	return p.info(0, p.latest()), nil
}

// DefineReplaced defines the second delta set of the latest change, a
// REPLACE: mpi://rte/<app>/rc/<n>/out, the processes it replaces (its
// delta set, from DefineDelta, holds the new ones). Same epoch as that
// delta; forgotten with it (ForgetDelta).
func (r *Registry) DefineReplaced(members []uint32) (Info, error) {
	if len(members) == 0 {
		return Info{}, wire.Errorf(wire.ErrInvalid, "replaced set for %s: no members", r.root)
	}
	if r.lastRC == 0 {
		return Info{}, wire.Errorf(wire.ErrState, "replaced set for %s: no delta set defined yet", r.root)
	}
	n := Name{Kind: KindDelta, App: r.app, RC: r.lastRC, Out: true}
	key := n.String()
	if _, dup := r.sets[key]; dup {
		return Info{}, wire.Errorf(wire.ErrState, "replaced set %s already defined", key)
	}
	p := &pset{name: n, key: key, hist: []*version{newVersion(roaring.BitmapOf(members...), r.rcEpoch)}, active: true}
	r.sets[key] = p
	return p.info(0, p.latest()), nil
}

// Delete removes an application-created set with all its versions. The
// predefined sets (mpi://WORLD, mpi://app/<app>) and delta sets cannot be
// deleted, nor can a pinned set. If the name is created again later its
// version numbers continue where the deleted set stopped, so that a
// (name, version) pair never names two different memberships.
func (r *Registry) Delete(name string) error {
	p, err := r.find(name)
	if err != nil {
		return err
	}
	if p.name.Kind != KindApp || p.name.IsRoot() {
		return wire.Errorf(wire.ErrPermission, "cannot delete %s: only sets created by the application can be deleted", p.key)
	}
	if p.pins > 0 {
		return pinnedErr(p, "delete")
	}
	delete(r.sets, p.key)
	r.deleted[p.key] = p.newest() + 1
	r.changed()
	return nil
}

// PruneVersions drops the stored memberships of versions older than keep
// (the newest version is always kept) and returns how many were dropped.
// Later Get calls for dropped versions fail with wire.ErrNotFound. A pinned
// set cannot be pruned, since a pending change may still name an old
// version.
func (r *Registry) PruneVersions(name string, keep int) (int, error) {
	p, err := r.find(name)
	if err != nil {
		return 0, err
	}
	if p.pins > 0 {
		return 0, pinnedErr(p, "prune")
	}
	drop := min(keep-p.base, len(p.hist)-1)
	if drop <= 0 {
		return 0, nil
	}
	clear(p.hist[:drop]) // let the bitmaps go
	p.hist = slices.Clone(p.hist[drop:])
	p.base += drop
	return drop, nil
}

// Pin takes a reference on a set (for instance an operand or bound set of a
// pending resource change) so that it cannot be deleted or pruned until the
// matching Unpin. Pins are counted; new versions are still allowed. name
// may carry an "@<version>" suffix, which must exist; the pin covers the
// whole set.
func (r *Registry) Pin(name string) error {
	p, _, _, err := r.lookup(name, Latest)
	if err != nil {
		return err
	}
	p.pins++
	return nil
}

// Unpin releases one reference taken by Pin.
func (r *Registry) Unpin(name string) error {
	p, _, _, err := r.lookup(name, Latest)
	if err != nil {
		return err
	}
	if p.pins == 0 {
		return wire.Errorf(wire.ErrState, "unpin %s: set is not pinned", p.key)
	}
	p.pins--
	return nil
}

func pinnedErr(p *pset, what string) error {
	return wire.Errorf(wire.ErrBusy, "cannot %s %s: pinned by %d pending reference(s)", what, p.key, p.pins)
}

// find returns the stored set called name (no version suffix allowed).
func (r *Registry) find(name string) (*pset, error) {
	n, err := Parse(name)
	if err != nil {
		return nil, err
	}
	return r.byName(n)
}

func (r *Registry) byName(n Name) (*pset, error) {
	key := n.String()
	if n.Kind == KindSelf || n.Kind == KindShared {
		return nil, wire.Errorf(wire.ErrInvalid, "%s differs per process and is not stored: resolve it from the caller (rank, node peers)", key)
	}
	if (n.Kind == KindApp || n.Kind == KindDelta) && n.App != r.app {
		return nil, wire.Errorf(wire.ErrNotFound, "process set %s not found: it belongs to application %q, this is %q", key, n.App, r.app)
	}
	p := r.sets[key]
	if p == nil {
		if _, gone := r.deleted[key]; gone {
			return nil, wire.Errorf(wire.ErrNotFound, "process set %s was deleted", key)
		}
		if n.Kind == KindDelta && n.RC > 0 && n.RC <= r.lastRC {
			return nil, wire.Errorf(wire.ErrNotFound, "process set %s belonged to a resource change that settled and was forgotten (only the latest are kept)", key)
		}
		return nil, wire.Errorf(wire.ErrNotFound, "process set %s not found", key)
	}
	return p, nil
}

// lookup resolves a reference ("name" or "name@v") and an explicit version;
// both may not name a version.
func (r *Registry) lookup(ref string, v int) (*pset, *version, int, error) {
	n, rv, err := ParseRef(ref)
	if err != nil {
		return nil, nil, 0, err
	}
	if rv != Latest {
		if v != Latest && v != rv {
			return nil, nil, 0, wire.Errorf(wire.ErrInvalid, "%q names version %d but version %d was asked for", ref, rv, v)
		}
		v = rv
	}
	if v < Latest {
		return nil, nil, 0, wire.Errorf(wire.ErrInvalid, "invalid version %d of %s", v, n)
	}
	p, err := r.byName(n)
	if err != nil {
		return nil, nil, 0, err
	}
	ver, err := p.at(v)
	if err != nil {
		return nil, nil, 0, err
	}
	if v == Latest {
		v = p.newest()
	}
	return p, ver, v, nil
}

// checkSched validates scheduling hints given in a request.
func checkSched(h map[string]string) error {
	if len(h) > MaxSchedKeys {
		return wire.Errorf(wire.ErrInvalid, "%d scheduling hints given, at most %d allowed", len(h), MaxSchedKeys)
	}
	for k, v := range h {
		rest, ok := strings.CutPrefix(k, SchedPrefix)
		if !ok || rest == "" || len(k) > MaxSchedKeyLen || strings.IndexFunc(rest, func(c rune) bool { return c > 0x7f || !segChar(byte(c)) }) >= 0 {
			return wire.Errorf(wire.ErrInvalid, "invalid scheduling hint key %q: want %s<name> (letters, digits, '-', '_', '.'; at most %d bytes)", k, SchedPrefix, MaxSchedKeyLen)
		}
		if len(v) > MaxSchedValLen {
			return wire.Errorf(wire.ErrInvalid, "scheduling hint %s: value longer than %d bytes", k, MaxSchedValLen)
		}
	}
	return nil
}

// mergeSched overlays given on base: given keys replace, an empty value
// removes the key. It returns a new map (nil when empty) and fails when the
// result would exceed MaxSchedKeys.
func mergeSched(base, given map[string]string) (map[string]string, error) {
	out := maps.Clone(base)
	for k, v := range given {
		if v == "" {
			delete(out, k)
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	if len(out) > MaxSchedKeys {
		return nil, wire.Errorf(wire.ErrInvalid, "a set may carry at most %d scheduling hints", MaxSchedKeys)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// generate returns a fresh name in the application domain.
func (r *Registry) generate(stem string) Name {
	for {
		r.seq++
		n := Name{Kind: KindApp, App: r.app, Sub: stem + "-" + strconv.FormatUint(r.seq, 10)}
		key := n.String()
		if _, used := r.sets[key]; used {
			continue
		}
		if _, used := r.deleted[key]; used {
			continue
		}
		return n
	}
}
