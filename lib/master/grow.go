package master

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/wire"
)

// A DVM that gains and loses nodes while it runs (dvm.grow, dvm.shrink).
//
// Grow: the loop admits the new nodes (names unique among the nodes in
// the DVM, the node limit kept) as pending: they are in the node table and
// the slot table, but placement skips them. Their daemons are started
// through a Starter, and once every one has registered the nodes become
// usable together (node.added). If one fails to start or to register in
// time, every node of the grow is taken out again: the DVM is as it was,
// but for node indices that are never reused.
//
// Shrink: the loop marks the node leaving (placement skips it from then
// on) once it holds no live process, or, with drain, after a SUB of each
// job with processes there removed them (the resource-change engine: the
// job accepts it like any SUB, or the SUB aborts at its confirm timeout
// and the node stays). Then its daemon is stopped, its daemon process
// waited for, and the node is gone: no slots, never placed on, its index
// kept because ended jobs and change records refer to nodes by index.
//
// Invariants (checkNodes, and the tests): no process is placed on a node
// that is pending, leaving or gone; a connection is the registration of
// at most one node; no node uses more slots than it has (oversubscribed
// processes aside); a gone node holds no slot, no live process and no
// connection.

// maxNodeIndexFactor bounds the node indices a DVM hands out, as a
// multiple of the node limit: a node that leaves keeps its index, so a
// DVM that grows and shrinks forever would otherwise grow its tables
// forever.
const maxNodeIndexFactor = 4

