package daemon

import (
	"strconv"

	"github.com/dynrt/dynrt/wire"
)

// Wire additions the master and the daemons need that the catalogue in wire/
// does not have yet. They extend catalogue bodies by embedding them (msgpack
// inlines embedded structs, and decoders ignore unknown keys), so a peer
// that only knows the catalogue types still decodes them. The lead moves
// the extra fields into wire/.

// LaunchBody is the body of node.launch: the catalogue's LaunchReq plus the
// job data and the job's initial process sets, so that one round trip both
// informs a daemon about a job and starts its ranks there.
// Pending in wire: LaunchReq.Data and LaunchReq.Psets.
type LaunchBody struct {
	wire.LaunchReq
	Data  *wire.JobData  `msgpack:"jd,omitempty"`  // the job as the master sees it after this launch
	Psets *wire.PsetPush `msgpack:"ps,omitempty"`  // the job's sets (WORLD and mpi://app/<app> at launch)
	PMI   *PMIJob        `msgpack:"pmi,omitempty"` // the job's PMI service (pmi.go); nil = none
}

// JobDataBody is the body of node.jobdata: JobData plus optional sets, so
// that a daemon running none of a job's ranks still learns the job and its
// sets in one message. Pending in wire: JobData.Psets.
type JobDataBody struct {
	wire.JobData
	Psets *wire.PsetPush `msgpack:"ps,omitempty"`
}

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
)

// ClientName is the hello name a process gives its daemon: "<job>/<rank>".
// The daemon admits a client only if a process of that job and rank runs
// on its node and the connecting process is it (or in its process group).
func ClientName(job string, rank uint32) string {
	return job + "/" + strconv.FormatUint(uint64(rank), 10)
}
