package session

import (
	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// SetVersion names one exact version of a process set: a (name, version)
// pair always holds the same members. It is the type of every set
// version the API takes or returns (the records' BoundRefs and NewSet, a
// set operation's Ref, SetAfter, Confirm, accept results), and it prints
// as "<name>@<version>", the form PsetInfo and PsetOp accept for an
// earlier version.
type SetVersion = wire.PsetRef

// ParseSetVersion reads "<name>@<version>" (what SetVersion.String
// writes). The version is required: a bare name means "the latest
// version", which is not one exact membership.
func ParseSetVersion(s string) (SetVersion, error) {
	n, ver, err := pset.ParseRef(s)
	if err != nil {
		return SetVersion{}, err
	}
	if ver == pset.Latest {
		return SetVersion{}, wire.Errorf(wire.ErrInvalid, "session: %q names no version: write <name>@<version>", s)
	}
	return SetVersion{Name: n.String(), Version: uint32(ver)}, nil
}