// AddNodes adds nodes to the running DVM and starts their daemons with
// starter (nil: the DVM's own launcher). hosts[i], when given, is the
// host of nodes[i] (ssh; default: the node's name). A node without a name
// is a virtual node of the master's host, named node<i> (virtualNodes),
// with the slots of node 0 unless it has some. It returns once every
// new daemon has registered, within timeout (0: Config.RegisterTimeout);
// on any failure every node of the call is removed again and the error
// names the ones that failed. Other launchers (Slurm) call it with their
// own Starter; a Starter that is a launcher.Releaser is told when each
// node has left again.
func (m *Master) AddNodes(ctx context.Context, starter launcher.Starter, nodes []alloc.Node, hosts []string, timeout time.Duration) ([]wire.NodeInfo, error) {
	if starter == nil {
		var err error
		if starter, err = m.starter(); err != nil {
			return nil, err
		}
	}
	if timeout <= 0 {
		timeout = m.registerTimeout()
	}
	added, err := ask(ctx, m, func(s *state, reply func([]*node, error)) { reply(s.admitNodes(nodes, starter)) })
	if err != nil {
		return nil, err
	}
	fail := func(err error) ([]wire.NodeInfo, error) {
		m.dropNodes(added)
		return nil, err
	}

	procs := make([]*launcher.Daemon, len(added))
	errs := make([]error, len(added))
	if gs, ok := starter.(launcher.GroupStarter); ok {
		// One command for all of them (slurm: one srun step), whose
		// process every node of the grow shares.
		specs := make([]alloc.Node, len(added))
		for i, n := range added {
			specs[i] = alloc.Node{Name: n.name, Slots: n.slots}
		}
		d, err := m.startGroup(ctx, gs, specs)
		for i := range added {
			procs[i], errs[i] = d, err
		}
		errs = errs[:1]
	} else {
		// Side by side: a slow host (ssh) does not hold up the others,
		// through a bounded number of ssh connections at once.
		g := m.gateFor(starter)
		var wg sync.WaitGroup
		for i, n := range added {
			host := ""
			if i < len(hosts) {
				host = hosts[i]
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if errs[i] = g.enter(ctx); errs[i] != nil {
					return
				}
				procs[i], errs[i] = m.startDaemon(ctx, starter, n.name, host, n.slots)
				if errs[i] != nil {
					g.leave()
					return
				}
				go g.leaveWhen(n.registered, procs[i], m.stopCh)
			}()
		}
		wg.Wait()
	}
	_ = do(context.Background(), m, func(s *state) error {
		for i, n := range added {
			n.proc = procs[i] // shutdown stops them if the DVM stops meanwhile
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return fail(fmt.Errorf("master: grow: %w (the DVM is unchanged)", err))
	}

	// Wait for every registration, a daemon's early exit, the timeout or
	// the DVM's stop.
	t := time.NewTimer(timeout)
	defer t.Stop()
	var failed []string
wait:
	for i, n := range added {
		var exited <-chan struct{}
		if procs[i] != nil {
			exited = procs[i].Done()
		}
		select {
		case <-n.registered:
			continue
		case <-exited:
			failed = append(failed, daemonExitMsg(n.name, procs[i]))
			continue
		case <-t.C:
		case <-ctx.Done():
			return fail(wire.Errorf(wire.ErrCanceled, "master: grow: %w (the DVM is unchanged)", ctx.Err()))
		case <-m.stopCh:
			return fail(wire.Errorf(wire.ErrState, "master: grow: the DVM is stopping"))
		}
		break wait
	}
	if len(failed) == 0 {
		for _, n := range added {
			select {
			case <-n.registered:
			default:
				failed = append(failed, fmt.Sprintf("the daemon of node %s did not register within %v", n.name, timeout))
			}
		}
	}
	if len(failed) > 0 {
		names := make([]string, len(added))
		for i, n := range added {
			names[i] = n.name
		}
		return fail(wire.Errorf(wire.ErrInternal, "master: grow by %s failed: %s; the DVM is unchanged", strings.Join(names, ", "), strings.Join(failed, "; ")))
	}
	infos, err := ask(ctx, m, func(s *state, reply func([]wire.NodeInfo, error)) { reply(s.nodesAdded(added)) })
	if err == nil {
		m.rewriteFile()
	}
	return infos, err
}

// rewriteFile writes the rendezvous file again with the DVM's node count
// after a grow or shrink (`dvm list` shows it), unless the DVM is private
// or its file is gone already (a stop).
func (m *Master) rewriteFile() {
	if m.cfg.Private {
		return
	}
	m.fileMu.Lock()
	defer m.fileMu.Unlock()
	if m.fileGone {
		return
	}
	// Counted under the lock: of two rewrites, the later one has the later
	// count.
	n, err := ask(context.Background(), m, func(s *state, reply func(int, error)) {
		live := 0
		for _, n := range s.nodes {
			if !n.gone {
				live++
			}
		}
		reply(live, nil)
	})
	if err != nil {
		return
	}
	info := m.info
	info.Nodes = n
	if _, err := dvmdir.Write(m.dir, info); err != nil {
		m.log.Warn("master: cannot rewrite the rendezvous file", "err", err)
	}
}

// handleGrow serves dvm.grow: hosts through the DVM's launcher, or
// virtual nodes of the local launcher.
func (m *Master) handleGrow(ctx context.Context, _ *wire.Request, b *wire.DVMGrowReq) (any, error) {
	if b.TimeoutMS < 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "master: grow: negative timeout")
	}
	var nodes []alloc.Node
	switch {
	case len(b.Hosts) > 0 && b.Nodes > 0:
		return nil, wire.Errorf(wire.ErrInvalid, "master: grow: give hosts or a number of virtual nodes, not both")
	case len(b.Hosts) > 0:
		for _, h := range b.Hosts {
			nodes = append(nodes, alloc.Node{Name: h.Name, Slots: int(h.Slots)})
		}
	case b.Nodes > 0 && m.launcherKind() == launcher.Slurm:
		return m.growSlurm(ctx, b)
	case b.Nodes > 0:
		if k := m.launcherKind(); k != launcher.Local {
			return nil, wire.Errorf(wire.ErrInvalid, "master: grow: virtual nodes (--nodes) run on the master's host; this DVM's launcher is %s: name the hosts (--host)", k)
		}
		if b.Nodes > uint32(m.cfg.Limits.Nodes) {
			return nil, wire.Exceeded("master: grow: nodes", int(b.Nodes), "nodes", m.cfg.Limits.Nodes)
		}
		// Named in the loop, with the admission: two grows at once must
		// not pick the same names.
		nodes = make([]alloc.Node, b.Nodes)
		for i := range nodes {
			nodes[i].Slots = int(b.Slots)
		}
	default:
		return nil, wire.Errorf(wire.ErrInvalid, "master: grow: no nodes to add (give hosts, or a number of virtual nodes)")
	}
	infos, err := m.AddNodes(ctx, nil, nodes, nil, time.Duration(b.TimeoutMS)*time.Millisecond)
	if err != nil {
		return nil, err
	}
	return &wire.DVMGrowReply{Nodes: infos}, nil
}

