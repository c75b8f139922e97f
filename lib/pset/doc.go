// Package pset keeps the process sets of one dynrt job (DESIGN.md §4;
// thesis §6.1.3 and §6.3).
//
// It is pure logic: no I/O, no goroutines, no locks. The master owns one
// Registry per job inside its event loop, which serialises every call, and
// pushes each definition, new version and deletion reported here to the
// daemons.
//
// Names. Parse accepts mpi://WORLD, mpi://SELF, mpi://SHARED,
// mpi://app/<app>[/<name>...] (the application domain) and
// mpi://rte/<app>/rc/<n> (delta sets of resource changes). Operands may
// carry "@<version>" to name one exact earlier membership (ParseRef).
//
// Sets. Members are ranks of the job stored as roaring bitmaps. Every
// version of a set is kept (until PruneVersions) so that a (name, version)
// pair always means the same membership. mpi_ps_version starts at 0 and
// grows by one whenever the members change; mpi_ps_epoch follows
// Definition 1; mpi_ps_active and the mpi_ps_sched_* hints are attributes
// of the set, not of a version.
//
// Predefined sets. mpi://WORLD (the processes started at launch) is
// read-only. mpi://app/<app> starts with the same members; it cannot be
// deleted, but the application may update it like its other sets, since
// for application-level resource changes it is the set the application
// keeps current (and the thesis's example marks it inactive). mpi://SELF
// and mpi://SHARED differ per process and are not stored: Get refuses them,
// the daemon answers them from what it knows of the caller, and ApplyOp
// resolves them as operands from OpRequest.Caller.
//
// Responsibilities. The registry never changes an active set on its own
// (the application manages those); it changes inactive sets through the
// recursion of Definition 4 in ApplyOp and through ApplyDeltaToInactive.
// Malleable, RefCounted and RecursivelyAffected give Definitions 2-4 for
// the runtime to bind resource changes.
//
// Split. Registry.Split divides one set into parts (by count, by explicit
// rank lists that partition it, or by node from the placement the caller
// supplies) and stores each part as a set in one step. It changes
// no other set: it has no delta operand, so nothing is recursively
// affected.
package pset
