package wire

// KV family: the put/commit/get store and fences (DESIGN §6). A client puts
// and commits through its daemon; a get for a remote rank is fetched on
// demand from the owner's daemon (kv.fetch). Fences run daemon-to-master:
// each daemon contributes once for its local participants.

const (
	KindKVPut    = "kv.put"    // client→daemon: KVPutReq → empty
	KindKVCommit = "kv.commit" // client→daemon: KVCommitReq → empty
	KindKVGet    = "kv.get"    // client→daemon: KVGetReq → KVGetReply
	KindKVFetch  = "kv.fetch"  // daemon→master/daemon: KVFetchReq → KVFetchReply
	KindFence    = "kv.fence"  // client→daemon→master: FenceReq → FenceReply
	KindFenced   = "kv.fenced" // master→daemon (also down the tree of daemons): FenceData → empty
)

// KVPutReq stores one value for the caller, visible to others after commit.
type KVPutReq struct {
	Job   string `msgpack:"j,omitempty"` // caller's job
	Rank  uint32 `msgpack:"r,omitempty"` // caller's rank (the owner)
	Key   string `msgpack:"k,omitempty"` // key
	Value []byte `msgpack:"v,omitempty"` // value
}

// KVCommitReq publishes the caller's staged values, plus Data.
type KVCommitReq struct {
	Job  string `msgpack:"j,omitempty"` // caller's job
	Rank uint32 `msgpack:"r,omitempty"` // caller's rank
	Data []KV   `msgpack:"d,omitempty"` // entries put client-side and sent in one go
}

// KVGetReq reads a value committed by (Job, Rank). With Refresh the
// daemon fetches a remote owner's data again instead of answering from its
// cache (PMIx's PMIX_GET_REFRESH_CACHE).
//
// A get after a fence sees what the fence's participants committed before
// they entered it: the fence drops the daemon's cached copies of their
// data. Put, commit, fence, get is therefore an exchange among the
// participants.
type KVGetReq struct {
	Job       string `msgpack:"j,omitempty"`   // owner's job; empty = the caller's
	Rank      uint32 `msgpack:"r,omitempty"`   // owner's rank
	Key       string `msgpack:"k,omitempty"`   // key
	Wait      bool   `msgpack:"w,omitempty"`   // wait for the key to be committed instead of ErrNotFound
	TimeoutMS int64  `msgpack:"tmo,omitempty"` // with Wait: give up after this many ms (0 = no limit)
	Refresh   bool   `msgpack:"rf,omitempty"`  // bypass the daemon's cache of remote data
}

// KVGetReply carries the value.
type KVGetReply struct {
	Value []byte `msgpack:"v,omitempty"` // value
}

// KVFetchReq asks for everything some processes have committed. With
// Wait, the owner's daemon answers once the (single) owner has committed
// Key, so that a get with wait for a remote process needs no polling.
type KVFetchReq struct {
	Procs     []ProcRanges `msgpack:"p,omitempty"`   // owners
	Key       string       `msgpack:"k,omitempty"`   // key to wait for
	Wait      bool         `msgpack:"w,omitempty"`   // wait until Key is committed
	TimeoutMS int64        `msgpack:"tmo,omitempty"` // with Wait: give up after this many ms (0 = no limit)
}

// KVFetchReply carries committed data per owner.
type KVFetchReply struct {
	Data []ProcKV `msgpack:"d,omitempty"` // one entry per owner that has data
}

