package rc

import (
	"strconv"
	"strings"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// The rules of phase 3 that the daemon and the client libraries both
// apply: which bound set a member accepts for, and who leaves.

// BoundOf resolves the bound set of change rec that rank accepts for: the
// one named (name), else the only one holding rank. It returns the set's
// version of the announcement and its members, which members looks up.
func BoundOf(rec *wire.RC, rank uint32, name string, members func(wire.PsetRef) (wire.RankRanges, error)) (wire.PsetRef, wire.RankRanges, error) {
	if len(rec.BoundRefs) == 0 {
		return wire.PsetRef{}, nil, wire.Errorf(wire.ErrState, "resource change %s is %s: nothing to accept yet", rec.Delta, rec.Status)
	}
	if name != "" {
		n, err := pset.Parse(name)
		if err != nil {
			return wire.PsetRef{}, nil, wire.Errorf(wire.ErrInvalid, "bound set: %w", err)
		}
		for _, ref := range rec.BoundRefs {
			if ref.Name != n.String() {
				continue
			}
			m, err := members(ref)
			if err == nil && !m.Contains(rank) {
				err = wire.Errorf(wire.ErrPermission, "rank %d is not a member of %s@%d (members %s), which accepts %s", rank, ref.Name, ref.Version, m, rec.Delta)
			}
			return ref, m, err
		}
		return wire.PsetRef{}, nil, wire.Errorf(wire.ErrInvalid, "resource change %s is not bound to %s (bound: %s)", rec.Delta, n, refList(rec.BoundRefs))
	}
	var found []wire.PsetRef
	var fm wire.RankRanges
	for _, ref := range rec.BoundRefs {
		m, err := members(ref)
		if err != nil {
			return wire.PsetRef{}, nil, err
		}
		if m.Contains(rank) {
			found = append(found, ref)
			fm = m
		}
	}
	switch len(found) {
	case 1:
		return found[0], fm, nil
	case 0:
		return wire.PsetRef{}, nil, wire.Errorf(wire.ErrPermission, "rank %d is in none of the sets bound to %s (%s)", rank, rec.Delta, refList(rec.BoundRefs))
	}
	return wire.PsetRef{}, nil, wire.Errorf(wire.ErrInvalid, "rank %d is in %d sets bound to %s (%s); name the one that accepts", rank, len(found), rec.Delta, refList(found))
}

func refList(refs []wire.PsetRef) string {
	s := make([]string, len(refs))
	for i, r := range refs {
		s[i] = r.Name + "@" + strconv.FormatUint(uint64(r.Version), 10)
	}
	return strings.Join(s, ", ")
}

// Terminates says whether rank leaves with the change: a process a SUB
// removes, or one a REPLACE replaces once it is FINALIZED (before that it
// may still be aborted, and the process stays).
func Terminates(rec *wire.RC, rank uint32, status string) bool {
	switch rec.Type {
	case wire.RCSub:
		return rec.Ranks.Contains(rank)
	case wire.RCReplace:
		return status == wire.RCFinalized && rec.Out.Contains(rank)
	}
	return false
}