// growSlurm serves `dvm grow --nodes K` of a DVM started by the slurm
// launcher: the nodes of a new Slurm job (launcher.NewSlurmGrow), with
// the slots Slurm gives them; the job is cancelled if the grow fails, and
// when its last node leaves (Release).
func (m *Master) growSlurm(ctx context.Context, b *wire.DVMGrowReq) (any, error) {
	if b.Slots != 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "master: grow: the slots of Slurm nodes come from their allocation; drop --slots")
	}
	if b.Nodes > uint32(m.cfg.Limits.Nodes) {
		return nil, wire.Exceeded("master: grow: nodes", int(b.Nodes), "nodes", m.cfg.Limits.Nodes)
	}
	timeout := time.Duration(b.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = m.registerTimeout()
	}
	cmd, err := m.daemonCommand()
	if err != nil {
		return nil, err
	}
	opts := launcher.Options{Command: cmd, Prefix: m.cfg.Prefix, Logger: m.log}
	started := time.Now()
	g, nodes, err := launcher.NewSlurmGrow(ctx, opts, int(b.Nodes), "dynrt-"+m.info.ID+"-grow", timeout)
	if err != nil {
		return nil, fmt.Errorf("master: grow: %w (the DVM is unchanged)", err)
	}
	infos, err := m.AddNodes(ctx, g, nodes, nil, max(timeout-time.Since(started), time.Second))
	if err != nil {
		if cerr := g.Cancel(); cerr != nil {
			m.log.Warn("master: cannot cancel the Slurm job of a failed grow", "job", g.Job(), "err", cerr)
		}
		return nil, err
	}
	// Without the mark, a master killed right now could leave the job
	// holding its nodes until holdFirstStep (its script may not have seen
	// the daemons' step before they exit).
	if err := g.MarkStarted(ctx); err != nil {
		m.log.Warn("master: grow", "err", err)
	}
	return &wire.DVMGrowReply{Nodes: infos}, nil
}

// handleShrink serves dvm.shrink.
func (m *Master) handleShrink(ctx context.Context, _ *wire.Request, b *wire.DVMShrinkReq) (any, error) {
	if b.TimeoutMS < 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "master: shrink: negative timeout")
	}
	return m.Shrink(ctx, b.Node, b.Drain, time.Duration(b.TimeoutMS)*time.Millisecond)
}

// launcherKind is the kind of the DVM's launcher.
func (m *Master) launcherKind() string {
	if m.cfg.Starter != nil {
		return m.cfg.Starter.Kind()
	}
	if m.cfg.Launcher == "" {
		return launcher.Local
	}
	return m.cfg.Launcher
}

// registerTimeout is the bound on a daemon's registration.
func (m *Master) registerTimeout() time.Duration {
	if m.cfg.RegisterTimeout > 0 {
		return m.cfg.RegisterTimeout
	}
	return DefaultRegisterTimeout
}

// daemonExitMsg says that the daemon of a node exited before it
// registered, and how.
func daemonExitMsg(name string, d *launcher.Daemon) string {
	if d == nil {
		return fmt.Sprintf("the daemon of node %s exited before it registered", name)
	}
	return d.Failure().String() // with its host, output and a hint
}

