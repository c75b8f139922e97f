package master

import (
	"context"

	"github.com/dynrt/dynrt/wire"
)

// routes registers every request kind the master serves, by the role of
// the connection it comes from. Session services in their own files
// (kv.go, fence.go, pubsub.go, group.go, events.go) add one line here
// calling their registration function.
func (m *Master) routes() {
	// From daemons: their own business, and requests relayed for their
	// application processes (identity already stamped by the daemon).
	wire.HandleTyped(m.daemonMux, wire.KindNodeRegister, m.handleRegister)
	wire.HandleTyped(m.daemonMux, wire.KindSessionAbort, m.handleAbort)
	wire.HandleTyped(m.daemonMux, wire.KindPing, handlePing)
	// Set queries about a job the daemon does not hold (node.hasJob).
	wire.HandleTyped(m.daemonMux, wire.KindPsetGet, m.handlePsetGet)
	wire.HandleTyped(m.daemonMux, wire.KindPsetList, m.handlePsetList)
	wire.HandleTyped(m.daemonMux, wire.KindPsetQuery, m.handlePsetQuery)

	// From tools.
	wire.HandleTyped(m.toolMux, wire.KindJobLaunch, m.handleLaunch)
	wire.HandleTyped(m.toolMux, wire.KindJobWait, m.handleWait)
	wire.HandleTyped(m.toolMux, wire.KindJobKill, m.handleKill)
	wire.HandleTyped(m.toolMux, wire.KindJobState, m.handleJobState)
	wire.HandleTyped(m.toolMux, wire.KindJobList, m.handleJobList)
	wire.HandleTyped(m.toolMux, wire.KindJobStdin, m.handleStdin)
	wire.HandleTyped(m.toolMux, wire.KindDVMState, m.handleState)
	wire.HandleTyped(m.toolMux, wire.KindDVMStop, m.handleStop)
	wire.HandleTyped(m.toolMux, wire.KindDVMGrow, m.handleGrow)
	wire.HandleTyped(m.toolMux, wire.KindDVMShrink, m.handleShrink)
	wire.HandleTyped(m.toolMux, wire.KindEventSub, m.handleEventSub)
	wire.HandleTyped(m.toolMux, wire.KindEventUnsub, m.handleEventUnsub)
	wire.HandleTyped(m.toolMux, wire.KindPsetGet, m.handlePsetGet)
	wire.HandleTyped(m.toolMux, wire.KindPsetList, m.handlePsetList)
	wire.HandleTyped(m.toolMux, wire.KindPsetQuery, m.handlePsetQuery)
	wire.HandleTyped(m.toolMux, wire.KindPing, handlePing)
	m.sessionRoutes()
	m.rcRoutes()
	m.pmiRoutes()
}

func handlePing(_ context.Context, _ *wire.Request, p *wire.Ping) (any, error) { return p, nil }
