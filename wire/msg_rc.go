package wire

// RC family: resource changes (DESIGN §5). Requests go to the master
// (from tools directly, from clients through their daemon); the master
// pushes every record update to the daemons (rc.push), which answer
// rc.query from their copy.

const (
	KindRCRequest = "rc.request" // →master: RCRequest → RC
	KindRCQuery   = "rc.query"   // →daemon/master: RCQueryReq → RCQueryReply
	KindRCList    = "rc.list"    // →master: RCListReq → RCList
	KindRCCancel  = "rc.cancel"  // →master: RCCancelReq → RC
	KindRCAccept  = "rc.accept"  // →daemon→master: RCAcceptReq → RCAcceptReply
	KindRCConfirm = "rc.confirm" // →daemon→master: RCConfirmReq → RCAcceptReply
	KindRCPush    = "rc.push"    // master→daemon: RC → empty
)

// RC types.
const (
	RCAdd     = "ADD"     // grow: new processes are started
	RCSub     = "SUB"     // shrink: processes are asked to leave
	RCReplace = "REPLACE" // replace: new processes start, as many named ones leave (RC.Out)
)

// RC statuses. NULL means "no change available" in a query.
const (
	RCNull      = "NULL"      // no change
	RCAnnounced = "ANNOUNCED" // delta set defined, processes told (and, for ADD, being launched)
	RCPending   = "PENDING"   // accepted by the application, waiting for confirmation or exits
	RCFinalized = "FINALIZED" // done
	RCAborted   = "ABORTED"   // given up and rolled back (see RC.Reason)
)

// Who asked for a change (RC.Requester).
const (
	ByTool  = "tool"  // an operator, through dynrc
	ByApp   = "app"   // the application itself
	BySched = "sched" // a scheduler
	// ByRuntime: the runtime itself, for a change it makes on its own
	// (a failure under the shrink policy; RC.Cause says why).
	ByRuntime = "runtime"
)

// Kinds of a change's cause (RCCause.Kind).
const (
	CauseFailure = "failure" // processes were lost (exit, signal, node down) under the shrink policy
)

// RCCause says why the runtime made a change on its own.
type RCCause struct {
	Kind  string     `msgpack:"k,omitempty"`   // CauseFailure
	Ranks RankRanges `msgpack:"r,omitempty"`   // the lost ranks (the delta of a failure SUB)
	Why   []string   `msgpack:"why,omitempty"` // one line per lost rank: rank, node and how it ended
}

// RCTimes holds the time of every step of a change, as unix ns (0 = not
// reached).
type RCTimes struct {
	Requested int64 `msgpack:"req,omitempty"` // request received
	Placed    int64 `msgpack:"plc,omitempty"` // slots and ranks chosen
	Defined   int64 `msgpack:"def,omitempty"` // delta set defined on all daemons
	JobData   int64 `msgpack:"jd,omitempty"`  // new job data pushed
	Announced int64 `msgpack:"ann,omitempty"` // status ANNOUNCED
	Launched  int64 `msgpack:"lau,omitempty"` // launch sent to the daemons (ADD)
	Started   int64 `msgpack:"sta,omitempty"` // every new process running (ADD)
	Accepted  int64 `msgpack:"acc,omitempty"` // accept published: status PENDING
	Confirmed int64 `msgpack:"cnf,omitempty"` // confirmation published (ADD)
	Finalized int64 `msgpack:"fin,omitempty"` // status FINALIZED
	Exited    int64 `msgpack:"ext,omitempty"` // every removed process gone (SUB)
	Aborted   int64 `msgpack:"abt,omitempty"` // status ABORTED
	Enforced  int64 `msgpack:"enf,omitempty"` // SUB: grace period over, remaining removed processes being killed
}