// startDaemon starts the daemon of one node through starter: the spec
// every launcher gets, with the address it can reach the master at.
func (m *Master) startDaemon(ctx context.Context, starter launcher.Starter, name, host string, slots int) (*launcher.Daemon, error) {
	addr := m.info.Socket
	if starter.Kind() != launcher.Local && starter.Kind() != launcher.Join {
		addr = m.info.TCP // remote daemons (ssh, and what else starts them elsewhere) dial TCP
	}
	if host == "" && starter.Kind() == launcher.SSH {
		host = name
	}
	d, err := starter.Start(ctx, launcher.NodeSpec{
		Name: name, Host: host, Slots: slots, DVM: m.info.ID, Dir: m.dir, Master: addr, Token: m.info.Token,
	})
	if err != nil {
		return nil, fmt.Errorf("master: start the daemon of node %s: %w", name, err)
	}
	return d, nil
}

// admitNodes puts the nodes of a grow into the tables, pending.
func (s *state) admitNodes(nodes []alloc.Node, starter launcher.Starter) ([]*node, error) {
	lim := s.m.cfg.Limits
	if s.stopping {
		return nil, wire.Errorf(wire.ErrState, "master: DVM %s is stopping", s.id)
	}
	if len(nodes) == 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "master: grow: no nodes to add")
	}
	nodes = s.nameVirtual(nodes)
	seen := map[string]bool{}
	for _, n := range nodes {
		if err := launcher.CheckHost(n.Name); err != nil {
			return nil, wire.Errorf(wire.ErrInvalid, "master: grow: %w", err)
		}
		if n.Slots < 1 || n.Slots > launcher.MaxSlots {
			return nil, wire.Errorf(wire.ErrInvalid, "master: grow: node %s: %d slots; want 1 to %d", n.Name, n.Slots, launcher.MaxSlots)
		}
		if seen[n.Name] {
			return nil, wire.Errorf(wire.ErrInvalid, "master: grow: node %s named twice", n.Name)
		}
		seen[n.Name] = true
		if old := s.nodeByName[n.Name]; old != nil {
			// One daemon per node name: more slots on a host are a
			// restart of its node, not a second daemon beside it.
			return nil, wire.Errorf(wire.ErrExists, "master: grow: DVM %s already has a node %s (index %d, %d slots); a host joins once: shrink it first to change its slots", s.id, n.Name, old.idx, old.slots)
		}
	}
	live := 0
	for _, n := range s.nodes {
		if !n.gone {
			live++
		}
	}
	if live+len(nodes) > lim.Nodes {
		return nil, wire.Exceeded(fmt.Sprintf("master: grow: %d nodes plus %d new", live, len(nodes)), live+len(nodes), "nodes", lim.Nodes)
	}
	if max := maxNodeIndexFactor * lim.Nodes; len(s.nodes)+len(nodes) > max {
		return nil, wire.Errorf(wire.ErrLimit, "master: grow: this DVM has handed out %d node indices and may hand out at most %d (%d × the nodes limit; nodes that left keep theirs); start a new DVM",
			len(s.nodes), max, maxNodeIndexFactor)
	}
	var added []*node
	for _, nn := range nodes {
		idx, err := s.alloc.AddNode(nn)
		if err == nil && idx != len(s.nodes) {
			err = wire.Errorf(wire.ErrInternal, "master: slot table out of step: node index %d, want %d", idx, len(s.nodes))
		}
		if err != nil {
			for _, n := range added {
				s.removeNode(n, "")
			}
			return nil, err
		}
		n := &node{idx: idx, name: nn.Name, slots: nn.Slots, pending: true, starter: starter, registered: make(chan struct{})}
		s.nodes = append(s.nodes, n)
		s.nodeByName[n.name] = n
		added = append(added, n)
	}
	for _, n := range added {
		// From now on its daemon may register: a tool that prints join
		// commands waits for this.
		s.publish(wire.Event{Kind: wire.EvNodeJoining, Node: n.name, Msg: fmt.Sprintf("node %s (%d slots) is joining the DVM; waiting for its daemon", n.name, n.slots)})
	}
	return added, nil
}

