package wire

import "strconv"

// String writes the reference the way every tool and call reads it:
// "<name>@<version>" (lib/pset.ParseRef, session.ParseSetVersion).
func (r PsetRef) String() string { return r.Name + "@" + strconv.FormatUint(uint64(r.Version), 10) }
