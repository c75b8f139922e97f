package wire

// Node family: the master and its daemons. The master pushes job data, sets
// and changes (pset.push, rc.push) and asks for launches and kills; daemons
// report process starts and exits and forward output as events (id 0), so
// that they arrive in order.

const (
	KindNodeRegister = "node.register" // daemon→master: NodeRegister → NodeRegisterReply
	KindNodeJobData  = "node.jobdata"  // master→daemon: JobData (with its sets, if any) → empty
	KindNodeLaunch   = "node.launch"   // master→daemon: LaunchReq (with the job data and sets) → LaunchReply
	KindNodeKill     = "node.kill"     // master→daemon: KillReq → KillReply
	KindNodeStop     = "node.stop"     // master→daemon: NodeStopReq → empty (daemon kills its processes and exits)
	KindProcStarted  = "proc.started"  // daemon→master, event: ProcStarted
	KindProcExited   = "proc.exited"   // daemon→master, event: ProcExited
	KindProcOutput   = "proc.output"   // daemon→master and master→launcher, event: OutputLine
	KindPing         = "ping"          // either way: Ping → Ping (echoed); master→daemon: the heartbeat
)

// Output streams.
const (
	StreamStdout = 1 // standard output
	StreamStderr = 2 // standard error
)

// NodeRegister is a daemon's first request to the master.
type NodeRegister struct {
	Name    string `msgpack:"n,omitempty"`    // node name (unique in the DVM)
	Host    string `msgpack:"h,omitempty"`    // host name
	Slots   uint32 `msgpack:"s,omitempty"`    // process slots
	PID     int    `msgpack:"pid,omitempty"`  // daemon pid
	Addr    string `msgpack:"a,omitempty"`    // the daemon's client socket (unix path or host:port)
	PMIx    bool   `msgpack:"pmix,omitempty"` // the daemon can host a PMIx server (built with -tags pmix): it serves Open MPI jobs
	RelayID uint64 `msgpack:"rid,omitempty"`  // a random number of this daemon's run, so that a relay meant for a daemon of the node that has since been replaced is not applied
	Relay   string `msgpack:"rl,omitempty"`   // where other daemons reach it with node.relay (unix:<path> or tcp:<host:port>); "" = it takes relays from the master only
}

// NodeRegisterReply admits a daemon. From then on the master pings the
// daemon every HeartbeatMS; a daemon that hears no ping for DeadMS takes
// the master for lost: it kills its processes and exits.
type NodeRegisterReply struct {
	Index       uint32 `msgpack:"i,omitempty"`    // node index: the order of slots across nodes
	DVM         string `msgpack:"dvm,omitempty"`  // DVM id
	HeartbeatMS int64  `msgpack:"hb,omitempty"`   // interval of the master's pings (0 = none: no watchdog)
	DeadMS      int64  `msgpack:"dead,omitempty"` // silence after which the daemon gives the master up (0 = never)
	Net         string `msgpack:"net,omitempty"`  // the DVM's address choice (dvm start --net): where the node's address for peers on other hosts comes from; "" = the source address of the daemon's TCP connection to the master
}

// NodeInfo describes a node (tool queries).
type NodeInfo struct {
	Name  string `msgpack:"n,omitempty"`   // node name
	Index uint32 `msgpack:"i,omitempty"`   // node index
	Host  string `msgpack:"h,omitempty"`   // host name
	Slots uint32 `msgpack:"s,omitempty"`   // slots
	Used  uint32 `msgpack:"u,omitempty"`   // slots in use
	PID   int    `msgpack:"pid,omitempty"` // daemon pid
	Addr  string `msgpack:"a,omitempty"`   // daemon client socket
	State string `msgpack:"st,omitempty"`  // "up", "suspect", "down", "starting" or "leaving"
}

