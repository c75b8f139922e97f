package master

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/wire"
)

// node is one node of the DVM and its daemon.
type node struct {
	idx   int
	name  string
	slots int

	host    string
	pid     int
	addr    string // the daemon's client socket
	conn    *wire.Conn
	out     *nodeOut          // ordered requests to the daemon on conn (nodeout.go)
	holds   map[uint64]func() // answers rounds wait for, released when the node becomes suspect (callRound)
	holdSeq uint64
	up      bool             // a daemon is registered and connected
	suspect bool             // up, but its last heartbeat is unanswered (heartbeat.go)
	joined  bool             // a daemon has registered at least once
	local   bool             // the daemon runs inside the master process
	proc    *launcher.Daemon // the started daemon process (nil: in-process or join)
	pmix    bool             // its daemon can host a PMIx server (NodeRegister.PMIx)
	relay   string           // where other daemons relay to it (NodeRegister.Relay; "" = not in the tree)
	relayID uint64           // NodeRegister.RelayID
	// jobGen is the generation of each job's data last queued for this
	// daemon (pushes to a daemon are delivered in order): a change's new
	// data goes to it as a delta when it has the previous generation.
	jobGen map[string]uint64

	// A DVM that grows and shrinks (grow.go). Placement skips a node that
	// is pending, leaving or gone.
	pending    bool             // added by dvm.grow, not usable until every node of that grow registered
	leaving    bool             // dvm.shrink is taking it out
	gone       bool             // left the DVM for good; its index stays (jobs refer to nodes by index)
	starter    launcher.Starter // what started its daemon (grown nodes: released when it leaves)
	registered chan struct{}    // grown nodes: closed at the first registration
	firstUp    chan struct{}    // nodes of the start: closed at the first registration
}

func (n *node) info(used int) wire.NodeInfo {
	st := wire.NodeDown
	switch {
	case n.pending:
		st = wire.NodeStarting
	case n.leaving:
		st = wire.NodeLeaving
	case n.up && n.suspect:
		st = wire.NodeSuspect
	case n.up:
		st = wire.NodeUp
	}
	return wire.NodeInfo{
		Name: n.name, Index: uint32(n.idx), Host: n.host, Slots: uint32(n.slots), Used: uint32(used),
		PID: n.pid, Addr: n.addr, State: st,
	}
}

// handleRegister admits a daemon for one of the configured nodes.
func (m *Master) handleRegister(ctx context.Context, req *wire.Request, b *wire.NodeRegister) (any, error) {
	return ask(ctx, m, func(s *state, reply func(*wire.NodeRegisterReply, error)) {
		reply(s.register(req.Conn, b))
	})
}

func (s *state) register(c *wire.Conn, b *wire.NodeRegister) (*wire.NodeRegisterReply, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	if s.stopping {
		return nil, wire.Errorf(wire.ErrState, "master: the DVM is stopping")
	}
	n := s.nodeByName[b.Name]
	if n == nil {
		return nil, s.noNode(b.Name)
	}
	if n.up {
		return nil, wire.Errorf(wire.ErrExists, "master: node %s already has a daemon (pid %d)", n.name, n.pid)
	}
	if b.Slots != 0 && int(b.Slots) != n.slots {
		s.log.Warn("master: daemon reports a different slot count; keeping the DVM's", "node", n.name, "daemon", b.Slots, "dvm", n.slots)
	}
	n.conn, n.up, n.suspect = c, true, false
	n.out = newNodeOut(s.m, c)
	n.host, n.pid, n.addr, n.pmix = b.Host, b.PID, b.Addr, b.PMIx
	n.relay, n.relayID = b.Relay, b.RelayID
	msg := ""
	if n.joined {
		msg = "rejoined"
	}
	if n.joined || n.registered != nil {
		// A rejoined daemon, or one that joins a running DVM (grow.go):
		// it learns the live jobs and their sets first.
		s.resync(n)
	}
	s.publish(wire.Event{Kind: wire.EvNodeUp, Node: n.name, Msg: msg})
	if !n.joined {
		n.joined = true
		if n.firstUp != nil {
			close(n.firstUp)
		}
		if n.registered != nil {
			close(n.registered)
		} else if s.registered++; s.registered == s.initial {
			close(s.allUp)
		}
	}
	rep := &wire.NodeRegisterReply{Index: uint32(n.idx), DVM: s.id, Net: s.m.cfg.Net.String()}
	if !n.local {
		// The daemon in this process cannot hang on its own.
		iv, _ := s.m.heartbeat()
		rep.HeartbeatMS, rep.DeadMS = iv.Milliseconds(), s.m.deadAfter().Milliseconds()
		go s.m.pingNode(n.idx, c)
	}
	return rep, nil
}

