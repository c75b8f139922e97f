// Package comm gives malleable applications communicators over process
// sets. A communicator is built from one version of a set plus a tag: its
// ranks 0..n-1 follow the members' job ranks, its context id comes from
// the runtime's group construction, and its messages travel over direct
// process-to-process connections (unix sockets on one host, TCP across
// hosts) that every communicator of the process shares. Point to point
// (blocking and not), barrier, broadcast, gather, reduce and their "all"
// forms, and phase 3 of a resource change over a communicator (AcceptRC,
// thesis listing 6.5). docs/comm.md has an example adapt loop, the
// transport, the matching rules and what happens when a peer fails.
package comm
