// Package pmi speaks the process-manager side of MPICH's "simple PMI" wire
// protocols, so that unmodified MPI programs can start under dynrt's node
// daemons (docs/mpi.md; the field notes are in shared/pmi-wire.md).
//
// It is protocol only: no sockets, no processes. The pieces are
//
//   - PMI-1 lines (ParseLine, AppendLine): `cmd=name key=value ...\n`, with
//     the client's limits (MaxReply, MaxTokens) enforced on what we send;
//   - PMI-2 frames (ReadFrame, ParseFrame, AppendFrame): a 6-character
//     decimal length, then `key=value;` pairs with `;;` escaping, tolerant
//     of the MPICH 4.0.x client's left-aligned header and the 6 junk bytes
//     it appends to every request;
//   - spawn requests of both protocols decoded into one Spawn value
//     (SpawnCollector for PMI-1's multi-line mcmd=spawn, ParseSpawn2);
//   - ProcessMapping, the PMI_process_mapping string of a placement, and
//     ParseMapping, MPICH's reading of it (used to check the former);
//   - Serve, which runs one client connection from its first bytes (PMI-1
//     or PMI-2 is detected like Hydra does) to finalize, EOF or a protocol
//     error, and asks a Handler (the daemon) for everything that needs the
//     runtime: key-value data, barriers, names, spawn, abort.
//
// Malformed input never panics and never leaves a client waiting for an
// answer that cannot come: a request that can be answered gets an error
// reply, a stream that cannot be followed any more ends Serve with an
// error, and the daemon then closes the connection (which makes the client
// fail fast rather than hang).
package pmi
