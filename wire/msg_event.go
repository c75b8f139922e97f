package wire

// Event family: the master's event bus. A subscriber (tool, or a client via
// its daemon) sends event.sub; matching events then arrive as pushed frames
// of kind "event" (id 0) carrying an Event, in Seq order.

const (
	KindEvent       = "event"        // pushed (id 0): Event
	KindEventSub    = "event.sub"    // →master: EventSubReq → EventSubReply
	KindEventUnsub  = "event.unsub"  // →master: EventUnsubReq → empty
	KindEventNotify = "event.notify" // client→daemon→master: EventNotifyReq → empty
	KindNodeEvent   = "node.event"   // master→daemon, pushed (id 0): NodeEvent
)

// NodeEvent is a bus event for a daemon's subscribers, with the number of
// events the master sent that daemon before it (Prev). Events to a daemon
// take two paths, its own connection and the tree of daemons (an event
// relayed as KindEvent carries its Prev in NodeRelay.Prev and
// RelayHop.Prev), and may arrive out of order: the daemon holds an event
// until those before it have come, so its clients get them in the order
// the master sent them (a replay for a new subscription sends older
// events again: the count orders them, not Seq).
type NodeEvent struct {
	Prev uint64 `msgpack:"p,omitempty"` // how many events the master sent this daemon before this one
	Ev   Raw    `msgpack:"e"`           // the encoded Event, as for its other subscribers
}

// Event kinds (Event.Kind).
const (
	EvJobState    = "job.state"    // Job, State, Code; when a job changes state
	EvProcState   = "proc.state"   // Job, Ranks, Node, State, Code, Signal
	EvPsetDef     = "pset.def"     // Job, Pset: a set was defined or got a new version
	EvPsetDel     = "pset.del"     // Job, Pset (name only): a set was deleted
	EvRCState     = "rc.state"     // Job, RC, State: a resource change moved to a new status; one event per status
	EvRCUpdate    = "rc.update"    // Job, RC, State: the record of a change was updated in the same status (a step reached, an accept counted, a process ended, Done set); subscribe to "rc." for every update
	EvNodeUp      = "node.up"      // Node, Msg: a daemon registered, or a suspect node answers heartbeats again
	EvNodeSuspect = "node.suspect" // Node, Msg: a daemon missed a heartbeat
	EvNodeDown    = "node.down"    // Node, Msg: a daemon was lost (connection closed or heartbeats missed)
	EvNodeJoining = "node.joining" // Node, Msg: dvm.grow admitted a node: its daemon may register from now on (join: start it now)
	EvNodeAdded   = "node.added"   // Node, Msg: a node joined the running DVM (dvm.grow) and can take processes
	EvNodeLeaving = "node.leaving" // Node, Msg: a node is leaving (dvm.shrink): no process is placed there any more
	EvNodeRemoved = "node.removed" // Node, Msg: a node left the DVM for good (dvm.shrink), or a shrink gave up and it stays
	EvOutput      = "output"       // Job, Ranks, Output: a forwarded output line
	EvApp         = "app"          // Job, Source, Msg, Data: raised by an application (event.notify)
)

// Event is one entry of the event bus. Kind says which of the optional
// fields are set.
type Event struct {
	Seq    uint64            `msgpack:"seq,omitempty"`  // bus sequence number, strictly increasing
	Time   int64             `msgpack:"t,omitempty"`    // unix time in ns
	Kind   string            `msgpack:"k,omitempty"`    // one of the Ev* kinds
	Job    string            `msgpack:"j,omitempty"`    // job namespace
	Ranks  RankRanges        `msgpack:"r,omitempty"`    // processes concerned
	Node   string            `msgpack:"n,omitempty"`    // node concerned
	State  string            `msgpack:"st,omitempty"`   // new state (job, proc)
	Code   int               `msgpack:"code,omitempty"` // exit code
	Signal int               `msgpack:"sig,omitempty"`  // terminating signal
	Pset   *PsetInfo         `msgpack:"ps,omitempty"`   // set defined or deleted
	RC     *RC               `msgpack:"rc,omitempty"`   // resource change record
	Output *OutputLine       `msgpack:"out,omitempty"`  // forwarded output
	Source *ProcID           `msgpack:"src,omitempty"`  // raiser of an application event
	Msg    string            `msgpack:"msg,omitempty"`  // human-readable detail
	Data   map[string]string `msgpack:"d,omitempty"`    // application payload
}

// EventSubReq subscribes the connection to events. Kinds are prefixes
// matched against Event.Kind ("rc." matches "rc.state"); empty means all.
type EventSubReq struct {
	Kinds []string `msgpack:"k,omitempty"`     // kind prefixes; empty = all kinds
	Job   string   `msgpack:"j,omitempty"`     // only events of this job; empty = all jobs
	Since uint64   `msgpack:"since,omitempty"` // replay retained events with Seq > Since first (0 = none)
}

// EventSubReply confirms a subscription.
type EventSubReply struct {
	ID  uint64 `msgpack:"id,omitempty"`  // subscription id, for event.unsub
	Seq uint64 `msgpack:"seq,omitempty"` // last Seq on the bus when the subscription started
}

// EventUnsubReq ends a subscription.
type EventUnsubReq struct {
	ID uint64 `msgpack:"id,omitempty"` // subscription id; 0 = all of the connection's subscriptions
}

// EventNotifyReq raises an application event (Kind EvApp) on the bus.
type EventNotifyReq struct {
	Job  string            `msgpack:"j,omitempty"`   // raiser's job
	Rank uint32            `msgpack:"r,omitempty"`   // raiser's rank
	Msg  string            `msgpack:"msg,omitempty"` // detail
	Data map[string]string `msgpack:"d,omitempty"`   // payload
}
