package daemon

import "strconv"

// Process environment set by the daemon for every process it starts
// (docs/environment.md). lib/session reads them to find its daemon.
const (
	EnvDaemon    = "DYNRT_DAEMON"     // unix socket path of the node daemon
	EnvDVM       = "DYNRT_DVM"        // DVM id
	EnvJob       = "DYNRT_JOB"        // job namespace
	EnvApp       = "DYNRT_APP"        // application name (pset domain mpi://app/<app>)
	EnvRank      = "DYNRT_RANK"       // rank of the process
	EnvUID       = "DYNRT_UID"        // 64-bit process id: job number << 32 | rank, decimal
	EnvNode      = "DYNRT_NODE"       // node name
	EnvNodeIndex = "DYNRT_NODE_INDEX" // node index in the DVM's slot order
	EnvToken     = "DYNRT_TOKEN"      // DVM token (the daemon also admits same-uid peers)
	EnvSize      = "DYNRT_SIZE"       // job size at launch (informational)
	EnvNodeAddr  = "DYNRT_NODE_ADDR"  // address of this node that peers on other hosts dial (lib/comm)
	EnvDir       = "DYNRT_DIR"        // the daemon's rendezvous directory (its host's, never the submitter's)
)

// ClientName is the hello name a process gives its daemon: "<job>/<rank>".
// The daemon admits a client only if a process of that job and rank runs
// on its node and the connecting process is it (or in its process group).
func ClientName(job string, rank uint32) string {
	return job + "/" + strconv.FormatUint(uint64(rank), 10)
}
