package pmix

// Events and job control: what the server tells its clients
// (Server.Notify), what they tell their host (EventReceiver), and
// PMIx_Job_control (JobController). Without the optional interfaces
// libpmix answers PMIX_ERR_NOT_SUPPORTED.

// PMIx event codes and keys used by dynrt (pmix_common.h).
const (
	CodeProcessSetDefine = -55 // PMIX_PROCESS_SET_DEFINE: KeyPsetName, KeyPsetMembers

	KeyPsetMembers     = "pmix.pset.mems"  // []Proc: a set's members
	KeyEventAffected   = "pmix.evaffected" // []Proc: the processes an event is about
	KeyEventRange      = "pmix.evrange"    // []Proc: who gets an event (custom range)
	KeyEventNonDefault = "pmix.evnondef"   // bool: only handlers registered for the code get it
	keyEventDoNotCache = "pmix.evnocache"  // bool: the server does not keep the event for later handlers
)

// dynrt's own event codes and keys: libdynrt/include/dynrt_pmix.h, for
// programs (TestDynrtHeader keeps the two the same).
const (
	CodeDynrtMalleable = -3601 // DYNRT_PMIX_MALLEABLE: a process follows resource changes
	CodeDynrtRC        = -3602 // DYNRT_PMIX_RC: a resource change and its status
	CodeDynrtAccept    = -3603 // DYNRT_PMIX_ACCEPT: the root of a bound set accepts
	CodeDynrtAccepted  = -3604 // DYNRT_PMIX_ACCEPTED: the outcome of that accept (or confirm)
	CodeDynrtConfirm   = -3605 // DYNRT_PMIX_CONFIRM: a process an ADD started confirms it

	KeyDynrtType   = "dynrt.rc.type"   // DYNRT_PMIX_RC_TYPE
	KeyDynrtStatus = "dynrt.rc.status" // DYNRT_PMIX_RC_STATUS
	KeyDynrtDelta  = "dynrt.rc.delta"  // DYNRT_PMIX_RC_DELTA
	KeyDynrtBound  = "dynrt.rc.bound"  // DYNRT_PMIX_RC_BOUND
	KeyDynrtError  = "dynrt.rc.error"  // DYNRT_PMIX_RC_ERROR
	KeyDynrtOut    = "dynrt.rc.out"    // DYNRT_PMIX_RC_OUT: a REPLACE's replaced processes ([]Proc)
	KeyDynrtJob    = "dynrt.job"       // DYNRT_PMIX_JOB: job info, the dynrt job of the namespace
	KeyDynrtBase   = "dynrt.base"      // DYNRT_PMIX_BASE: job info (uint32), the dynrt rank of PMIx rank 0
)

// RangeRM is PMIX_RANGE_RM: an event addressed to the host alone.
const RangeRM = 1

// Info is one info key of an event: Value is a string, uint32, uint64,
// bool, []string or []Proc.
type Info struct {
	Key   string
	Value any
}

// Event is a notification from the server to some of its clients.
type Event struct {
	// Status is the event's code.
	Status int
	// Source is the process the event comes from; the zero Proc names the
	// server itself. libpmix does not deliver an event to its source.
	Source Proc
	// Targets are the processes that get the event (a whole namespace as
	// {ns, RankWildcard}); only those that registered a handler for
	// Status do. Empty: no one.
	Targets []Proc
	// Affected names the processes the event is about
	// (PMIX_EVENT_AFFECTED_PROCS), if any.
	Affected []Proc
	// Info is carried to the handlers as it is.
	Info []Info
}

// ClientEvent is an event a client sent beyond its own node, or to its
// host (PMIX_RANGE_RM): libpmix has already delivered it to the local
// clients in its range.
type ClientEvent struct {
	Status int
	Source Proc // the client that sent it
	Range  int  // a pmix_data_range_t (RangeRM, ...)
	// Info in text form (strings, booleans, integers; other types are
	// left out).
	Info []KV
}

// EventReceiver is the optional part of a Handler that gets the events
// of its namespace's clients (PMIx_Notify_event with a range beyond the
// client's own node). The client's call is acknowledged at once (libpmix
// cannot be answered later from another thread here), so ClientEvent has
// no completion; without an EventReceiver the events are dropped.
type EventReceiver interface {
	ClientEvent(ev ClientEvent)
}

// JobCtl is what a PMIx_Job_control request asks for: Kill the targets
// (PMIX_JOB_CTRL_KILL), else send them Signal (PMIX_JOB_CTRL_SIGNAL).
type JobCtl struct {
	Kill   bool
	Signal int
}

// JobController is the optional part of a Handler that serves
// PMIx_Job_control for its namespace's clients: requestor asks to kill or
// signal targets (a whole namespace as {ns, RankWildcard}; none: the
// requestor's own namespace). Directives other than kill and signal are
// refused by the C side when required, ignored otherwise. The client is
// told the request was accepted at once, as mpirun.openmpi's runtime does
// (libpmix 4.2 cannot be answered later from another thread safely);
// done only ends the operation, and an error there is the Handler's to
// report.
type JobController interface {
	JobControl(requestor Proc, targets []Proc, ctl JobCtl, done func())
}
