package wire

// Tool family: whole-DVM queries and control (dyntop, dynrun dvm).

const (
	KindDVMState = "dvm.state" // tool→master: DVMStateReq → DVMState
	KindDVMStop  = "dvm.stop"  // tool→master: DVMStopReq → empty
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
	Nodes   []NodeInfo `msgpack:"nodes,omitempty"` // nodes in index order, with slots used
	Jobs    []JobInfo  `msgpack:"jobs,omitempty"`  // jobs, oldest first
	RCs     []RC       `msgpack:"rcs,omitempty"`   // resource changes, oldest first
	Slots   []SlotUse  `msgpack:"slots,omitempty"` // used slots only, by global slot index
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
