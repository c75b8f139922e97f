// Package rc holds the resource-change (RC) record of a dynamic job and the
// state machine that drives it (thesis §6.2–§6.4, DESIGN §5).
//
// An RC is named by its delta set (mpi://rte/<app>/rc/<n>). Its status moves
// NULL → ANNOUNCED → PENDING → FINALIZED, or to ABORTED from any status that
// is not final. Every step the runtime takes is recorded with a timestamp the
// caller supplies, so tests are deterministic and tools can print the time
// spent in each phase.
//
// The package is pure bookkeeping: no I/O, no goroutines, no locks. It is
// meant to be owned by the master's event loop; nothing here is safe for
// concurrent use.
//
// # Steps and when they may be recorded
//
// The methods of *RC are the only way to change an RC. Each one checks the
// type and the status and fails with wire.ErrState (naming the delta) rather
// than doing nothing:
//
//	step              method         types         allowed in                  effect
//	requested         New            all           —                           status NULL
//	delta defined     DefineDelta    ADD, SUB      NULL, once                  ranks and bound sets fixed
//	                  DefineReplace  REPLACE       NULL, once                  new and replaced ranks, one bound set
//	job data pushed   PushJobData    all           NULL, after delta defined
//	announced         Announce       all           NULL, after job data pushed NULL → ANNOUNCED
//	all started       AllStarted     ADD, REPLACE  ANNOUNCED/PENDING/FINALIZED
//	accept published  Accept         all           ANNOUNCED; SUB also PENDING
//	confirmed         Confirm        ADD, REPLACE  PENDING                     PENDING → FINALIZED
//	enforced          Enforce        SUB, REPLACE  SUB: PENDING/FINALIZED; REPLACE: FINALIZED; once (grace period ran out)
//	all exited        AllExited      SUB, REPLACE  as Enforce, once
//	aborted           Abort          all           NULL/ANNOUNCED/PENDING      → ABORTED
//
// Why these windows: new processes are launched only after the announcement
// (DESIGN §5 phase 1), and their "all started" report reaches the master on a
// different path from their confirmation, so it may arrive after FINALIZED.
// Delta members of a SUB are told to terminate by the accepts, so they can
// exit while later bound sets still have to accept (PENDING) or after the RC
// is FINALIZED. ABORTED is final for everything; FINALIZED is final for the
// status and only admits those two late reports.
//
// An RC may also be aborted while still NULL (phase 1 failed before the
// announcement, or a queued request was dropped): that keeps the reason
// visible to tools instead of losing the request.
//
// Timestamps must not go backwards: a step stamped before the latest
// recorded one is rejected with wire.ErrInvalid, so durations are never
// negative.
//
// # Accepts
//
// ADD: the RC is bound to one (malleable) set; one accept from it moves
// ANNOUNCED → PENDING, and the confirmation of the new processes moves
// PENDING → FINALIZED.
//
// SUB: the RC is bound to the reference-counted sets X_c(U) of its delta.
// Each bound set accepts once. The first accept moves ANNOUNCED → PENDING;
// the accept that completes |X_c(U)| distinct accepts moves to FINALIZED (so
// with a single bound set one Accept call goes straight through PENDING to
// FINALIZED and records both). A second accept from a set that already
// accepted is an error (wire.ErrState), not an idempotent no-op: the client
// library publishes the accept once and then polls for the confirmation, so
// a repeat means a bug or a confused peer and must be visible. An accept
// from a set the RC is not bound to is wire.ErrInvalid.
package rc

import (
	"fmt"
	"strings"

	"github.com/dynrt/dynrt/wire"
)

// Type is the kind of a resource change.
type Type uint8

// Types. TypeNull is what a query answers when no change is available.
// TypeReplace (the thesis's future work, §6.6) replaces processes by as
// many new ones in one change: its delta set holds the new processes, and
// the replaced ones are listed beside it (RC.Out). It runs like an ADD
// (one bound set accepts, the new processes confirm) and then, once
// FINALIZED, lets the replaced processes go like a SUB.
const (
	TypeNull Type = iota
	TypeAdd
	TypeSub
	TypeReplace
)

var typeNames = [...]string{"NULL", "ADD", "SUB", "REPLACE"}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// ParseType accepts the names printed by String in any case ("add", "Sub").
func ParseType(s string) (Type, error) {
	for i, n := range typeNames {
		if strings.EqualFold(s, n) {
			return Type(i), nil
		}
	}
	return 0, wire.Errorf(wire.ErrInvalid, "unknown resource change type %q (want add, sub or replace)", s)
}

