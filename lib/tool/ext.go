package tool

import "github.com/dynrt/dynrt/wire"

// JobEnd is the reply of job.wait: the job's final JobInfo plus why it
// ended and the one-line report dynrun prints. It embeds wire.JobInfo (the
// extra keys are ignored by peers that decode a plain JobInfo).
// Pending in wire: JobInfo.Reason and JobInfo.Msg.
type JobEnd struct {
	wire.JobInfo
	Reason string `msgpack:"why,omitempty"` // one of the Reason* values
	Msg    string `msgpack:"msg,omitempty"` // one-line report, e.g. "rank 3 on node2 exited with code 7"
}

// Why a job ended (JobEnd.Reason).
const (
	ReasonNone    = ""        // every process ended by itself
	ReasonFailed  = "failed"  // aborted because a process failed (no keep-going)
	ReasonKill    = "kill"    // killed on request (job.kill)
	ReasonTimeout = "timeout" // its time limit passed
	ReasonStop    = "stop"    // the DVM was stopped
	ReasonLost    = "lost"    // its launcher's connection was lost
	ReasonAbort   = "abort"   // a process asked for the abort (session.abort)
	ReasonLaunch  = "launch"  // the launch itself failed
)

// CodeTimeout is the exit code of a job killed by its time limit, as with
// timeout(1).
const CodeTimeout = 124
