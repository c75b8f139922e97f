// Package wire is the one protocol of dynrt: tools, daemons, the master and
// application processes all speak it over unix sockets or TCP. It must not
// import anything from lib/.
//
// A connection carries frames (a 4-byte big-endian length and one msgpack
// envelope {v, id, kind, body, err}). After a handshake (Dial/Client on the
// dialing side, Accept or Server on the accepting side) both sides may send
// requests: the dialer uses odd ids, the acceptor even ids, and id 0 marks an
// event that gets no reply. Conn multiplexes concurrent calls over one
// connection, serves the peer's requests through a Handler (see Mux and
// HandleTyped) and delivers events in order.
//
// The msg_*.go files hold the message catalogue: plain structs with short,
// stable msgpack keys and a Kind* constant per message kind; Catalogue lists
// them. Errors carry a stable code (errors.go) that survives the wire, so
// errors.Is(err, wire.ErrBusy) works on errors returned by a peer.
//
// docs/wire.md describes the protocol for implementers in other languages;
// its reference half is generated from this package by its tests.
package wire
