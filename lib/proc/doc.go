// Package proc starts, watches and reaps the application processes of one
// node. It is the process-control edge of a node daemon: fork/exec with no
// shell, one process group per process, stdout/stderr forwarded line by line,
// exact exit reporting, and group-wide signals with a SIGTERM→SIGKILL
// escalation. Linux only.
//
// # Lifetime guarantees
//
// Every process is started with Setsid (it leads its own session and
// process group, so a signal reaches everything it forked, and it is
// scheduled as its own autogroup, as under mpiexec.hydra) and with Pdeathsig=SIGKILL, so it
// dies with the daemon. The kernel sends the parent-death signal when the
// *thread* that forked the child exits, not when the process does, and Go
// may terminate an OS thread (it does so when a goroutine exits while locked
// to its thread). All forks are therefore done by a small pool of spawner
// goroutines, each locked to its OS thread for good and never returning:
// those threads live exactly as long as the daemon. The pool grows only when
// every spawner is busy, up to Spawners() threads, so that a daemon starting
// many processes concurrently forks them in parallel (a fork blocks its
// thread until the child has exec'd). Go's fork code also covers the window
// where the daemon dies between fork and prctl (the child compares getppid
// and kills itself). Pdeathsig reaches only the direct child; grandchildren
// are not signalled when the daemon dies, and a set-user-ID program clears
// it. For them a daemon starts a Guard (guard.go): a watcher process that,
// once the daemon is gone however it ended, kills the process groups of
// the processes still registered and every process carrying the guard's
// secret mark in its environment. Where cgroup v2 is writable (root, or a
// delegated subtree), processes also start in a cgroup per Spec.GuardGroup
// (a job), which they cannot leave: the guard and Guard.EndGroup kill it
// with cgroup.kill (cgroup.go).
//
// # Signals and pid reuse
//
// A process is waited for with waitid(WNOWAIT) first, so its pid (and thus its
// process group id) stays pinned as a zombie while the package decides what to
// do; Signal holds the same lock as the final reap. A group signal can
// therefore never hit an unrelated process that reused the pid. When the
// leader exits, the rest of its group is sent SIGKILL (unless Spec.KeepGroup)
// so that stray descendants neither leak nor keep the output pipes open.
//
// # Waiting without threads
//
// Where the kernel supports pidfds (Linux 5.3+), the exit is awaited through
// Go's network poller on the pidfd, so a node with hundreds of running
// processes does not park hundreds of OS threads in wait calls. Without
// pidfds a goroutine blocks in waitid instead.
//
// The daemon must leave SIGCHLD at its default and must not reap with
// wait(-1) elsewhere: either would take exit statuses away from this package
// (they are then reported as unknown, exit code -1).
package proc
