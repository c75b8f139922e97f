package daemon

// Variables of the PMI service in a process's environment (docs/mpi.md).
// The daemon removes inherited values of all of them first.
var pmiEnvVars = []string{
	"PMI_FD", "PMI_PORT", "PMI_ID", "PMI_RANK", "PMI_SIZE", "PMI_SPAWNED", "PMI_JOBID",
	"MPI_LOCALNRANKS", "MPI_LOCALRANKID",
}
