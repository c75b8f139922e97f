package wire

// Relays: a tree of daemons. Instead of writing the same push to every
// daemon of a job, the master may write it to a few and let each pass it
// on to the daemons below it (PRRTE's routed tree, Slurm's TreeWidth).
// The receiver of a NodeRelay applies the inner request as if the master
// had sent it, forwards the relay to the first node of each of up to
// Radix contiguous parts of Below (RelayParts), each with the rest of its
// part below it, and answers once its whole subtree has answered or
// failed, listing the nodes that did not apply it. The master resends the
// relay over its own connection to every node listed as not reached; the
// sequence number lets a daemon apply each relay once.

const (
	KindNodeRelay = "node.relay" // master→daemon, daemon→daemon: NodeRelay → NodeRelayReply
)

// Relayable names the request kinds a relay may carry: cache updates that
// every daemon of a job gets alike, and a job's launch (LaunchReq.Mine:
// each daemon starts the ranks the job data places on its node). A daemon
// refuses a relay of any other.
func Relayable(kind string) bool {
	switch kind {
	case KindNodeJobData, KindPsetPush, KindRCPush, KindPing, KindFenced, KindNodeLaunch, KindEvent:
		return true
	}
	return false
}

// NodeRelay carries one master→daemon request to a subtree of daemons.
type NodeRelay struct {
	Seq    uint64     `msgpack:"q"`            // the master's relay number; a daemon applies each once (numbers only grow; 0 = always, for pings)
	To     uint64     `msgpack:"to,omitempty"` // the receiving daemon's RelayID (0 = any): a daemon that replaced it since does not apply a late copy
	Kind   string     `msgpack:"k"`            // kind of the inner request: node.jobdata, pset.push, rc.push, kv.fenced, ping, node.launch or event
	Body   Raw        `msgpack:"b,omitempty"`  // its body, encoded once by the master
	Radix  uint32     `msgpack:"r,omitempty"`  // how many parts Below is cut into at each level (0 = 1)
	Below  []RelayHop `msgpack:"bl,omitempty"` // the receiver's subtree, in tree order (RelayParts)
	WaitMS int64      `msgpack:"w,omitempty"`  // how long the receiver waits for its subtree before it reports the rest as not reached
	// Job names the job whose nodes the relay spans (its launch and its
	// pushes), and From the relay address of the daemon that passed it on
	// (empty: the master). A daemon gathers its entries into that job's
	// fences up the same tree: to From, or to the master when it heads a
	// part, merged with those of the daemons below it (FenceReq.Parts).
	Job  string `msgpack:"j,omitempty"`  // the job whose launch or push this is (empty: a ping, a fence's data)
	From string `msgpack:"fr,omitempty"` // the relay address of the daemon that passed it on (empty: the master)
	Prev uint64 `msgpack:"pv,omitempty"` // event: how many events the master sent the receiver before this one (NodeEvent.Prev)
}

// RelayHop is one daemon of a relay's subtree.
type RelayHop struct {
	Node string `msgpack:"n"`            // node name
	Addr string `msgpack:"a"`            // where its daemon takes relays (NodeRegister.Relay)
	ID   uint64 `msgpack:"id,omitempty"` // its daemon's NodeRegister.RelayID
	Prev uint64 `msgpack:"pv,omitempty"` // event: as NodeRelay.Prev, for this daemon
}

// NodeRelayReply lists the nodes of the subtree that did not apply the
// inner request (none: every one did).
type NodeRelayReply struct {
	Failed  []RelayFailure `msgpack:"f,omitempty"` // nodes that did not apply it, with why
	Started []ProcStarted  `msgpack:"s,omitempty"` // node.launch: the processes the subtree started (LaunchReply.Started of each node)
}

// RelayFailure is a node of a relay's subtree that did not apply it.
type RelayFailure struct {
	Node      string `msgpack:"n"`           // node name
	Unreached bool   `msgpack:"u,omitempty"` // the relay may not have got there (a daemon on the way failed or was too slow): the master sends it again directly
	Err       *Error `msgpack:"e,omitempty"` // why; with Unreached false, the node's daemon refused the inner request
}

// RelayParts cuts n nodes of a subtree into at most radix contiguous parts
// of nearly equal size, as [start, end) index pairs: the first node of a
// part gets the relay, with the rest of the part below it. A radix below 1
// counts as 1 (a chain).
func RelayParts(n, radix int) [][2]int {
	if n <= 0 {
		return nil
	}
	radix = max(radix, 1)
	k := min(radix, n)
	parts := make([][2]int, 0, k)
	size, extra := n/k, n%k
	start := 0
	for i := range k {
		end := start + size
		if i < extra {
			end++
		}
		parts = append(parts, [2]int{start, end})
		start = end
	}
	return parts
}
