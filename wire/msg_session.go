package wire

// Session family: an application process (role "client", lib/session) and
// its node daemon. The daemon answers from its local data or relays to the
// master.

const (
	KindSessionInit     = "session.init"    // client→daemon: SessionInitReq → SessionInfo
	KindSessionFinalize = "session.fin"     // client→daemon: SessionFinReq → empty
	KindSessionAbort    = "session.abort"   // client→daemon→master: AbortReq → empty
	KindGroupConstruct  = "group.construct" // client→daemon→master: GroupReq → GroupReply
	KindGroupDestruct   = "group.destruct"  // client→daemon→master: GroupReq → empty
)

// SessionInitReq opens a session. Job and Rank come from the environment
// the daemon set at launch; the daemon checks them against the caller's
// pid.
type SessionInitReq struct {
	Job  string `msgpack:"j,omitempty"`   // job namespace
	Rank uint32 `msgpack:"r,omitempty"`   // own rank
	PID  int    `msgpack:"pid,omitempty"` // own pid
	// Latest asks for the job as the daemon's data shows it, after a
	// change in flight (Session.JobInfo). Without it, a process is told
	// the job it belongs to until the change is FINALIZED (JobData.Pending).
	Latest bool `msgpack:"latest,omitempty"`
}

// SessionInfo is the identity of a process and the job facts it needs at
// start.
type SessionInfo struct {
	Job        string     `msgpack:"j,omitempty"`     // job namespace
	App        string     `msgpack:"app,omitempty"`   // application name (pset domain mpi://app/<app>)
	Rank       uint32     `msgpack:"r,omitempty"`     // own rank
	UID        uint64     `msgpack:"uid,omitempty"`   // 64-bit process id (job number << 32 | rank)
	Size       uint32     `msgpack:"sz,omitempty"`    // current number of processes in the job
	Node       string     `msgpack:"node,omitempty"`  // node the process runs on
	LocalRank  uint32     `msgpack:"lr,omitempty"`    // index among the job's processes on this node
	LocalPeers RankRanges `msgpack:"lp,omitempty"`    // ranks of the job on this node (self included)
	DVM        string     `msgpack:"dvm,omitempty"`   // DVM id
	Delta      string     `msgpack:"delta,omitempty"` // delta set of the resource change that launched this process, if any
}

// SessionFinReq closes a session cleanly.
type SessionFinReq struct {
	Job  string `msgpack:"j,omitempty"` // job namespace
	Rank uint32 `msgpack:"r,omitempty"` // own rank
}

// AbortReq asks the runtime to kill processes (the whole job when Procs is
// empty) and record Status as the job's exit status.
type AbortReq struct {
	Job    string       `msgpack:"j,omitempty"`      // caller's job
	Rank   uint32       `msgpack:"r,omitempty"`      // caller's rank
	Status int          `msgpack:"status,omitempty"` // exit status to report
	Msg    string       `msgpack:"msg,omitempty"`    // reason shown to the user
	Procs  []ProcRanges `msgpack:"p,omitempty"`      // processes to abort; empty = the caller's whole job
}

// GroupReq constructs or destructs a group. Every member calls construct
// with the same ID and member list; all get the same context id once the
// last one has arrived.
type GroupReq struct {
	ID        string       `msgpack:"id,omitempty"`  // group name, unique among live groups of the job
	Job       string       `msgpack:"j,omitempty"`   // caller's job
	Rank      uint32       `msgpack:"r,omitempty"`   // caller's rank
	Procs     []ProcRanges `msgpack:"p,omitempty"`   // members
	TimeoutMS int64        `msgpack:"tmo,omitempty"` // give up after this many ms; 0 = no limit
}

// GroupReply carries the context id of a constructed group.
type GroupReply struct {
	CID uint64 `msgpack:"cid,omitempty"` // DVM-wide unique 64-bit context id
}
