// Package simnode simulates the processes of a node, so that one host
// can run the daemons of a thousand nodes (issue 16, docs/scale.md).
//
// What is real: the node daemon (lib/daemon) with all its code, its
// connection to the master over a unix or TCP socket, the wire protocol,
// and the session library (lib/session) of the simulated processes, whose
// connections to their daemon go through an in-memory pipe (net.Pipe)
// instead of a unix socket, so that 65,536 processes do not need 131,072
// file descriptors.
//
// What is simulated: fork and exec. A Spawner runs each process as a Go
// function (a Program, chosen by the base name of the program path) on a
// goroutine, with the environment the daemon built for it. Its pid is
// made up, from 1<<22 up, above Linux's largest pid_max, so that it never
// names a real process. A signal with a default action of "terminate"
// cancels the program's context and the process then counts as killed by
// that signal; SIGCONT, SIGCHLD, SIGURG and SIGWINCH are ignored, and
// SIGSTOP/SIGTSTP are not simulated (ignored). Simulated processes cannot
// speak PMI or PMIx (no MPI library runs in them), and their stdin is
// not read.
package simnode