// MarshalText makes JSON show the name rather than a number.
func (t Type) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText is the inverse of MarshalText.
func (t *Type) UnmarshalText(b []byte) error {
	v, err := ParseType(string(b))
	if err == nil {
		*t = v
	}
	return err
}

// Status is where a resource change stands.
type Status uint8

// Statuses (thesis §6.2.2).
const (
	StatusNull Status = iota
	StatusAnnounced
	StatusPending
	StatusFinalized
	StatusAborted
)

var statusNames = [...]string{"NULL", "ANNOUNCED", "PENDING", "FINALIZED", "ABORTED"}

// Statuses lists every status in declaration order (for tables and tests).
func Statuses() []Status {
	return []Status{StatusNull, StatusAnnounced, StatusPending, StatusFinalized, StatusAborted}
}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// ParseStatus accepts the names printed by String in any case.
func ParseStatus(s string) (Status, error) {
	for i, n := range statusNames {
		if strings.EqualFold(s, n) {
			return Status(i), nil
		}
	}
	return 0, wire.Errorf(wire.ErrInvalid, "unknown resource change status %q", s)
}

// MarshalText makes JSON show the name rather than a number.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText is the inverse of MarshalText.
func (s *Status) UnmarshalText(b []byte) error {
	v, err := ParseStatus(string(b))
	if err == nil {
		*s = v
	}
	return err
}

// Terminal reports whether no further transition is possible.
func (s Status) Terminal() bool { return s == StatusFinalized || s == StatusAborted }

// CheckTransition returns nil when from → to is a legal status change and a
// wire.ErrState error naming both statuses and the delta otherwise. It is
// the single table every method of *RC consults. A status never transitions
// to itself.
func CheckTransition(from, to Status, delta string) error {
	ok := false
	switch from {
	case StatusNull:
		ok = to == StatusAnnounced || to == StatusAborted
	case StatusAnnounced:
		ok = to == StatusPending || to == StatusAborted
	case StatusPending:
		ok = to == StatusFinalized || to == StatusAborted
	}
	if !ok {
		return wire.Errorf(wire.ErrState, "resource change %s: illegal transition %s -> %s", delta, from, to)
	}
	return nil
}

// RequesterKind says who asked for a resource change.
type RequesterKind uint8

// Requester kinds (DESIGN §5 triggers).
const (
	ByTool RequesterKind = iota
	ByApp
	ByScheduler
	// ByRuntime: the runtime itself, e.g. a failure turned into a SUB
	// under a job's shrink policy.
	ByRuntime
)

var requesterNames = [...]string{"tool", "app", "scheduler", "runtime"}

func (k RequesterKind) String() string {
	if int(k) < len(requesterNames) {
		return requesterNames[k]
	}
	return fmt.Sprintf("RequesterKind(%d)", uint8(k))
}

// ParseRequesterKind accepts the names printed by String in any case.
func ParseRequesterKind(s string) (RequesterKind, error) {
	for i, n := range requesterNames {
		if strings.EqualFold(s, n) {
			return RequesterKind(i), nil
		}
	}
	return 0, wire.Errorf(wire.ErrInvalid, "unknown requester kind %q (want tool, app, scheduler or runtime)", s)
}

// MarshalText makes JSON show the name rather than a number.
func (k RequesterKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText is the inverse of MarshalText.
func (k *RequesterKind) UnmarshalText(b []byte) error {
	v, err := ParseRequesterKind(string(b))
	if err == nil {
		*k = v
	}
	return err
}

// Requester identifies who asked for a change. Rank is meaningful only for
// ByApp (the rank of the requesting process); Name is free text such as the
// tool's name or the user.
type Requester struct {
	Kind RequesterKind `json:"kind"`
	Rank uint32        `json:"rank"`
	Name string        `json:"name,omitempty"`
}

func (r Requester) String() string {
	switch {
	case r.Kind == ByApp:
		return fmt.Sprintf("app(rank %d)", r.Rank)
	case r.Name != "":
		return r.Kind.String() + "(" + r.Name + ")"
	}
	return r.Kind.String()
}

// DeltaName is the delta-set name of the n-th resource change of app
// (DESIGN §4 runtime domain).
func DeltaName(app string, n int) string {
	return fmt.Sprintf("mpi://rte/%s/rc/%d", app, n)
}
