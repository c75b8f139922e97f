package pmix

// Dynamic processes: the optional parts of a Handler for MPI_Comm_spawn
// (PMIx_Spawn) and for MPI_Comm_connect/accept and MPI_Comm_disconnect
// (PMIx_Connect, PMIx_Disconnect). Without them libpmix answers
// PMIX_ERR_NOT_SUPPORTED.

// PMIx statuses of spawns (pmix_common.h).
const (
	CodeBadParam       = -27  // PMIX_ERR_BAD_PARAM
	CodeFailedToLaunch = -181 // PMIX_ERR_JOB_FAILED_TO_LAUNCH
)

// KV is an info key with its value as text (strings as they are,
// booleans as true/false, integers in decimal).
type KV struct {
	Key, Value string
}

// App is one application of a spawn (MPI_Comm_spawn_multiple has
// several): MaxProcs processes of Cmd with Argv (Argv[0] the program as
// the caller named it), Env added to their environment (Open MPI puts the
// parent's port there), in Cwd ("" = unset), shaped by Info (host,
// hostfile, wdir, prefix ... as PMIx keys: "pmix.host", ...).
type App struct {
	Cmd      string
	Argv     []string
	Env      []string
	Cwd      string
	MaxProcs int
	Info     []KV
}

// Spawner is the optional part of a Handler that serves PMIx_Spawn: p
// asks for a new job of apps, with job-wide directives (mapping and
// such). done gets the new job's namespace once its processes have
// started.
type Spawner interface {
	Spawn(p Proc, job []KV, apps []App, done func(nspace string, err error))
}

// Connector is the optional part of a Handler that serves PMIx_Connect
// and PMIx_Disconnect: a collective over procs (whole namespaces as
// RankWildcard entries), called once per server when all of its local
// participants have entered, and done when every participant everywhere
// has. A connect must leave this server able to answer its clients about
// the processes of every namespace in procs (RegisterJob with Node -1
// for one it does not host, DirectModex for their data). The callback
// goes to the Handler of the first namespace in procs that has one.
type Connector interface {
	Connect(procs []Proc, done func(error))
	Disconnect(procs []Proc, done func(error))
}