// RC is the record of one resource change, identified by its delta set.
type RC struct {
	Delta       string     `msgpack:"d,omitempty"`     // delta set name, mpi://rte/<app>/rc/<n>
	Job         string     `msgpack:"j,omitempty"`     // job namespace
	Type        string     `msgpack:"t,omitempty"`     // RCAdd, RCSub or RCReplace
	Status      string     `msgpack:"st,omitempty"`    // one of the RC* statuses
	Bound       []string   `msgpack:"b,omitempty"`     // bound set(s)
	Requester   string     `msgpack:"by,omitempty"`    // ByTool, ByApp, BySched or ByRuntime
	RequesterID string     `msgpack:"byid,omitempty"`  // e.g. "dynrc pid 4242" or "rank 3"
	N           uint32     `msgpack:"n,omitempty"`     // number of processes added or removed
	Ranks       RankRanges `msgpack:"r,omitempty"`     // the delta's ranks (ADD, REPLACE: the new processes; SUB: the leaving ones)
	Out         RankRanges `msgpack:"out,omitempty"`   // REPLACE: the processes replaced (they leave once FINALIZED)
	OutSet      string     `msgpack:"os,omitempty"`    // REPLACE: the set of those, mpi://rte/<app>/rc/<n>/out
	Placement   Placements `msgpack:"pl,omitempty"`    // where the delta's processes run
	NewSet      *PsetRef   `msgpack:"set,omitempty"`   // set published by the accept
	Accepts     uint32     `msgpack:"accn,omitempty"`  // bound sets that accepted (a SUB needs one accept per bound set)
	Reason      string     `msgpack:"why,omitempty"`   // abort reason
	Times       RCTimes    `msgpack:"ts,omitempty"`    // step timestamps
	Seq         uint64     `msgpack:"seq,omitempty"`   // update counter of this record (a daemon keeps the highest)
	BoundRefs   []PsetRef  `msgpack:"bv,omitempty"`    // bound sets with the version whose members accept
	Settled     bool       `msgpack:"done,omitempty"`  // final status reached and every process and slot of the change released
	Ended       []ProcInfo `msgpack:"end,omitempty"`   // the delta's processes that have ended, and how (rank, node, state, code, signal)
	Cause       *RCCause   `msgpack:"cause,omitempty"` // set when the runtime made the change on its own (Requester ByRuntime)
}

// RCRequest asks for a change. For SUB, Ranks may name the processes to
// remove; otherwise the runtime picks the highest-slot ones.
type RCRequest struct {
	Job         string            `msgpack:"j,omitempty"`     // job namespace
	Type        string            `msgpack:"t,omitempty"`     // RCAdd, RCSub or RCReplace
	N           uint32            `msgpack:"n,omitempty"`     // processes to add or remove
	Ranks       RankRanges        `msgpack:"r,omitempty"`     // SUB, REPLACE: exact ranks to remove or replace
	Bound       []string          `msgpack:"b,omitempty"`     // sets to bind the change to; empty = the runtime's choice
	Requester   string            `msgpack:"by,omitempty"`    // ByTool, ByApp or BySched
	RequesterID string            `msgpack:"byid,omitempty"`  // free-form
	Hints       map[string]string `msgpack:"h,omitempty"`     // scheduling hints for the delta set
	Wait        bool              `msgpack:"w,omitempty"`     // reply once settled: ABORTED, or FINALIZED with its processes started (ADD) or gone (SUB)
	TimeoutMS   int64             `msgpack:"tmo,omitempty"`   // with Wait: give up after this many ms
	Queue       bool              `msgpack:"q,omitempty"`     // wait in line behind the change in flight instead of failing with ErrBusy; without Wait the reply comes at once: status NULL, no delta yet
	GraceMS     int64             `msgpack:"grace,omitempty"` // SUB: ms the removed processes get to exit after FINALIZED (0 = runtime default)
	ConfirmMS   int64             `msgpack:"cto,omitempty"`   // ms from the announcement until the change must be FINALIZED, else ABORTED (0 = runtime default)
}

// RCQueryReq asks for the change a process should act on: by delta name,
// else the job's change in flight (or the latest one).
//
// Without Need the latest one may be settled already (FINALIZED or
// ABORTED) and comes back from every later query until the next change.
// With Need (a client's query without Delta) the daemon answers a change
// only while it still needs the caller, else NULL (the thesis's
// MPI_RC_NULL): the caller is a member of one of its bound sets at the
// version of the announcement, or one of its new processes, and the
// change is ANNOUNCED or PENDING and the caller has not started its
// rc.accept for every bound set holding it (a new process: its
// rc.confirm), or it is ABORTED and the daemon has not told the caller
// yet (an abort is reported once per rank, by a query or by an accept or
// confirm that failed with aborted). A FINALIZED change never needs the
// caller. An accept or confirm that fails other than by an abort gives
// the change back to the queries. The daemon remembers this per rank
// until the change or the job is forgotten.
type RCQueryReq struct {
	Job   string  `msgpack:"j,omitempty"`    // job namespace
	Delta string  `msgpack:"d,omitempty"`    // delta set name; empty = current
	Rank  *uint32 `msgpack:"r,omitempty"`    // tool: the rank to compute Incl for, absent or nil = none (Incl false); a client's daemon uses the caller's rank for its own job
	Bound string  `msgpack:"b,omitempty"`    // only a change bound to this set; mpi://SELF: one that concerns the caller; empty = mpi://app/<app>
	Need  bool    `msgpack:"need,omitempty"` // client→daemon, without d: only a change that still needs the caller, else no rc (NULL); ignored with d, for another job's changes, and by the master
}