// nameVirtual returns nodes with the unnamed ones (virtual nodes of the
// local launcher) named node<i>, the lowest free i from the node count
// on, as `dvm start --nodes` names them, and given node 0's slots unless
// they have some.
func (s *state) nameVirtual(nodes []alloc.Node) []alloc.Node {
	out := slices.Clone(nodes)
	taken := func(name string) bool {
		return s.nodeByName[name] != nil || slices.ContainsFunc(out, func(n alloc.Node) bool { return n.Name == name })
	}
	i := len(s.nodes)
	for k := range out {
		if out[k].Name != "" {
			continue
		}
		for taken("node" + strconv.Itoa(i)) {
			i++
		}
		out[k].Name = "node" + strconv.Itoa(i)
		if out[k].Slots <= 0 {
			out[k].Slots = max(s.nodes[0].slots, 1) // node 0 may have none (its host not listed)
		}
	}
	return out
}

// nodesAdded makes the nodes of a successful grow usable.
func (s *state) nodesAdded(added []*node) ([]wire.NodeInfo, error) {
	var out []wire.NodeInfo
	for _, n := range added {
		if n.gone {
			return nil, wire.Errorf(wire.ErrState, "master: grow: node %s was removed meanwhile", n.name)
		}
	}
	for _, n := range added {
		n.pending = false
		host := n.host
		if host == "" {
			host = "?"
		}
		s.nodeEvent(wire.Event{Kind: wire.EvNodeAdded, Node: n.name, Msg: fmt.Sprintf("node %s joined the DVM: %d slots on host %s", n.name, n.slots, host)})
		out = append(out, n.info(0))
	}
	return out, nil
}

// dropNodes takes the nodes of a failed grow out again: their daemons
// are cut off and stopped, and the nodes removed.
func (m *Master) dropNodes(added []*node) {
	var procs []*launcher.Daemon
	_ = do(context.Background(), m, func(s *state) error {
		for _, n := range added {
			if n.proc != nil && !slices.Contains(procs, n.proc) { // a group's process once
				procs = append(procs, n.proc)
			}
			if n.up {
				// Its processes: none (a pending node takes none). Closing
				// the connection makes the daemon exit.
				c := n.conn
				n.leaving = true
				s.nodeDown(n, nil, true)
				c.Close()
			}
			s.removeNode(n, "")
		}
		return nil
	})
	for _, d := range procs {
		m.reapDaemon(d)
	}
}

// reapDaemon waits (bounded) for a daemon process that was told to stop,
// then kills it.
func (m *Master) reapDaemon(d *launcher.Daemon) {
	if d.Done() == nil {
		return // joined by hand: not our child
	}
	select {
	case <-d.Done():
	case <-time.After(m.grace + time.Second):
		m.log.Warn("master: daemon did not exit; killing it", "node", d.Node)
		d.Stop(m.grace)
	}
	d.Wait()
}

// removeNode takes n out of the DVM for good. why, when set, is published
// as node.removed.
func (s *state) removeNode(n *node, why string) {
	if n.gone {
		return
	}
	if n.conn != nil {
		s.nodeLost(n, nil) // the loop has not seen the close yet
	}
	if err := s.alloc.RemoveNode(n.idx); err != nil {
		s.log.Error("master: cannot free the slots of a node that leaves", "node", n.name, "err", err)
	}
	n.gone, n.pending, n.leaving, n.proc = true, false, false, nil
	if s.nodeByName[n.name] == n {
		delete(s.nodeByName, n.name)
	}
	if why != "" {
		s.nodeEvent(wire.Event{Kind: wire.EvNodeRemoved, Node: n.name, Msg: why})
	}
}