// FenceReq enters a fence over Procs. The fence completes when every
// participant has entered; with Collect, the reply carries everything the
// participants committed.
//
// Participants: an entry of Procs without a job means the caller's job,
// an entry without ranks every live process of its job, and an empty Procs
// (absent, nil or []) every live process of the caller's job. "Live" is
// judged when the fence instance begins, i.e. when the first entry reaches
// the master: processes launched and not ended, and not leaving (removed
// by a SUB past its first accept, or replaced by a FINALIZED REPLACE); a
// process that ended before is not waited for, nor one that starts
// leaving while the instance is open. Entries with the same ID and the same
// participants (however written) belong to one instance; once it has
// completed, the next such entry begins a new one. A process named
// explicitly that has ended is refused (aborted), a participant that ends
// before entering fails the fence for everyone (aborted), and a caller
// that is not a participant gets invalid.
type FenceReq struct {
	ID        string       `msgpack:"id,omitempty"`  // fence name; the participants' entries carry the same (empty is a name like any other)
	Procs     []ProcRanges `msgpack:"p,omitempty"`   // participants; empty = every live process of the caller's job that is not leaving it
	Collect   bool         `msgpack:"c,omitempty"`   // gather committed data
	TimeoutMS int64        `msgpack:"tmo,omitempty"` // give up after this many ms (0 = no limit)
	Data      []ProcKV     `msgpack:"d,omitempty"`   // daemon→master: the local participants' data
	Local     RankRanges   `msgpack:"loc,omitempty"` // daemon→master: the participants this entry stands for
	Job       string       `msgpack:"j,omitempty"`   // daemon→master: job of the ranks in Local (and of Procs entries without a job)
	Stored    bool         `msgpack:"st,omitempty"`  // daemon→master, with Collect: the daemon keeps the data itself, so it may come down the tree (kv.fenced) and the reply say Stored
	// Parts, daemon→daemon and daemon→master: the entries of several
	// nodes gathered up the tree of daemons, each entered as a daemon's
	// own entry would be (Local, Data, Collect, Stored and TimeoutMS of
	// the request itself are then unused). The parts are of processes of
	// Job, entering the fence ID over Procs.
	Parts []FencePart `msgpack:"pt,omitempty"`
}

// FencePart is one node's entry in a request gathered up the tree of
// daemons (FenceReq.Parts). The reply answers each part in order
// (FenceReply.Parts) once all of them are answered: the parts of one
// request belong to one instance, which completes or fails as a whole.
// At the earliest part's deadline every part not yet decided is taken
// back: its own deadline passed, it gets timeout; else Again.
type FencePart struct {
	Node      string     `msgpack:"n"`             // the entering daemon's node
	Local     RankRanges `msgpack:"loc"`           // the participants it stands for
	Data      []ProcKV   `msgpack:"d,omitempty"`   // with Collect: their data
	Collect   bool       `msgpack:"c,omitempty"`   // gather committed data
	Stored    bool       `msgpack:"st,omitempty"`  // as FenceReq.Stored
	TimeoutMS int64      `msgpack:"tmo,omitempty"` // give up after this many ms (0 = no limit)
	Extra     bool       `msgpack:"x,omitempty"`   // not the node's whole entry (its scout, or a late process): a daemon gathering parts does not count it as the node's
}

// FencePartReply answers one part of a gathered request.
type FencePartReply struct {
	Err    *Error   `msgpack:"e,omitempty"` // the part failed
	Again  bool     `msgpack:"a,omitempty"` // taken back at another part's deadline, not entered: send it again
	Data   []ProcKV `msgpack:"d,omitempty"` // as FenceReply.Data
	Stored bool     `msgpack:"s,omitempty"` // as FenceReply.Stored
}

// FenceReply completes a fence.
type FenceReply struct {
	Data   []ProcKV         `msgpack:"d,omitempty"`  // with Collect: the participants' data
	Stored bool             `msgpack:"s,omitempty"`  // master→daemon, with Collect: the data is not here; the daemon has applied it from kv.fenced already
	Parts  []FencePartReply `msgpack:"pt,omitempty"` // a gathered request (FenceReq.Parts): one answer per part, in order
}

// FenceData is a completed fence instance's collected data, sent once to
// a daemon that entered it and keeps the data itself (FenceReq.Stored)
// before its entries are answered with Stored: down the tree of daemons
// when there is one (the master then writes it a few times instead of once
// per daemon), else directly to each daemon with several entries (which
// would otherwise get it once per entry). Inst numbers the master's
// instances, so a daemon applies each once (a late copy after the
// master's resend is ignored).
type FenceData struct {
	Inst  uint64       `msgpack:"i"`           // the master's instance number
	Job   string       `msgpack:"j,omitempty"` // as the entries' FenceReq.Job
	Procs []ProcRanges `msgpack:"p,omitempty"` // as the entries' FenceReq.Procs
	Data  []ProcKV     `msgpack:"d,omitempty"` // the participants' data
}