// RCQueryReply answers an rc.query. RC is absent when there is no change
// (status NULL).
type RCQueryReply struct {
	RC   *RC  `msgpack:"rc,omitempty"`   // the change
	Incl bool `msgpack:"incl,omitempty"` // the asking rank is in the delta set
}

// RCListReq lists changes.
type RCListReq struct {
	Job string `msgpack:"j,omitempty"`   // job namespace; empty = all jobs
	All bool   `msgpack:"all,omitempty"` // include FINALIZED and ABORTED ones
}

// RCList is a list of changes, oldest first.
type RCList struct {
	RCs []RC `msgpack:"rcs,omitempty"` // records
}

// RCCancelReq aborts a change that is not FINALIZED.
type RCCancelReq struct {
	Delta  string `msgpack:"d,omitempty"`   // delta set name
	Reason string `msgpack:"why,omitempty"` // recorded in RC.Reason
	Job    string `msgpack:"j,omitempty"`   // daemon→master: the caller's job (a process cancels its own job's changes only)
	Rank   uint32 `msgpack:"r,omitempty"`   // daemon→master: the caller's rank (for the reason)
}

// RCAcceptReq is phase 3's accept (docs/wire.md, "Phase 3"). Member
// form: every member of the bound set, at the version of the
// announcement, sends one to its daemon; the daemon fences them, forwards
// the root's request to the master and gives every member the root's
// answer. With Alone the root alone sends it (the members synchronised
// themselves) and passes the answer on itself.
type RCAcceptReq struct {
	Delta     string  `msgpack:"d,omitempty"`     // delta set name
	Job       string  `msgpack:"j,omitempty"`     // caller's job (stamped by the daemon)
	Rank      uint32  `msgpack:"r,omitempty"`     // caller's rank (stamped by the daemon)
	Set       PsetRef `msgpack:"set,omitempty"`   // root only: the new set to continue with (ADD, REPLACE; optional for SUB)
	Block     bool    `msgpack:"blk,omitempty"`   // wait until FINALIZED (or ABORTED)
	TimeoutMS int64   `msgpack:"tmo,omitempty"`   // bounds the fence, the wait for the root's answer and, with Block, the wait for FINALIZED (0 = none)
	Bound     string  `msgpack:"b,omitempty"`     // bound set accepting (needed when the caller is in several)
	Call      uint32  `msgpack:"n,omitempty"`     // 0 = the daemon counts (1 for the first accept of this set, then one more per repeated call)
	Root      *uint32 `msgpack:"root,omitempty"`  // member speaking for the set; nil = the lowest rank of the set's version
	Alone     bool    `msgpack:"alone,omitempty"` // root-only form: no fence, nobody waits for the answer
}

// RCConfirmReq is sent by every new process of an ADD or REPLACE; its
// daemon waits for the accept, fences the new processes and forwards the
// lowest one's request to the master.
type RCConfirmReq struct {
	Delta     string  `msgpack:"d,omitempty"`   // delta set name
	Job       string  `msgpack:"j,omitempty"`   // caller's job (stamped by the daemon)
	Rank      uint32  `msgpack:"r,omitempty"`   // caller's rank (stamped by the daemon)
	Set       PsetRef `msgpack:"set,omitempty"` // daemon→master: the set named by the accept (clients leave it out)
	TimeoutMS int64   `msgpack:"tmo,omitempty"` // bounds the wait for the accept and the fence (0 = none)
}

// RCAcceptReply reports where a change stands after an accept or confirm.
type RCAcceptReply struct {
	Status    string  `msgpack:"st,omitempty"`   // PENDING until confirmed, then FINALIZED
	Terminate bool    `msgpack:"term,omitempty"` // for the caller: SUB: it is in the delta; REPLACE: FINALIZED and it is in RC.Out. It must finalize and exit
	Set       PsetRef `msgpack:"set,omitempty"`  // the set to continue with: the one the root of the caller's bound set named in its accept (ADD, REPLACE; a SUB's only if its root named one); for rc.confirm, the ADD's or REPLACE's new set
}
