// Package top is dyntop's screen: a bubbletea model with pure Update and
// View and no I/O. cmd/dyntop feeds it messages (a snapshot of the DVM,
// batches of events from the master's bus, refreshed jobs and sets, the
// clock, the loss of the connection) and runs the commands it returns (a
// resource-change request, the next clock tick) through functions given
// in Config, so tests drive it with fake data, a fake clock and a fixed
// colour profile.
//
// The screen (thesis fig. 7.1 and 6.1 in a terminal): a header with the
// DVM's id, uptime, slot and node bars and job and change counts; the node
// × slot map coloured by job; the jobs table; the process-set tree of the
// selected job; the resource-change panel with the time of every step; the
// event log; a key line. Enter opens the selected job full screen.
package top

import (
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Snapshot is a full picture of the DVM (dvm.state plus the changes).
type Snapshot struct {
	State wire.DVMState
	Name  string    // DVM name from the rendezvous file
	RCs   []wire.RC // nil: use State.RCs
	At    time.Time // when it was taken (clock of the caller)
}

// SnapshotMsg delivers a snapshot.
type SnapshotMsg Snapshot

// EventsMsg delivers events from the bus, in order. The feeder batches
// them so that a fast stream costs one update and one frame per batch.
type EventsMsg []wire.Event

// JobMsg delivers a fresh description of one job.
type JobMsg wire.JobInfo

// PsetsMsg delivers the sets of one job, with members.
type PsetsMsg struct {
	Job  string
	Sets []wire.PsetInfo
}

// SlotsMsg delivers a fresh slot map (dvm.state's Slots), fetched after
// events that move processes. Nil from a master that does not send one.
type SlotsMsg []wire.SlotUse

// TickMsg moves the model's clock.
type TickMsg time.Time

// LostMsg says the connection to the master is gone.
type LostMsg struct {
	At  time.Time
	Err error
}

// ReconnectedMsg says the feeder is attached again (after --wait); a
// SnapshotMsg follows.
type ReconnectedMsg struct {
	ID string // DVM id now attached to
}

// RCResultMsg is the outcome of an add/sub request made from the keys.
type RCResultMsg struct {
	RC  wire.RC
	Err error
}
