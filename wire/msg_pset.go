package wire

// Pset family: process sets (DESIGN §4). Requests go from clients (through
// their daemon) or tools to the master; the master pushes every change to
// all daemons (pset.push) before answering, and daemons answer get/list/
// query from their copy.

const (
	KindPsetOp     = "pset.op"     // →master: PsetOpReq → PsetOpReply
	KindPsetGet    = "pset.get"    // →daemon/master: PsetGetReq → PsetInfo
	KindPsetList   = "pset.list"   // →daemon/master: PsetListReq → PsetList
	KindPsetQuery  = "pset.query"  // →daemon/master: PsetQueryReq → PsetList
	KindPsetDelete = "pset.delete" // →master: PsetDeleteReq → empty
	KindPsetPush   = "pset.push"   // master→daemon: PsetPush → empty
)

// Set operations (PsetOpReq.Op).
const (
	OpUnion        = "union"        // members of P1 or P2
	OpDifference   = "difference"   // members of P1 not in P2
	OpIntersection = "intersection" // members of both
	OpNull         = "null"         // no set operation: only update the attributes of P1
	OpSplit        = "split"        // split P1 into new sets, in the way Mode says
)

// Split modes (PsetOpReq.Mode, with Op OpSplit).
const (
	SplitParts = "parts" // K near-equal parts in rank order, larger parts first
	SplitRanks = "ranks" // the rank lists in Lists, which must partition P1
	SplitNode  = "node"  // one part per node that holds members of P1, in node order
)

// PsetRef names one exact membership: a set name and a version.
type PsetRef struct {
	Name    string `msgpack:"n,omitempty"`   // set name (URI)
	Version uint32 `msgpack:"ver,omitempty"` // version (0 at creation)
}

// PsetInfo describes one version of a process set.
type PsetInfo struct {
	Name    string            `msgpack:"n,omitempty"`   // set name, e.g. mpi://app/<app>/<name>
	Job     string            `msgpack:"j,omitempty"`   // job namespace the ranks belong to
	Version uint32            `msgpack:"ver,omitempty"` // mpi_ps_version: bumped whenever members change
	Epoch   uint32            `msgpack:"ep,omitempty"`  // mpi_ps_epoch
	Active  bool              `msgpack:"act,omitempty"` // mpi_ps_active
	Size    uint32            `msgpack:"sz,omitempty"`  // mpi_size: number of members
	Hints   map[string]string `msgpack:"h,omitempty"`   // mpi_ps_sched_* hints, keys without the prefix
	Members RankRanges        `msgpack:"m,omitempty"`   // member ranks (omitted when not asked for)
	Time    int64             `msgpack:"t,omitempty"`   // unix ns when this version was defined
}

// PsetOpReq applies Op to P1 and P2 and stores the result as Target (a
// Target equal to P1 makes a new version of P1; none: the runtime names
// the result in mpi://app/<app>). When P2 is a delta set the
// same operation is applied to every set recursively affected by it.
//
// Op "split" splits P1 (P2 unused) into new sets as Mode says and answers
// with PsetOpReply.Parts. The parts are named by Names (one per part), else
// Target/<i>, else mpi://app/<app>/split-<n>/<i>; Active and Hints apply
// to every part.
type PsetOpReq struct {
	Job    string            `msgpack:"j,omitempty"`   // job namespace
	Op     string            `msgpack:"op,omitempty"`  // one of the Op* values
	P1     string            `msgpack:"p1,omitempty"`  // first operand
	P2     string            `msgpack:"p2,omitempty"`  // second operand (unused for null)
	Target string            `msgpack:"t,omitempty"`   // result name (P1 again: a new version of P1); empty = a generated name
	Active *bool             `msgpack:"act,omitempty"` // set mpi_ps_active of the result; absent or nil = unchanged
	Hints  map[string]string `msgpack:"h,omitempty"`   // hints to set on the result ("" value deletes)
	Rank   uint32            `msgpack:"r,omitempty"`   // requesting rank (for the record)
	Mode   string            `msgpack:"sm,omitempty"`  // split: one of the Split* values
	K      uint32            `msgpack:"k,omitempty"`   // split by parts: the number of parts
	Lists  []RankRanges      `msgpack:"rl,omitempty"`  // split by ranks: the members of each part
	Names  []string          `msgpack:"ns,omitempty"`  // split: names of the parts, one per part (none: generated)
}

// PsetOpReply is the result of a set operation.
type PsetOpReply struct {
	Name    string     `msgpack:"n,omitempty"`   // result set name
	Version uint32     `msgpack:"ver,omitempty"` // its new version
	Size    uint32     `msgpack:"sz,omitempty"`  // its size
	Members RankRanges `msgpack:"m,omitempty"`   // its members
	Updated []PsetRef  `msgpack:"upd,omitempty"` // other sets updated recursively, with their new versions
	// Split only (the fields above stay empty): the parts in part order,
	// with members, and for a split by node the node of each part.
	Parts []PsetInfo `msgpack:"parts,omitempty"` // split: the new sets
	Nodes []string   `msgpack:"pn,omitempty"`    // split by node: node name of each part
}

// PsetGetReq asks for one set, at a version or the latest.
type PsetGetReq struct {
	Job     string  `msgpack:"j,omitempty"`   // job namespace
	Name    string  `msgpack:"n,omitempty"`   // set name
	Version *uint32 `msgpack:"ver,omitempty"` // exact version (0 is version 0); absent or nil = the latest
	Members bool    `msgpack:"m,omitempty"`   // include the member list
}

// PsetListReq lists the latest version of the sets of a job.
type PsetListReq struct {
	Job     string `msgpack:"j,omitempty"`   // job namespace
	Prefix  string `msgpack:"pfx,omitempty"` // only names starting with this
	Members bool   `msgpack:"m,omitempty"`   // include member lists
	Deleted bool   `msgpack:"del,omitempty"` // include deleted sets (a daemon's answer; the master keeps none, see PsetDeleteReq)
}

// PsetQueryReq asks for several exact versions at once, or for the sets
// that contain a rank.
type PsetQueryReq struct {
	Job     string    `msgpack:"j,omitempty"`    // job namespace
	Refs    []PsetRef `msgpack:"refs,omitempty"` // name@version pairs wanted
	Rank    *uint32   `msgpack:"r,omitempty"`    // also the latest sets that contain this rank; absent or nil = no such sets
	Members bool      `msgpack:"m,omitempty"`    // include member lists
}

// PsetList is a list of sets.
type PsetList struct {
	Sets []PsetInfo `msgpack:"s,omitempty"` // sets, sorted by name then version
}

// PsetDeleteReq deletes a set. The daemons keep the versions they hold:
// a client still gets them from pset.get with an explicit version,
// pset.query by version and pset.list with del. The master forgets the
// set: a tool gets not_found for it, at any version.
type PsetDeleteReq struct {
	Job  string `msgpack:"j,omitempty"` // job namespace
	Name string `msgpack:"n,omitempty"` // set name
}

// PsetPush carries set changes from the master to a daemon.
type PsetPush struct {
	Seq     uint64     `msgpack:"seq,omitempty"`  // master's change counter, increasing
	Job     string     `msgpack:"j,omitempty"`    // job namespace
	Defined []PsetInfo `msgpack:"def,omitempty"`  // new sets and new versions, with members
	Deleted []string   `msgpack:"del,omitempty"`  // names of deleted sets (a delta set: its change record goes too)
	Keep    uint32     `msgpack:"keep,omitempty"` // versions of each set of the job to keep, older ones are dropped (0 = all)
}
