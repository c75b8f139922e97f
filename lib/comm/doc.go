// Package comm gives malleable applications communicators over process
// sets. A communicator is built from one version of a set plus a tag: its
// ranks 0..n-1 follow the members' job ranks, its context id comes from
// the runtime's group construction, and its messages travel over direct
// process-to-process connections (unix sockets on one host, TCP across
// hosts) that every communicator of the process shares. Point to point
// (blocking and not), barrier, broadcast, gather, reduce and their "all"
// forms, and the agreement that phase 3 of a resource change runs over a
// communicator (Agreement: session.Session.Accept with Over, thesis
// listing 6.5). docs/comm.md has an example adapt loop, the
// transport, the matching rules and what happens when a peer fails.
package comm
