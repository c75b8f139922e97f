package wire

// Job family: launching and watching jobs (dynrun and tools to the master).

const (
	KindJobLaunch = "job.launch" // tool→master: JobLaunchReq → JobLaunchReply
	KindJobState  = "job.state"  // tool→master: JobStateReq → JobInfo
	KindJobList   = "job.list"   // tool→master: JobListReq → JobList
	KindJobKill   = "job.kill"   // tool→master: JobKillReq → empty
	KindJobWait   = "job.wait"   // tool→master: JobWaitReq → JobInfo (once the job and the jobs it spawned through PMI have ended)
	KindJobStdin  = "job.stdin"  // tool→master→daemon: JobStdin → empty (once the data is queued for the process)
)

// Job states.
const (
	JobStateLaunching = "launching" // processes being started
	JobStateRunning   = "running"   // every initial process started
	JobStateDone      = "done"      // every process exited with status 0
	JobStateFailed    = "failed"    // a process failed (and keep-going was off), or launch failed
	JobStateKilled    = "killed"    // killed on request, abort or timeout
)

// Process states.
const (
	ProcStateLaunching = "launching" // launch sent, not yet forked
	ProcStateRunning   = "running"   // forked and alive
	ProcStateExited    = "exited"    // ended by itself (see code and signal)
	ProcStateFailed    = "failed"    // could not be started
	ProcStateKilled    = "killed"    // ended by the runtime
)

// Map-by policies (JobLaunchReq.MapBy).
const (
	MapBySlot = "slot" // fill each node's slots before the next node (default)
	MapByNode = "node" // round-robin over nodes
)

// OutputFlags say how process output is handled.
type OutputFlags struct {
	Forward   bool   `msgpack:"fwd,omitempty"` // stream output lines to the launcher as events
	Tag       bool   `msgpack:"tag,omitempty"` // prefix lines with [job,rank]
	Timestamp bool   `msgpack:"ts,omitempty"`  // prefix lines with the time
	Merge     bool   `msgpack:"mrg,omitempty"` // send stderr as stdout
	Dir       string `msgpack:"dir,omitempty"` // also write one file per rank and stream under this directory
}

// JobLaunchReq starts a job (what dynrun sends).
type JobLaunchReq struct {
	Argv          []string    `msgpack:"argv,omitempty"` // program and arguments
	N             uint32      `msgpack:"n,omitempty"`    // number of processes
	MapBy         string      `msgpack:"map,omitempty"`  // MapBySlot (default) or MapByNode
	Oversubscribe bool        `msgpack:"os,omitempty"`   // allow more processes than slots
	Name          string      `msgpack:"name,omitempty"` // application name; empty = derived from argv[0]
	Env           []string    `msgpack:"env,omitempty"`  // extra environment, "KEY=value"
	Wdir          string      `msgpack:"wd,omitempty"`   // working directory; empty = the launcher's
	KeepGoing     bool        `msgpack:"kg,omitempty"`   // keep the job running when a process fails
	TimeoutMS     int64       `msgpack:"tmo,omitempty"`  // kill the job after this many ms (0 = no limit)
	Output        OutputFlags `msgpack:"out,omitempty"`  // output handling
	PMI           string      `msgpack:"pmi,omitempty"`  // PMI service for MPI programs: PMIAuto (default), PMIFD, PMIPort or PMINone
	PMINeed       string      `msgpack:"pmin,omitempty"` // PMIAuto: what the launcher found the program needs, a PMINeed* value ("" = unknown: a script, an interpreter)
	PMIWhy        string      `msgpack:"pmiw,omitempty"` // what PMINeed was found from, for messages (e.g. "links libmpi.so.40 (Open MPI)")
	Stdin         bool        `msgpack:"in,omitempty"`   // rank 0 reads what the launcher sends with job.stdin (else /dev/null)
	Universe      int32       `msgpack:"usz,omitempty"`  // MPI_UNIVERSE_SIZE: 0 = unset (Hydra's default), UniverseSlots = the DVM's slot count, else that number
	OnFailure     string      `msgpack:"onf,omitempty"`  // what a lost process does to the job: one of the OnFailure* values; empty = OnFailureAbort, or OnFailureContinue with KeepGoing
}

