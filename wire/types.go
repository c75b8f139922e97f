package wire

// Small value types shared by several message families.

// ProcID names one process: its job (namespace) and rank.
type ProcID struct {
	Job  string `msgpack:"j,omitempty"` // job namespace
	Rank uint32 `msgpack:"r,omitempty"` // rank in the job
}

// ProcRanges names a group of processes of one job compactly.
type ProcRanges struct {
	Job   string     `msgpack:"j,omitempty"` // job namespace
	Ranks RankRanges `msgpack:"r,omitempty"` // ranks in the job
}

// Placement lists the ranks of a job that run on one node.
type Placement struct {
	Node  string     `msgpack:"n,omitempty"` // node name
	Ranks RankRanges `msgpack:"r,omitempty"` // ranks on that node
}

// KV is one key with an opaque value.
type KV struct {
	Key   string `msgpack:"k,omitempty"` // key
	Value []byte `msgpack:"v,omitempty"` // value bytes
}

// ProcKV is the data one process has committed.
type ProcKV struct {
	Job  string `msgpack:"j,omitempty"` // job namespace
	Rank uint32 `msgpack:"r,omitempty"` // owner rank
	Data []KV   `msgpack:"d,omitempty"` // committed entries
}

// ProcUID is the 64-bit process id of (job number, rank): the job number in
// the high 32 bits, the rank in the low 32.
func ProcUID(jobNum, rank uint32) uint64 { return uint64(jobNum)<<32 | uint64(rank) }

// SplitProcUID is the inverse of ProcUID.
func SplitProcUID(uid uint64) (jobNum, rank uint32) { return uint32(uid >> 32), uint32(uid) }
