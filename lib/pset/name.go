package pset

import (
	"strconv"
	"strings"

	"github.com/dynrt/dynrt/wire"
)

// Kind classifies a process set name by its domain.
type Kind uint8

// The kinds of process set names.
const (
	KindInvalid Kind = iota
	KindWorld        // mpi://WORLD: the processes started at launch
	KindSelf         // mpi://SELF: the calling process alone
	KindShared       // mpi://SHARED: the caller's job peers on its node
	KindApp          // mpi://app/<app>[/<name>...]: the application's domain
	KindDelta        // mpi://rte/<app>/rc/<n>[/out]: delta set of a resource change (out: the processes a REPLACE replaces)
)

var kindNames = [...]string{"invalid", "world", "self", "shared", "app", "delta"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText encodes a Kind by its name so that JSON and msgpack output is
// readable and stable.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText is the inverse of MarshalText.
func (k *Kind) UnmarshalText(b []byte) error {
	for i, n := range kindNames {
		if n == string(b) {
			*k = Kind(i)
			return nil
		}
	}
	return wire.Errorf(wire.ErrInvalid, "unknown process set kind %q", b)
}

// Canonical spellings of the predefined names.
const (
	NameWorld  = "mpi://WORLD"
	NameSelf   = "mpi://SELF"
	NameShared = "mpi://SHARED"
)

// Limits on names. PMIx bounds names at 255 bytes; app names are kept short
// so that generated and split names below them still fit.
const (
	MaxNameLen = 255
	MaxAppLen  = 64
)

// shapes is quoted in every parse error so the user sees what would work.
const shapes = "accepted: mpi://WORLD, mpi://SELF, mpi://SHARED, mpi://app/<app>[/<name>...], mpi://rte/<app>/rc/<n>[/out]; " +
	"segments use letters, digits, '-', '_', '.'"

// Name is a parsed process set name.
type Name struct {
	Kind Kind
	App  string // application (job) name for KindApp and KindDelta
	Sub  string // path below mpi://app/<app> ("" for the application's root set)
	RC   uint64 // resource change number for KindDelta
	Out  bool   // KindDelta: the replaced processes of a REPLACE (mpi://rte/<app>/rc/<n>/out)
}

// String returns the canonical spelling of n.
func (n Name) String() string {
	switch n.Kind {
	case KindWorld:
		return NameWorld
	case KindSelf:
		return NameSelf
	case KindShared:
		return NameShared
	case KindApp:
		if n.Sub == "" {
			return AppName(n.App)
		}
		return AppName(n.App) + "/" + n.Sub
	case KindDelta:
		if n.Out {
			return OutName(n.App, n.RC)
		}
		return DeltaName(n.App, n.RC)
	}
	return ""
}

// IsRoot reports whether n is the predefined root set mpi://app/<app>.
func (n Name) IsRoot() bool { return n.Kind == KindApp && n.Sub == "" }

// AppName returns mpi://app/<app>. It does not validate app; Parse does.
func AppName(app string) string { return "mpi://app/" + app }

// DeltaName returns mpi://rte/<app>/rc/<n>. It does not validate app.
func DeltaName(app string, n uint64) string {
	return "mpi://rte/" + app + "/rc/" + strconv.FormatUint(n, 10)
}

// OutName returns mpi://rte/<app>/rc/<n>/out, the set of the processes
// the n-th change (a REPLACE) replaces. It does not validate app.
func OutName(app string, n uint64) string { return DeltaName(app, n) + "/out" }

// Parse validates a process set name and splits it into its parts. The
// predefined names are matched case-insensitively (Open MPI spells them in
// lower case, MPI 4 in upper case) and canonicalised to upper case; all
// other names are case-sensitive.
func Parse(s string) (Name, error) {
	bad := func(why string) (Name, error) {
		return Name{}, wire.Errorf(wire.ErrInvalid, "invalid process set name %q: %s (%s)", s, why, shapes)
	}
	if len(s) > MaxNameLen {
		return bad("longer than " + strconv.Itoa(MaxNameLen) + " bytes")
	}
	rest, ok := strings.CutPrefix(s, "mpi://")
	if !ok {
		return bad("missing mpi:// scheme")
	}
	switch {
	case strings.EqualFold(rest, "WORLD"):
		return Name{Kind: KindWorld}, nil
	case strings.EqualFold(rest, "SELF"):
		return Name{Kind: KindSelf}, nil
	case strings.EqualFold(rest, "SHARED"):
		return Name{Kind: KindShared}, nil
	}
	segs := strings.Split(rest, "/")
	for i, seg := range segs {
		if why := checkSegment(seg); why != "" {
			return bad("segment " + strconv.Itoa(i+1) + " " + why)
		}
	}
	switch segs[0] {
	case "app":
		if len(segs) < 2 {
			return bad("missing application name after mpi://app/")
		}
		if len(segs[1]) > MaxAppLen {
			return bad("application name longer than " + strconv.Itoa(MaxAppLen) + " bytes")
		}
		return Name{Kind: KindApp, App: segs[1], Sub: strings.Join(segs[2:], "/")}, nil
	case "rte":
		out := len(segs) == 5 && segs[4] == "out"
		if (len(segs) != 4 && !out) || segs[2] != "rc" {
			return bad("runtime names must be mpi://rte/<app>/rc/<n> or mpi://rte/<app>/rc/<n>/out")
		}
		if len(segs[1]) > MaxAppLen {
			return bad("application name longer than " + strconv.Itoa(MaxAppLen) + " bytes")
		}
		n, err := parseUint(segs[3])
		if err != "" {
			return bad("resource change number " + err)
		}
		return Name{Kind: KindDelta, App: segs[1], RC: n, Out: out}, nil
	}
	return bad("unknown domain " + strconv.Quote(segs[0]))
}

// checkSegment returns why seg is not a valid name segment, or "".
func checkSegment(seg string) string {
	if seg == "" {
		return "is empty"
	}
	if strings.Trim(seg, ".") == "" {
		return "consists of dots only"
	}
	for _, c := range []byte(seg) {
		if c >= 0x80 {
			return "has a non-ASCII character"
		}
		if !segChar(c) {
			return "has character " + strconv.QuoteRune(rune(c))
		}
	}
	return ""
}

func segChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

// parseUint parses a canonical non-negative decimal (no sign, no leading
// zeros, so every number has one spelling) and returns why it is bad.
func parseUint(s string) (uint64, string) {
	if s == "" {
		return 0, "is empty"
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, "is not a non-negative decimal integer"
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, "has leading zeros"
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, "is out of range"
	}
	return n, ""
}

// Latest selects the newest version in Get and friends.
const Latest = -1

// ParseRef parses an operand reference: a name, optionally followed by
// "@<version>" to select one exact membership of that set ('@' is not a
// valid name character, so the split is unambiguous). Without a suffix the
// version is Latest.
func ParseRef(ref string) (Name, int, error) {
	name, ver, hasVer := strings.Cut(ref, "@")
	n, err := Parse(name)
	if err != nil {
		return Name{}, 0, err
	}
	if !hasVer {
		return n, Latest, nil
	}
	v, why := parseUint(ver)
	if why == "" && v > 1<<31 {
		why = "is out of range"
	}
	if why != "" {
		return Name{}, 0, wire.Errorf(wire.ErrInvalid, "invalid process set reference %q: version %s (use <name>@<version>)", ref, why)
	}
	return n, int(v), nil
}