// Failure policies of a job (JobLaunchReq.OnFailure, dynrun --on-failure):
// what the loss of a process that was not removed by a change (a non-zero
// exit, a signal, its node lost) does to its job.
const (
	OnFailureAbort    = "abort"    // the job is torn down and fails (the default)
	OnFailureContinue = "continue" // the job goes on without the lost processes (--keep-going)
	OnFailureShrink   = "shrink"   // the loss becomes a SUB of the lost ranks (a resource change with Cause); the job goes on at the smaller size
	OnFailureReplace  = "replace"  // the loss becomes a REPLACE of the lost ranks by as many new processes (a resource change with Cause); the job keeps its size
)

// UniverseSlots in JobLaunchReq.Universe makes MPI_UNIVERSE_SIZE the DVM's
// slot count (Hydra's -usize SYSTEM).
const UniverseSlots = -1

// PMI service modes (JobLaunchReq.PMI): how MPI programs (MPICH's PMI-1
// and PMI-2 wire protocols) reach their node daemon.
const (
	PMIAuto = "auto" // the default: PMIPMIx for a program that links Open MPI, PMIBoth for one of unknown MPI, else PMIFD (PMINeed)
	PMIFD   = "fd"   // one socketpair per process, PMI_FD=3 with PMI_RANK and PMI_SIZE (like Hydra)
	PMIPort = "port" // TCP: PMI_PORT=host:port and PMI_ID
	PMINone = "none" // no PMI service, no PMI_* variables
	PMIPMIx = "pmix" // PMIx (Open MPI): the daemon's PMIx server (lib/pmix, a dynrun built with -tags pmix)
	// PMIBoth offers PMIFD and PMIx at once, for a program whose MPI
	// cannot be told from its file (a script, an interpreter): the one
	// the program speaks is used. PMIAuto picks it for those.
	PMIBoth = "fd+pmix"
)

// What a launcher found a program needs (JobLaunchReq.PMINeed, for
// PMIAuto): the master offers that service, or refuses a program that
// needs PMIx on daemons without it instead of starting singletons.
const (
	PMINeedPMIx = "pmix" // links Open MPI or libpmix: PMIx only
	PMINeedPMI  = "pmi"  // links MPICH or its ABI (libmpich, libmpi.so.12): PMI-1/PMI-2
	PMINeedNone = "none" // an ELF program that links no MPI library
	// PMINeedUnknown: a script, an interpreter or an unreadable file,
	// which may start any MPI.
	PMINeedUnknown = "unknown"
)

// JobLaunchReply identifies the new job.
type JobLaunchReply struct {
	ID        uint32     `msgpack:"id,omitempty"`  // job number (high half of process UIDs)
	Job       string     `msgpack:"j,omitempty"`   // job namespace, used by every other message
	App       string     `msgpack:"app,omitempty"` // application name
	Placement Placements `msgpack:"pl,omitempty"`  // where the ranks run
}

// ProcInfo describes one process of a job.
type ProcInfo struct {
	Rank    uint32 `msgpack:"r,omitempty"`    // rank
	Node    string `msgpack:"n,omitempty"`    // node
	PID     int    `msgpack:"pid,omitempty"`  // pid on that node
	State   string `msgpack:"st,omitempty"`   // one of the ProcState* values
	Code    int    `msgpack:"code,omitempty"` // exit code
	Signal  int    `msgpack:"sig,omitempty"`  // terminating signal
	Started int64  `msgpack:"t0,omitempty"`   // unix ns
	Ended   int64  `msgpack:"t1,omitempty"`   // unix ns
}

// Why a job ended (JobInfo.Reason).
const (
	JobEndNone    = ""        // every process ended by itself
	JobEndFailed  = "failed"  // aborted because a process failed (no keep-going)
	JobEndKill    = "kill"    // killed on request (job.kill)
	JobEndTimeout = "timeout" // its time limit passed
	JobEndStop    = "stop"    // the DVM was stopped
	JobEndLost    = "lost"    // its launcher's connection was lost
	JobEndAbort   = "abort"   // a process asked for the abort (session.abort)
	JobEndLaunch  = "launch"  // the launch itself failed
)

