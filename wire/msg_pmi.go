package wire

// PMI family: the PMI service for MPI programs (docs/mpi.md). A daemon
// answers PMI-1/PMI-2 for its ranks itself and asks the master only for
// what needs the whole DVM: starting a job for a spawn, and telling it
// about PMI events that change a job's fate. The master describes a PMI
// job to its daemons in LaunchReq.PMI.

const (
	KindPMISpawn  = "pmi.spawn"  // daemon→master: PMISpawnReq → PMISpawnReply (a process called MPI_Comm_spawn)
	KindPMIReport = "pmi.report" // daemon→master: PMIReport → empty
	KindPMIDead   = "pmi.dead"   // master→daemon: PMIDead → empty (keep-going: tell the survivors)
	KindPMIJobCtl = "pmi.jobctl" // daemon→master: PMIJobCtl → empty (a process called PMIx_Job_control)
)

// What a PMIReport reports.
const (
	PMIReportInit       = "init"       // a process of the job began a PMI session (the job becomes static)
	PMIReportUnfinished = "unfinished" // a process left PMI without finalize or abort (the job fails, or with keep-going its peers are told)
	PMIReportMalleable  = "malleable"  // a PMIx process declared that it follows resource changes (DYNRT_PMIX_MALLEABLE)
)

// PMIJob rides along node.launch (LaunchReq.PMI) for a job launched with
// the PMI service: what the daemon needs to answer PMI for its ranks.
type PMIJob struct {
	Mode       string     `msgpack:"m,omitempty"`   // PMIFD, PMIPort, PMIPMIx or PMIBoth
	KVS        string     `msgpack:"kvs,omitempty"` // kvsname / PMI-2 jobid
	Universe   int        `msgpack:"u,omitempty"`   // MPI_UNIVERSE_SIZE; 0 or less: unset
	Parent     string     `msgpack:"par,omitempty"` // KVS of the spawning job ("" = not spawned)
	ParentJob  string     `msgpack:"pj,omitempty"`  // job of the process that spawned this one (PMIx's PMIX_PARENT_ID); set with Parent
	ParentRank uint32     `msgpack:"pr,omitempty"`  // rank of that process
	Preput     []KV       `msgpack:"pp,omitempty"`  // key-value data stored before any rank starts (spawn)
	Blocks     []PMIBlock `msgpack:"b,omitempty"`   // executable blocks; empty = one block (appnum 0) of LaunchReq.Argv
	// KeepGoing is the job's --keep-going (Hydra's -disable-auto-cleanup):
	// a process that leaves PMI without finalize is reported at once and
	// its peers are told (PMIDead) instead of the job being killed.
	KeepGoing bool `msgpack:"kg,omitempty"`
}

// PMIBlock is one executable block of a job (MPI_Comm_spawn_multiple):
// its ranks run Argv in Wdir and have appnum = the block's index.
type PMIBlock struct {
	Ranks RankRanges `msgpack:"r,omitempty"`    // ranks of the block
	Argv  []string   `msgpack:"argv,omitempty"` // program and arguments
	Wdir  string     `msgpack:"wd,omitempty"`   // working directory ("" = LaunchReq.Wdir)
	Env   []string   `msgpack:"env,omitempty"`  // KEY=value added to the block's environment (a PMIx spawn's app env)
}

// PMISpawnApp is one executable of a spawn request.
type PMISpawnApp struct {
	Argv []string `msgpack:"argv,omitempty"` // program (as the application named it) and arguments
	N    uint32   `msgpack:"n,omitempty"`    // processes
	Info []KV     `msgpack:"info,omitempty"` // MPI_Info keys (wdir and path are honoured)
	Env  []string `msgpack:"env,omitempty"`  // KEY=value added to its processes' environment (PMIx spawn)
}

// PMISpawnReq asks the master to start a job for a PMI spawn. Job and
// Rank are the caller's, stamped by its daemon.
type PMISpawnReq struct {
	Job    string        `msgpack:"j,omitempty"`    // spawning job
	Rank   uint32        `msgpack:"r,omitempty"`    // spawning rank
	Apps   []PMISpawnApp `msgpack:"apps,omitempty"` // executables, ranks numbered across them
	Preput []KV          `msgpack:"pp,omitempty"`   // stored in the new job's key-value space first
	MapBy  string        `msgpack:"map,omitempty"`  // MapBySlot or MapByNode ("" = the spawning job's)
}

// PMISpawnReply describes the started job.
type PMISpawnReply struct {
	Job   string `msgpack:"j,omitempty"`   // namespace of the new job
	KVS   string `msgpack:"kvs,omitempty"` // its kvsname / jobid
	Codes []int  `msgpack:"c,omitempty"`   // per new rank: 0, or the exit code of a failed start
}

// PMIJobCtl asks the master to kill or signal processes for a process
// that called PMIx_Job_control (PMIX_JOB_CTRL_KILL, PMIX_JOB_CTRL_SIGNAL).
type PMIJobCtl struct {
	Job    string       `msgpack:"j,omitempty"`   // caller's job
	Rank   uint32       `msgpack:"r,omitempty"`   // caller's rank
	Procs  []ProcRanges `msgpack:"p,omitempty"`   // targets (no ranks: the whole job); empty = the caller's job. Only the caller's spawn tree
	Signal int          `msgpack:"sig,omitempty"` // 0 = kill (SIGTERM, SIGKILL after the grace; a whole job ends as killed); else send this signal alone
}

// PMIReport is a PMI event the master must act on.
type PMIReport struct {
	Job  string `msgpack:"j,omitempty"`   // job
	Rank uint32 `msgpack:"r,omitempty"`   // process
	What string `msgpack:"w,omitempty"`   // PMIReportInit, PMIReportUnfinished or PMIReportMalleable
	Msg  string `msgpack:"msg,omitempty"` // detail for the job's report
}

// PMIDead tells a daemon which ranks of a keep-going job have left PMI
// without finalize, in the order they did: the daemon answers them as
// PMI_dead_processes, then sends SIGUSR1 to the job's local processes
// (what MPICH's fault tolerance listens for, as under Hydra).
type PMIDead struct {
	Job   string   `msgpack:"j,omitempty"` // job
	Ranks []uint32 `msgpack:"r,omitempty"` // every dead rank so far, in order of death
}