// Shrink takes node name out of the DVM (see DVMShrinkReq).
func (m *Master) Shrink(ctx context.Context, name string, drain bool, confirm time.Duration) (*wire.DVMShrinkReply, error) {
	type plan struct {
		n      *node
		before wire.NodeInfo
		subs   []wire.RCRequest
	}
	by := "dynrun dvm shrink --node " + name
	p, err := ask(ctx, m, func(s *state, reply func(plan, error)) {
		n, subs, err := s.planShrink(name, drain)
		if err != nil {
			reply(plan{}, err)
			return
		}
		for i := range subs {
			subs[i].RequesterID, subs[i].ConfirmMS = by, confirm.Milliseconds()
		}
		n.leaving = true
		msg := fmt.Sprintf("node %s is leaving the DVM", n.name)
		if len(subs) > 0 {
			msg += "; moving out by SUB: " + strings.Join(s.busyOn(n), "; ")
		}
		s.nodeEvent(wire.Event{Kind: wire.EvNodeLeaving, Node: n.name, Msg: msg})
		reply(plan{n: n, before: n.info(s.alloc.Usage()[n.idx].Used), subs: subs}, nil)
	})
	if err != nil {
		return nil, err
	}
	n := p.n
	stay := func(err error) (*wire.DVMShrinkReply, error) {
		_ = do(context.Background(), m, func(s *state) error {
			if !n.gone && n.leaving {
				n.leaving = false
				s.nodeEvent(wire.Event{Kind: wire.EvNodeUp, Node: n.name, Msg: fmt.Sprintf("node %s stays in the DVM: %v", n.name, err)})
			}
			return nil
		})
		return nil, err
	}

	// Drain: one SUB per job, side by side; each waits for the job's
	// change in flight, if any, then for its own end.
	rep := &wire.DVMShrinkReply{Node: p.before}
	rcs := make([]wire.RC, len(p.subs))
	errs := make([]error, len(p.subs))
	var wg sync.WaitGroup
	for i := range p.subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := m.rcRequest(ctx, &p.subs[i])
			if rc, ok := v.(*wire.RC); ok && rc != nil {
				rcs[i] = *rc
			}
			if err != nil {
				errs[i] = fmt.Errorf("job %s: the SUB of ranks %s: %w", p.subs[i].Job, p.subs[i].Ranks, err)
			}
		}()
	}
	wg.Wait()
	rep.Drained = rcs
	if err := errors.Join(errs...); err != nil {
		return stay(fmt.Errorf("master: shrink of node %s: %w; the node stays in the DVM", name, err))
	}

	// Stop the daemon, once nothing of a job is left there.
	stopped := make(chan error, 1)
	var connDone <-chan struct{}
	err = do(ctx, m, func(s *state) error {
		if busy := s.busyOn(n); len(busy) > 0 {
			return wire.Errorf(wire.ErrBusy, "master: shrink of node %s: processes still run there after the drain: %s", name, strings.Join(busy, "; "))
		}
		if err := s.slotsHeld(n); err != nil {
			return err
		}
		if !n.up {
			stopped <- nil // down already: nothing to stop
			return nil
		}
		connDone = n.conn.Done()
		s.sendNode(n, outMsg{kind: wire.KindNodeStop, body: &wire.NodeStopReq{GraceMS: m.grace.Milliseconds()}, done: func(err error) { stopped <- err }})
		return nil
	})
	if err != nil {
		return stay(err)
	}
	slack := m.grace + time.Second
	select {
	case err := <-stopped:
		if err != nil && !errors.Is(err, wire.ErrClosed) {
			m.log.Warn("master: node.stop failed; cutting the daemon off", "node", name, "err", err)
		}
	case <-time.After(slack):
		m.log.Warn("master: daemon did not answer node.stop; cutting it off", "node", name)
	}
	if connDone != nil {
		select {
		case <-connDone:
		case <-time.After(slack):
		}
	}
	var proc *launcher.Daemon
	var starter launcher.Starter
	_ = do(context.Background(), m, func(s *state) error {
		proc, starter = n.proc, n.starter
		if s.procShared(n) {
			// One process runs the daemons of other nodes too (a group
			// start: slurm's srun step): this node's daemon exits by
			// itself, the process goes with the group's last node.
			proc = nil
		}
		if n.up {
			c := n.conn
			s.nodeDown(n, wire.Errorf(wire.ErrTimeout, "its daemon did not stop when told to"), true)
			c.Close()
		}
		return nil
	})
	if proc != nil {
		m.reapDaemon(proc)
	}
	_ = do(context.Background(), m, func(s *state) error {
		why := fmt.Sprintf("node %s left the DVM", name)
		if len(rcs) > 0 {
			var ds []string
			for _, rc := range rcs {
				ds = append(ds, rc.Delta)
			}
			why += " (drained by " + strings.Join(ds, ", ") + ")"
		}
		s.removeNode(n, why)
		return nil
	})
	m.rewriteFile()
	if r, ok := starter.(launcher.Releaser); ok {
		if err := r.Release(ctx, name); err != nil {
			m.log.Warn("master: cannot release the resources of a node that left", "node", name, "err", err)
		}
	}
	return rep, nil
}