// Node states. A node goes up → suspect when its daemon misses a
// heartbeat, back to up when it answers again, and down when it misses
// the configured number in a row or its connection closes. Placement
// skips suspect and down nodes.
const (
	NodeUp       = "up"       // registered, connected and answering heartbeats
	NodeSuspect  = "suspect"  // connected, but the last heartbeat is unanswered
	NodeDown     = "down"     // connection lost, or declared dead by the heartbeat
	NodeStarting = "starting" // added by dvm.grow; its daemon is not registered yet (or the grow's other nodes are not)
	NodeLeaving  = "leaving"  // dvm.shrink takes it out: its processes are being moved out, then its daemon stopped
)

// JobData is the master's current picture of a job, pushed to every daemon
// before anything that depends on it (launch, RC announce). As the body of
// node.jobdata it may carry the job's sets too, so that a daemon running
// none of the job's ranks learns the job and its sets in one message.
type JobData struct {
	Gen       uint64      `msgpack:"gen,omitempty"`  // generation, increasing with each change of the job
	ID        uint32      `msgpack:"id,omitempty"`   // job number
	Job       string      `msgpack:"j,omitempty"`    // job namespace
	App       string      `msgpack:"app,omitempty"`  // application name
	Size      uint32      `msgpack:"sz,omitempty"`   // live processes
	NextRank  uint32      `msgpack:"next,omitempty"` // next rank to hand out
	Placement Placements  `msgpack:"pl,omitempty"`   // node of every live rank
	Gone      bool        `msgpack:"gone,omitempty"` // the job has ended: drop its data
	Psets     *PsetPush   `msgpack:"ps,omitempty"`   // node.jobdata only: sets of the job to define with it (nil = none)
	PMIx      []PMIxSpace `msgpack:"px,omitempty"`   // PMIx job: the namespaces of the ranks its ADDs started (ranks not listed are in the namespace Job)
	// Delta: Placement lists only the nodes whose ranks changed since
	// generation Base (an entry without ranks: none left there), to be
	// applied to the data of generation Base, which the master sent this
	// daemon before. A resource change then costs a daemon what it
	// changed, not the whole job (docs/scale.md).
	Delta bool   `msgpack:"dl,omitempty"`
	Base  uint64 `msgpack:"base,omitempty"` // with Delta: the generation it applies to
	// Pending is the delta set of a resource change in flight (not yet
	// FINALIZED or ABORTED), whose result Placement and Size already
	// show. Until it is FINALIZED, a process that is not one of Adding is
	// told the job as it is (SessionInfo): a process of the launch that
	// starts while a SUB of it is in flight still counts itself.
	Pending string     `msgpack:"pend,omitempty"`
	Adding  RankRanges `msgpack:"add,omitempty"` // with Pending: the ranks the change starts (in Placement)
	Leaving RankRanges `msgpack:"lv,omitempty"`  // with Pending: the ranks it removes, still running (not in Placement)
}

// PMIxSpace is the PMIx namespace of the processes one ADD started in a
// running PMIx job (docs/mpi.md, "Resource changes through PMIx"): PMIx
// cannot grow a running namespace, so they are ranks of the same dynrt
// job in a namespace of their own, where PMIx rank i is dynrt rank
// Ranks' first + i.
type PMIxSpace struct {
	Nspace string     `msgpack:"ns,omitempty"` // PMIx namespace: the job's namespace, ".rc", the change's number
	Ranks  RankRanges `msgpack:"r,omitempty"`  // its dynrt ranks, one range
	Delta  string     `msgpack:"d,omitempty"`  // the change that started them
}

