// Package daemon is the node daemon of a DVM (DESIGN §2): one per node,
// started by the master through a launcher (`dynrun daemon`) or, for the
// master's own node, run in the master process.
//
// A daemon connects to the master (role "daemon"), registers its node, and
// then serves two sides:
//
//   - the master: node.launch forks the ranks of a job on this node (the job
//     data and its initial sets ride along, see wire.LaunchReq), node.kill
//     signals them (SIGTERM, then SIGKILL after a grace period), node.stop
//     ends the daemon, node.jobdata and pset.push keep the local cache
//     current. Every exit (or failure to start) is reported with a
//     proc.exited event and every output line with a proc.output event, on
//     the one connection, so the master sees a process's lines before its
//     exit.
//   - application processes (role "client", lib/session) on a unix socket
//     <dir>/<dvm>/<node>.sock, whose path they find in $DYNRT_DAEMON. A
//     client says who it is in its hello (ClientName: "<job>/<rank>"); the
//     daemon admits it only if that process runs here and the connecting
//     pid is the process or belongs to its process group. Static queries
//     (session.init, pset.get/list/query incl. mpi://SELF and mpi://SHARED)
//     are answered from the cache without asking the master, and so are
//     the queries of resource changes (rc.query, from the records the
//     master pushes with rc.push; rc.go). Phase 3 of a change (rc.accept,
//     rc.confirm) is one request per process: the daemon fences, waits
//     for the root's answer and forwards on the process's behalf
//     (rc_accept.go; docs/wire.md, "Phase 3").
//
// Processes are forked directly (lib/proc: no shell, own process group,
// Pdeathsig) and are terminated before Run returns, whether the master
// stopped the daemon, the context was canceled or the master was lost.
// A guard process (proc.Guard) kills what they leave behind: when the
// daemon is gone however it ended (kill -9 included), and for a job's
// processes when the master says the job is gone.
//
// # Adding a session service
//
// A service lives in its own file with a registration function called from
// routes (routes.go). Requests answered locally use wire.HandleTyped on
// d.clients and CallerOf(req) for the verified identity of the caller.
// Requests the master must answer use relay(d, kind, stamp): the body is
// decoded, stamp writes the caller's job and rank into it, and the master's
// reply is passed back unchanged; d.Relay does the same for handlers that
// need to do more. Daemon state is guarded by d.mu; hold it only briefly
// and never across a call to the master.
package daemon