// procShared reports whether the process that runs n's daemon runs the
// daemon of another node still in the DVM.
func (s *state) procShared(n *node) bool {
	if n.proc == nil {
		return false
	}
	for _, o := range s.nodes {
		if o != n && !o.gone && o.proc == n.proc {
			return true
		}
	}
	return false
}

// planShrink checks that node name may leave and lists the SUBs that
// would move its processes out.
func (s *state) planShrink(name string, drain bool) (*node, []wire.RCRequest, error) {
	if s.stopping {
		return nil, nil, wire.Errorf(wire.ErrState, "master: DVM %s is stopping", s.id)
	}
	n := s.nodeByName[name]
	if n == nil {
		return nil, nil, s.noNode(name)
	}
	switch {
	case n.local:
		return nil, nil, wire.Errorf(wire.ErrInvalid, "master: node %s is the master's own node (index 0) and cannot leave; stop the DVM instead (dynrun dvm stop)", name)
	case n.pending:
		return nil, nil, wire.Errorf(wire.ErrState, "master: node %s is still joining the DVM (dvm grow in progress)", name)
	case n.leaving:
		return nil, nil, wire.Errorf(wire.ErrBusy, "master: node %s is already leaving the DVM", name)
	}
	busy := s.busyOn(n)
	if len(busy) == 0 {
		if err := s.slotsHeld(n); err != nil {
			return nil, nil, err
		}
		return n, nil, nil
	}
	if !drain {
		return nil, nil, wire.Errorf(wire.ErrBusy, "master: node %s runs processes: %s; end those jobs, or give --drain to move the processes out by SUB resource changes",
			name, strings.Join(busy, "; "))
	}
	var subs []wire.RCRequest
	for _, j := range s.order {
		ranks := s.liveOn(j, n)
		if len(ranks) == 0 {
			continue
		}
		if err := s.rcJobOK(j); err != nil {
			return nil, nil, fmt.Errorf("master: cannot drain node %s: %w", name, err)
		}
		if len(ranks) == j.live {
			return nil, nil, wire.Errorf(wire.ErrInvalid, "master: cannot drain node %s: every live process of job %s (%s) runs there, and a SUB cannot remove them all; end the job, or grow it onto another node first (dynrc add)", name, j.app, j.ns)
		}
		subs = append(subs, wire.RCRequest{Job: j.ns, Type: wire.RCSub, Ranks: wire.RangesOf(ranks), Requester: wire.ByTool, Wait: true, Queue: true})
	}
	return n, subs, nil
}

// slotsHeld fails when n has no live process but its slots are still
// held: processes that ended with a change that is not settled yet (their
// slots go with it). The node can leave once that is over.
func (s *state) slotsHeld(n *node) error {
	if u := s.alloc.Usage()[n.idx]; u.Used+u.Over > 0 {
		return wire.Errorf(wire.ErrBusy, "master: node %s still holds %d slots of processes that have ended with a resource change that is settling; try again when it has settled", n.name, u.Used+u.Over)
	}
	return nil
}

