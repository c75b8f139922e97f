package daemon

import (
	"context"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/dynrt/dynrt/wire"
)

// routes registers every request kind the daemon serves. Session services
// living in their own files (kv.go, fence.go, pubsub.go, group.go,
// events.go) add one line here calling their own registration function.
func (d *Daemon) routes() {
	// From the master.
	wire.HandleTyped(d.fromMaster, wire.KindNodeLaunch, d.handleLaunch)
	wire.HandleTyped(d.fromMaster, wire.KindNodeKill, d.handleKill)
	wire.HandleTyped(d.fromMaster, wire.KindNodeStop, d.handleStop)
	wire.HandleTyped(d.fromMaster, wire.KindNodeJobData, d.handleJobData)
	wire.HandleTyped(d.fromMaster, wire.KindPsetPush, d.handlePsetPush)
	wire.HandleTyped(d.fromMaster, wire.KindJobStdin, d.handleStdin)
	wire.HandleTyped(d.fromMaster, wire.KindPing, d.handleHeartbeat)
	wire.HandleTyped(d.fromMaster, wire.KindPMIDead, d.handlePMIDead)
	wire.HandleTyped(d.fromMaster, wire.KindNodeRelay, d.handleRelay)
	// From other daemons, on the client socket: the master's tree (relay.go).
	wire.HandleTyped(d.clients, wire.KindNodeRelay, d.handlePeerRelay)

	// From application processes, answered here from the cache.
	wire.HandleTyped(d.clients, wire.KindSessionInit, d.handleSessionInit)
	wire.HandleTyped(d.clients, wire.KindSessionFinalize, d.handleSessionFin)
	wire.HandleTyped(d.clients, wire.KindPsetGet, d.handlePsetGet)
	wire.HandleTyped(d.clients, wire.KindPsetList, d.handlePsetList)
	wire.HandleTyped(d.clients, wire.KindPsetQuery, d.handlePsetQuery)
	wire.HandleTyped(d.clients, wire.KindPing, handlePing)

	// From application processes, relayed to the master.
	relay(d, wire.KindSessionAbort, func(b *wire.AbortReq, c Caller) { b.Job, b.Rank = c.Job, c.Rank })
	d.sessionRoutes()
	d.pmi = newPMIService(d)   // MPI programs: PMI over PMI_FD/PMI_PORT (pmi.go)
	d.pmix = newPMIxService(d) // Open MPI programs: PMIx (pmix.go)
	d.rcRoutes()
}

func handlePing(_ context.Context, _ *wire.Request, p *wire.Ping) (any, error) { return p, nil }

// relay registers a client request kind that the daemon forwards to the
// master: the body is decoded into a T, stamp overwrites the identity
// fields with the caller's (so a process cannot speak for another), and
// the master's reply, or error, goes back to the client unchanged. The
// master trusts identities in requests that arrive from a daemon.
func relay[T any](d *Daemon, kind string, stamp func(body *T, c Caller)) {
	wire.HandleTyped(d.clients, kind, func(ctx context.Context, req *wire.Request, body *T) (any, error) {
		c, err := CallerOf(req)
		if err != nil {
			return nil, err
		}
		stamp(body, c)
		return d.Relay(ctx, kind, body)
	})
}

// Relay sends a request to the master and returns its reply body
// undecoded, ready to be returned by a client handler.
func (d *Daemon) Relay(ctx context.Context, kind string, body any) (msgpack.RawMessage, error) {
	var reply wire.Raw // taken in one copy, not walked element by element
	if err := d.master.Call(ctx, kind, body, &reply); err != nil {
		return nil, err
	}
	return msgpack.RawMessage(reply), nil
}
