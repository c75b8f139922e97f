// Package procenv holds the contract between a node daemon and the
// processes it starts: the environment it gives them and the name they
// say hello with. Client libraries import it without the daemon itself.
package procenv

import "strconv"

// Process environment set by the daemon for every process it starts
// (docs/environment.md). lib/session reads them to find its daemon.
const (
	Daemon    = "DYNRT_DAEMON"     // unix socket path of the node daemon
	DVM       = "DYNRT_DVM"        // DVM id
	Job       = "DYNRT_JOB"        // job namespace
	App       = "DYNRT_APP"        // application name (pset domain mpi://app/<app>)
	Rank      = "DYNRT_RANK"       // rank of the process
	UID       = "DYNRT_UID"        // 64-bit process id: job number << 32 | rank, decimal
	Node      = "DYNRT_NODE"       // node name
	NodeIndex = "DYNRT_NODE_INDEX" // node index in the DVM's slot order
	Token     = "DYNRT_TOKEN"      // DVM token (the daemon also admits same-uid peers)
	Size      = "DYNRT_SIZE"       // job size at launch (informational)
	NodeAddr  = "DYNRT_NODE_ADDR"  // address of this node that peers on other hosts dial (lib/comm)
	Dir       = "DYNRT_DIR"        // the daemon's rendezvous directory (its host's, never the submitter's)
)

// ClientName is the hello name a process gives its daemon: "<job>/<rank>".
// The daemon admits a client only if a process of that job and rank runs
// on its node and the connecting process is it (or in its process group).
func ClientName(job string, rank uint32) string {
	return job + "/" + strconv.FormatUint(uint64(rank), 10)
}