// busyOn describes the live processes on n: "job app (ns) ranks R".
func (s *state) busyOn(n *node) []string {
	var out []string
	for _, j := range s.order {
		if ranks := s.liveOn(j, n); len(ranks) > 0 {
			out = append(out, fmt.Sprintf("job %s (%s) ranks %s", j.app, j.ns, wire.RangesOf(ranks)))
		}
	}
	return out
}

// liveOn lists the live ranks of j on n.
func (s *state) liveOn(j *job, n *node) []uint32 {
	if j.done {
		return nil
	}
	var out []uint32
	for r := range j.nodes[n.idx].All() {
		if s.procLive(procRef{j.ns, r}) {
			out = append(out, r)
		}
	}
	return out
}

// nodeLogSize bounds DVMState.NodeLog.
const nodeLogSize = 16

// nodeEvent publishes a change of the DVM's nodes and keeps it for
// dvm.state.
func (s *state) nodeEvent(ev wire.Event) {
	ev.Time = time.Now().UnixNano()
	s.publish(ev)
	if len(s.nodeLog) == nodeLogSize {
		s.nodeLog = slices.Delete(s.nodeLog, 0, 1)
	}
	s.nodeLog = append(s.nodeLog, ev)
}

// checkNodes checks the invariants of a DVM that grows and shrinks (see
// the top of this file); tests call it between and after their steps.
func (s *state) checkNodes() error {
	var errs []error
	if s.misplaced > 0 {
		errs = append(errs, fmt.Errorf("%d processes were placed on nodes that were joining, leaving or gone", s.misplaced))
	}
	conns := map[any]string{}
	usage := s.alloc.Usage()
	if len(usage) != len(s.nodes) {
		errs = append(errs, fmt.Errorf("slot table has %d nodes, node table %d", len(usage), len(s.nodes)))
		return errors.Join(errs...)
	}
	for i, n := range s.nodes {
		if n.idx != i {
			errs = append(errs, fmt.Errorf("node %s at position %d has index %d", n.name, i, n.idx))
		}
		if n.conn != nil {
			if other, ok := conns[n.conn]; ok {
				errs = append(errs, fmt.Errorf("nodes %s and %s share one daemon connection", other, n.name))
			}
			conns[n.conn] = n.name
		}
		if n.up != (n.conn != nil) {
			errs = append(errs, fmt.Errorf("node %s: up %v with connection %v", n.name, n.up, n.conn != nil))
		}
		if u := usage[i]; u.Used > u.Slots {
			errs = append(errs, fmt.Errorf("node %s uses %d of %d slots", n.name, u.Used, u.Slots))
		}
		if n.gone {
			if n.up || usage[i].Slots != 0 || usage[i].Used != 0 || usage[i].Over != 0 || !s.alloc.Gone(i) {
				errs = append(errs, fmt.Errorf("gone node %s: up %v, slot table %+v", n.name, n.up, usage[i]))
			}
			if s.nodeByName[n.name] == n {
				errs = append(errs, fmt.Errorf("gone node %s still found by name", n.name))
			}
			for _, j := range s.order {
				if r := s.liveOn(j, n); len(r) > 0 {
					errs = append(errs, fmt.Errorf("gone node %s has live ranks %v of job %s", n.name, r, j.ns))
				}
			}
		} else if s.nodeByName[n.name] != n {
			errs = append(errs, fmt.Errorf("node %s is not found by its name", n.name))
		}
		// Pushes go to the daemons that hold a job (node.hasJob): every
		// daemon with a live process of a job must be one of them.
		for _, j := range s.order {
			if n.up && !j.done && !n.hasJob(j) && len(s.liveOn(j, n)) > 0 {
				errs = append(errs, fmt.Errorf("node %s runs ranks %v of job %s but does not hold its data", n.name, s.liveOn(j, n), j.ns))
			}
		}
	}
	return errors.Join(errs...)
}