// How a job's first failed process failed (JobInfo.Failure).
const (
	FailNone   = ""       // no process failed
	FailExit   = "exit"   // it exited with a non-zero status
	FailSignal = "signal" // a signal ended it (or it was lost with its node)
	FailStart  = "start"  // it could not be started
)

// Exit codes the runtime gives a job (JobInfo.Code) besides its processes' own.
const (
	JobCodeTimeout = 124 // killed by its time limit, as with timeout(1)
)

// JobInfo describes a job. Reason and Msg are set in the reply of job.wait
// only.
type JobInfo struct {
	ID        uint32     `msgpack:"id,omitempty"`    // job number
	Job       string     `msgpack:"j,omitempty"`     // job namespace
	App       string     `msgpack:"app,omitempty"`   // application name
	State     string     `msgpack:"st,omitempty"`    // one of the JobState* values
	Argv      []string   `msgpack:"argv,omitempty"`  // program and arguments
	Size      uint32     `msgpack:"sz,omitempty"`    // processes currently alive
	NextRank  uint32     `msgpack:"next,omitempty"`  // next rank to hand out (ranks are never reused)
	Code      int        `msgpack:"code,omitempty"`  // job exit status once ended
	Started   int64      `msgpack:"t0,omitempty"`    // unix ns
	Ended     int64      `msgpack:"t1,omitempty"`    // unix ns
	Delta     string     `msgpack:"rc,omitempty"`    // resource change in flight, if any
	Placement Placements `msgpack:"pl,omitempty"`    // where live ranks run
	Procs     []ProcInfo `msgpack:"procs,omitempty"` // per process detail (when asked for)
	Reason    string     `msgpack:"why,omitempty"`   // job.wait: why the job ended, one of the JobEnd* values
	Msg       string     `msgpack:"msg,omitempty"`   // job.wait: one-line report, e.g. "rank 3 on node2 exited with code 7"
	Failure   string     `msgpack:"fail,omitempty"`  // job.wait: how the failure that gave Code came about, one of the Fail* values
	OnFailure string     `msgpack:"onf,omitempty"`   // the job's failure policy, one of the OnFailure* values
}

// JobStateReq asks for one job.
type JobStateReq struct {
	Job   string `msgpack:"j,omitempty"`     // job namespace
	Procs bool   `msgpack:"procs,omitempty"` // include per-process detail
}

// JobListReq lists jobs.
type JobListReq struct {
	All bool `msgpack:"all,omitempty"` // include ended jobs
}

// JobList is a list of jobs, oldest first (without per-process detail).
type JobList struct {
	Jobs []JobInfo `msgpack:"jobs,omitempty"` // jobs
}

// JobKillReq signals every process of a job, then kills what is left after
// the grace period.
type JobKillReq struct {
	Job     string `msgpack:"j,omitempty"`     // job namespace
	Signal  int    `msgpack:"sig,omitempty"`   // first signal (0 = SIGTERM)
	GraceMS int64  `msgpack:"grace,omitempty"` // then SIGKILL after this many ms (0 = runtime default)
}

// JobWaitReq waits for a job to end, and with it every job it spawned
// through PMI (MPI_Comm_spawn): like mpiexec, a launcher waiting on a job
// stays until its children are done.
type JobWaitReq struct {
	Job       string `msgpack:"j,omitempty"`   // job namespace
	TimeoutMS int64  `msgpack:"tmo,omitempty"` // give up after this many ms (0 = no limit)
}

// JobStdin carries a piece of the launcher's stdin to one process (the
// rank launched with a stdin stream: rank 0 of a JobLaunchReq with Stdin).
// Pieces are delivered in the order they are sent; EOF closes the
// process's stdin after Data.
type JobStdin struct {
	Job  string `msgpack:"j,omitempty"`   // job namespace
	Rank uint32 `msgpack:"r,omitempty"`   // rank
	Data []byte `msgpack:"d,omitempty"`   // bytes to write
	EOF  bool   `msgpack:"eof,omitempty"` // close the stream after Data
}
