// Package master is the master of a DVM (DESIGN §2): the one owner of the
// DVM's state — nodes and slots, jobs and their processes, process sets,
// the event bus — and the server tools and daemons talk to.
//
// # Processes
//
// Start listens on <dir>/<id>/master.sock and on TCP (loopback by default),
// runs the daemon of node 0 inside this process (lib/daemon over the unix
// socket), starts the daemons of the other nodes through a launcher
// (lib/launcher: local virtual nodes, ssh, or join), waits until all have
// registered and only then writes the rendezvous file <dir>/<id>.json.
// Stop (or a dvm.stop request) kills every job, stops the daemons, closes
// the listeners and removes the file and the socket directory.
//
// # The loop
//
// One goroutine (run, loop.go) owns every piece of state in *state; no
// other goroutine reads or writes it, so there are no locks around it.
// Request handlers run in the wire connection's goroutines and reach the
// state only by posting closures:
//
//	ask(ctx, m, func(s *state, reply func(T, error)) { ... })  // answer now or later
//	do(ctx, m, func(s *state) error { ... })                     // answer now
//	m.post(func(s *state) { ... })                               // fire and forget
//
// reply may be kept and called later (a fence that completes when the last
// participant arrives, a lookup that waits for a key, job.wait). Code on
// the loop never blocks: requests to daemons go out in order through a
// per-node sender (nodeout.go) that posts their outcome back, and pushes
// to tools go through a per-connection queue (outq) that never blocks the
// loop. Loop code must
// not call post or ask itself (it would wait for itself).
//
// # Launching
//
// job.launch allocates slots (lib/alloc, stack policy), numbers the job,
// builds its process sets (lib/pset) and sends one concurrent round of
// calls: node.launch with the job data and sets (wire.LaunchReq, the same
// bytes for every node: each daemon starts the ranks the data places on
// it) to every node that runs ranks, down the tree of daemons when there
// is one (tree.go), and node.jobdata to the others. Exits and output come
// back as events; the job ends when its last process has ended: the exit
// code is the first failing process's, slots are freed, daemons drop the
// job's data, job.state is published and job.wait is answered (after the
// waiter's connection has been sent every output line of the job). A failing
// process aborts the job (node.kill: SIGTERM, SIGKILL after the grace)
// unless the job keeps going; so do job.kill, the job's time limit, the
// loss of the launching tool's connection and a DVM stop.
//
// # Resource changes
//
// rc.go runs the three phases of a resource change (DESIGN §5) on the
// loop: phase 1 in the order delta set defined on every daemon, job data
// pushed, record announced, then (ADD) the new processes launched; phase
// 2's set operations in psetop.go; phase 3's accept and confirm in
// rc_accept.go, through the publish/lookup store of pubsub.go; and every
// ABORTED path. Pushes to the daemons (sets, job data, change records) go
// through one ordered queue per node (psetop.go) and are acked before the
// step they stand for is taken as done. jobs.go calls in at two points:
// recordExit (an exit that belongs to a change is not a job failure) and
// endJob (the change in flight is aborted).
//
// # Nodes that join and leave
//
// grow.go adds nodes to the running DVM (dvm.grow, AddNodes with any
// launcher.Starter) and takes them out (dvm.shrink, Shrink), draining a
// node by a SUB of each job's ranks there through the engine above. A
// node keeps its index for the life of the DVM; one that left has no
// slots and is never placed on again.
//
// # Adding a session service
//
// Put the service in its own file: its state as fields of *state (or a
// struct it points to), its handlers registered in routes (routes.go) on
// m.daemonMux for requests that daemons relay for their processes
// (identity in the body is trusted: the daemon stamped it) or on m.toolMux
// for tools. Publish changes with s.publish(wire.Event{...}); deliver to
// subscribers other than tools with a sub whose deliver never blocks.
// Clean per-job state in endJob.
package master
