package daemon

import "github.com/dynrt/dynrt/wire"

// Wire additions of the PMI service (pmi.go and the master's pmi.go).
// Like proto.go they are not in the catalogue yet; the lead moves them
// into wire/.

// Kinds of the PMI service between daemons and the master.
const (
	// KindPMISpawn is daemon→master: PMISpawnReq → PMISpawnReply. A
	// process asked, through PMI, for a new job (MPI_Comm_spawn).
	KindPMISpawn = "pmi.spawn"
	// KindPMIReport is daemon→master: PMIReport → empty. The daemon tells
	// the master that a job started speaking PMI (it becomes static) or
	// that a process left PMI without finalize (the job fails).
	KindPMIReport = "pmi.report"
)

// PMIJob rides along node.launch (LaunchBody.PMI) for a job launched with
// the PMI service: what the daemon needs to answer PMI for its ranks.
type PMIJob struct {
	Mode     string     `msgpack:"m,omitempty"`   // wire.PMIFD or wire.PMIPort
	KVS      string     `msgpack:"kvs,omitempty"` // kvsname / PMI-2 jobid
	Universe int        `msgpack:"u,omitempty"`   // MPI_UNIVERSE_SIZE: the DVM's slot count
	Parent   string     `msgpack:"par,omitempty"` // KVS of the spawning job ("" = not spawned)
	Preput   []wire.KV  `msgpack:"pp,omitempty"`  // key-value data stored before any rank starts (spawn)
	Blocks   []PMIBlock `msgpack:"b,omitempty"`   // executable blocks; empty = one block (appnum 0) of LaunchReq.Argv
}

// PMIBlock is one executable block of a job (MPI_Comm_spawn_multiple):
// its ranks run Argv in Wdir and have appnum = the block's index.
type PMIBlock struct {
	Ranks wire.RankRanges `msgpack:"r,omitempty"`    // ranks of the block
	Argv  []string        `msgpack:"argv,omitempty"` // program and arguments
	Wdir  string          `msgpack:"wd,omitempty"`   // working directory ("" = LaunchReq.Wdir)
}

// PMISpawnApp is one executable of a spawn request.
type PMISpawnApp struct {
	Argv []string  `msgpack:"argv,omitempty"` // program (as the application named it) and arguments
	N    uint32    `msgpack:"n,omitempty"`    // processes
	Info []wire.KV `msgpack:"info,omitempty"` // MPI_Info keys (wdir and path are honoured)
}

// PMISpawnReq asks the master to start a job for a PMI spawn. Job and
// Rank are the caller's, stamped by its daemon.
type PMISpawnReq struct {
	Job    string        `msgpack:"j,omitempty"`    // spawning job
	Rank   uint32        `msgpack:"r,omitempty"`    // spawning rank
	Apps   []PMISpawnApp `msgpack:"apps,omitempty"` // executables, ranks numbered across them
	Preput []wire.KV     `msgpack:"pp,omitempty"`   // stored in the new job's key-value space first
}

// PMISpawnReply describes the started job.
type PMISpawnReply struct {
	Job   string `msgpack:"j,omitempty"`   // namespace of the new job
	KVS   string `msgpack:"kvs,omitempty"` // its kvsname / jobid
	Codes []int  `msgpack:"c,omitempty"`   // per new rank: 0, or the exit code of a failed start
}

// What a PMIReport reports.
const (
	PMIReportInit       = "init"       // a process of the job began a PMI session
	PMIReportUnfinished = "unfinished" // a process left PMI without finalize (or abort)
)

// PMIReport is a PMI event the master must act on.
type PMIReport struct {
	Job  string `msgpack:"j,omitempty"`   // job
	Rank uint32 `msgpack:"r,omitempty"`   // process
	What string `msgpack:"w,omitempty"`   // PMIReportInit or PMIReportUnfinished
	Msg  string `msgpack:"msg,omitempty"` // detail for the job's report
}

// Variables of the PMI service in a process's environment (docs/mpi.md).
// The daemon removes inherited values of all of them first.
var pmiEnvVars = []string{
	"PMI_FD", "PMI_PORT", "PMI_ID", "PMI_RANK", "PMI_SIZE", "PMI_SPAWNED", "PMI_JOBID",
	"MPI_LOCALNRANKS", "MPI_LOCALRANKID",
}