// LaunchReq asks a daemon to start processes of a job. Argv, Env and Wdir
// are the same for every rank. The job data and the job's initial sets
// ride along, so that one round trip both informs a daemon about a job and
// starts its ranks there.
type LaunchReq struct {
	Job    string      `msgpack:"j,omitempty"`    // job namespace
	App    string      `msgpack:"app,omitempty"`  // application name
	ID     uint32      `msgpack:"id,omitempty"`   // job number
	Ranks  RankRanges  `msgpack:"r,omitempty"`    // ranks to start on this node
	Argv   []string    `msgpack:"argv,omitempty"` // program and arguments
	Env    []string    `msgpack:"env,omitempty"`  // extra environment, "KEY=value"
	Wdir   string      `msgpack:"wd,omitempty"`   // working directory
	Output OutputFlags `msgpack:"out,omitempty"`  // output handling
	Delta  string      `msgpack:"rc,omitempty"`   // delta set when launched for a resource change
	Stdin  bool        `msgpack:"in,omitempty"`   // rank 0, if in Ranks, reads job.stdin data (else /dev/null)
	Data   *JobData    `msgpack:"jd,omitempty"`   // the job as the master sees it after this launch
	Psets  *PsetPush   `msgpack:"ps,omitempty"`   // the job's sets (WORLD and mpi://app/<app> at launch)
	PMI    *PMIJob     `msgpack:"pmi,omitempty"`  // the job's PMI service; nil = none
	// Mine: start the ranks Data places on the receiving daemon's node
	// (Ranks is empty). The same request then goes to every node of a
	// launch, encoded once, and can go down the tree of daemons.
	Mine bool `msgpack:"mine,omitempty"`
}

// LaunchReply lists what was forked; failures to start are reported as
// ProcExited events with Err set.
type LaunchReply struct {
	Started []ProcStarted `msgpack:"p,omitempty"` // processes forked
}

// ProcStarted reports a forked process.
type ProcStarted struct {
	Job  string `msgpack:"j,omitempty"`   // job namespace
	Rank uint32 `msgpack:"r,omitempty"`   // rank
	PID  int    `msgpack:"pid,omitempty"` // pid
	Node string `msgpack:"n,omitempty"`   // node
	Time int64  `msgpack:"t,omitempty"`   // unix ns
}

// ProcExited reports a process that ended, or could not start.
type ProcExited struct {
	Job    string `msgpack:"j,omitempty"`    // job namespace
	Rank   uint32 `msgpack:"r,omitempty"`    // rank
	PID    int    `msgpack:"pid,omitempty"`  // pid (0 if it never started)
	Node   string `msgpack:"n,omitempty"`    // node
	Code   int    `msgpack:"code,omitempty"` // exit code
	Signal int    `msgpack:"sig,omitempty"`  // terminating signal, 0 if it exited
	Forced bool   `msgpack:"frc,omitempty"`  // the runtime killed it (kill request, grace expired)
	Err    string `msgpack:"err,omitempty"`  // why it could not start
	Time   int64  `msgpack:"t,omitempty"`    // unix ns
}

// OutputLine is one line of a process's output, without its newline.
type OutputLine struct {
	Job    string `msgpack:"j,omitempty"` // job namespace
	Rank   uint32 `msgpack:"r,omitempty"` // rank
	Stream uint8  `msgpack:"s,omitempty"` // StreamStdout or StreamStderr
	Line   []byte `msgpack:"l,omitempty"` // bytes as written (not necessarily UTF-8)
	Time   int64  `msgpack:"t,omitempty"` // unix ns when read
}

// KillReq asks a daemon to end processes: Signal first, SIGKILL after the
// grace period for any still alive.
type KillReq struct {
	Job     string     `msgpack:"j,omitempty"`     // job namespace
	Ranks   RankRanges `msgpack:"r,omitempty"`     // ranks; empty = all of the job on this node
	Signal  int        `msgpack:"sig,omitempty"`   // first signal (0 = SIGTERM)
	GraceMS int64      `msgpack:"grace,omitempty"` // ms before SIGKILL (0 = runtime default)
	Only    bool       `msgpack:"only,omitempty"`  // send Signal alone: no SIGKILL after the grace, and the processes are not ended by the runtime (PMIx_Job_control's signal)
}

// KillReply says how many processes were signalled.
type KillReply struct {
	N uint32 `msgpack:"n,omitempty"` // processes signalled
}

// NodeStopReq shuts a daemon down.
type NodeStopReq struct {
	GraceMS int64 `msgpack:"grace,omitempty"` // ms before SIGKILL of remaining processes
}

// Ping checks liveness and measures round trips; the reply echoes it.
type Ping struct {
	Seq  uint64 `msgpack:"seq,omitempty"` // sender's counter
	Time int64  `msgpack:"t,omitempty"`   // sender's clock, unix ns
}
