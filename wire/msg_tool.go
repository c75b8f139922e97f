package wire

// Tool family: whole-DVM queries and control (dyntop, dynrun dvm).

const (
	KindDVMState  = "dvm.state"  // tool→master: DVMStateReq → DVMState
	KindDVMStop   = "dvm.stop"   // tool→master: DVMStopReq → empty
	KindDVMGrow   = "dvm.grow"   // tool→master: DVMGrowReq → DVMGrowReply
	KindDVMShrink = "dvm.shrink" // tool→master: DVMShrinkReq → DVMShrinkReply
)

// DVMStateReq asks for a snapshot of the DVM.
type DVMStateReq struct {
	Ended bool `msgpack:"ended,omitempty"` // include ended jobs and finished changes
}

// DVMState is a snapshot of the DVM.
type DVMState struct {
	ID      string     `msgpack:"id,omitempty"`    // DVM id
	PID     int        `msgpack:"pid,omitempty"`   // master pid
	Started int64      `msgpack:"t0,omitempty"`    // unix ns when the master started
	Uptime  int64      `msgpack:"up,omitempty"`    // ns since start, by the master's clock
	Version string     `msgpack:"ver,omitempty"`   // dynrt build version
	Nodes   []NodeInfo `msgpack:"nodes,omitempty"` // nodes in index order, with slots used (nodes that left are not listed)
	Jobs    []JobInfo  `msgpack:"jobs,omitempty"`  // jobs, oldest first
	RCs     []RC       `msgpack:"rcs,omitempty"`   // resource changes, oldest first
	Slots   []SlotUse  `msgpack:"slots,omitempty"` // used slots only, by global slot index
	// Launcher is how the DVM starts daemons: "local", "ssh", "join" (a
	// grow of a join DVM waits for daemons started by hand).
	Launcher string `msgpack:"lau,omitempty"`
	// NodeLog holds the latest node.added, node.leaving and node.removed
	// events (at most 16, oldest first): how the DVM got its nodes.
	NodeLog []Event `msgpack:"nlog,omitempty"`
	// LauncherInfo says, for people, how the launcher was chosen and on
	// what, e.g. "slurm: job 12, 3 nodes, slots from SLURM_TASKS_PER_NODE
	// (chosen because SLURM_JOB_ID is set)"; empty when there is nothing
	// to add to Launcher.
	LauncherInfo string `msgpack:"linfo,omitempty"`
	// Tree is the tree of daemons pushes go down (dvm start
	// --tree-radix); nil = none, the master sends to each daemon.
	Tree *TreeState `msgpack:"tree,omitempty"`
}

// TreeState describes the DVM's tree of daemons and its use since the start.
type TreeState struct {
	Radix   uint32 `msgpack:"r,omitempty"`  // its radix
	Relays  uint64 `msgpack:"n,omitempty"`  // relays the master sent to the head of a part
	Resends uint64 `msgpack:"rs,omitempty"` // relays it sent again directly to a daemon the tree did not reach
	Fences  uint64 `msgpack:"fd,omitempty"` // fence instances whose collected data went down the tree (kv.fenced)
	Up      uint64 `msgpack:"up,omitempty"` // fence requests gathered up the tree (FenceReq.Parts) the master served
	UpParts uint64 `msgpack:"ud,omitempty"` // the daemons' entries they carried
	Events  uint64 `msgpack:"ev,omitempty"` // bus events sent down the tree to the daemons' subscribers
}

// SlotUse says which process holds one slot. Slots are numbered globally
// in node order, so a tool can place a process at its exact cell; only
// used slots are listed to keep the snapshot small.
type SlotUse struct {
	Slot int32  `msgpack:"s"`           // global slot index; -1 = oversubscribed, no slot of its own
	Node uint32 `msgpack:"n,omitempty"` // node index
	Job  string `msgpack:"j,omitempty"` // job namespace
	Rank uint32 `msgpack:"r,omitempty"` // rank within the job
}

// DVMStopReq stops the DVM: every job is killed, every daemon stopped.
type DVMStopReq struct {
	GraceMS int64 `msgpack:"grace,omitempty"` // ms before SIGKILL of remaining processes
}

// DVMGrowReq adds nodes to a running DVM. Either Hosts names them (ssh,
// join: one daemon per host) or Nodes asks for that many virtual nodes on
// the master's host (local launcher; the master names them). The reply
// comes once every new daemon has registered; if one cannot start or does
// not register within TimeoutMS, every node of the request is removed
// again and the error names the ones that failed.
type DVMGrowReq struct {
	Hosts     []GrowHost `msgpack:"h,omitempty"`   // nodes to add, one per host
	Nodes     uint32     `msgpack:"n,omitempty"`   // local launcher: virtual nodes to add
	Slots     uint32     `msgpack:"s,omitempty"`   // with Nodes: slots of each (0 = those of node 0)
	TimeoutMS int64      `msgpack:"tmo,omitempty"` // bound on the wait for the daemons (0 = the master's register timeout)
}

// GrowHost is one node of a grow: its name (unique among the DVM's nodes)
// and slots.
type GrowHost struct {
	Name  string `msgpack:"n,omitempty"` // node name; also the host its daemon runs on (ssh)
	Slots uint32 `msgpack:"s,omitempty"` // slots (at least 1)
}

// DVMGrowReply lists the nodes added, usable from now on.
type DVMGrowReply struct {
	Nodes []NodeInfo `msgpack:"nodes,omitempty"` // the new nodes, in index order
}

// DVMShrinkReq takes a node out of a running DVM: its daemon is stopped
// and its slots are gone for good (node indices do not change). A node
// where processes of a job run is refused unless Drain: each such job is
// then asked to give those processes up by a SUB resource change, and the
// node leaves once all of them are gone.
type DVMShrinkReq struct {
	Node      string `msgpack:"n,omitempty"`     // node name
	Drain     bool   `msgpack:"drain,omitempty"` // move the node's processes out by SUB first
	TimeoutMS int64  `msgpack:"tmo,omitempty"`   // Drain: ms each SUB has until it is FINALIZED (0 = the master's confirm timeout)
}

// DVMShrinkReply describes the node that left and the changes that
// drained it.
type DVMShrinkReply struct {
	Node    NodeInfo `msgpack:"node,omitempty"` // the node as it was before it left
	Drained []RC     `msgpack:"rcs,omitempty"`  // the SUB of each job that ran there (Drain)
}