// noNode is the error for a node name the DVM does not have.
func (s *state) noNode(name string) error {
	var names []string
	for _, n := range s.nodes {
		if !n.gone {
			names = append(names, n.name)
		}
	}
	return wire.Errorf(wire.ErrNotFound, "master: DVM %s has no node %q (its nodes: %s)", s.id, name, strings.Join(names, ", "))
}

// nodeLost marks a node down when its daemon's connection closes. Its
// processes count as killed; jobs that did not expect it fail.
func (s *state) nodeLost(n *node, why error) {
	s.nodeDown(n, why, false)
}

// declareDown takes node n down although its connection is open (missed
// heartbeats, a failed push), for the reason why, and closes the
// connection: the daemon, if it runs at all, then kills its processes and
// exits, and the node may rejoin with a new daemon.
func (s *state) declareDown(n *node, why error) {
	c := n.conn
	s.nodeDown(n, why, true)
	c.Close() // its close notification finds no node with c: the loss is booked
}

func (s *state) nodeDown(n *node, why error, declared bool) {
	n.conn, n.up, n.suspect, n.holds = nil, false, false, nil
	s.dropPushes(n)
	s.relayGone(n)
	msg := fmt.Sprintf("daemon of node %s lost", n.name)
	switch {
	case n.leaving:
		msg = fmt.Sprintf("daemon of node %s stopped: the node leaves the DVM", n.name)
	case declared:
		msg = fmt.Sprintf("daemon of node %s declared down: %v", n.name, why)
	case s.stopping:
		msg = fmt.Sprintf("daemon of node %s stopped", n.name)
	}
	// A stop or a shrink takes daemons down on purpose: no warning.
	if !s.stopping && !n.leaving && why != nil {
		s.log.Warn("master: node down", "node", n.name, "err", why)
	}
	s.publish(wire.Event{Kind: wire.EvNodeDown, Node: n.name, Msg: msg})
	for _, j := range slices.Clone(s.order) {
		if !j.done && j.launched {
			s.loseRanks(j, n)
		}
	}
}

// cutStragglers declares down, during a stop, every node that is suspect
// or still holds a live process of a job after the kill's grace: its
// daemon does not report, and the stop must not wait for it.
func (s *state) cutStragglers() {
	held := map[int]bool{}
	for _, j := range s.order {
		if j.done {
			continue
		}
		for idx, rr := range j.nodes {
			for r := range rr.All() {
				if s.procLive(procRef{j.ns, r}) {
					held[idx] = true
					break
				}
			}
		}
	}
	for _, n := range s.nodes {
		if n.up && (n.suspect || held[n.idx]) {
			s.declareDown(n, wire.Errorf(wire.ErrTimeout, "its processes did not end within the stop's grace"))
		}
	}
}

// hasJob reports whether n's daemon has been sent j (its data and sets):
// the daemons of the nodes j has run on, and every daemon for a job whose
// processes may look up other jobs' data at their daemon (everywhere).
// Only those get j's pushes: a change to a job on a few nodes costs what
// those nodes do, whatever the size of the DVM (docs/scale.md). A
// process's query about a job its daemon does not hold goes to the
// master (lib/daemon cache.go).
func (n *node) hasJob(j *job) bool {
	if j.everywhere() {
		return true
	}
	_, ok := n.jobGen[j.ns]
	return ok
}

// sentJobData records that generation gen of job's data has been queued
// for n's daemon.
func (n *node) sentJobData(job string, gen uint64) {
	if n.jobGen == nil {
		n.jobGen = make(map[string]uint64)
	}
	n.jobGen[job] = gen
}
