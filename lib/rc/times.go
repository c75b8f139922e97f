package rc

import (
	"fmt"
	"sort"
	"time"
)

// Step is one recorded moment in the life of a resource change.
type Step uint8

// Steps in their usual order. The order is also the tie-break when two
// steps carry the same timestamp.
const (
	StepRequested Step = iota
	StepDeltaDefined
	StepJobDataPushed
	StepAnnounced
	StepAllStarted
	StepAcceptPublished
	StepConfirmed
	StepFinalized
	StepEnforced
	StepAllExited
	StepAborted
	numSteps
)

var stepNames = [numSteps]string{
	"requested", "delta_defined", "job_data_pushed", "announced", "all_started",
	"accept_published", "confirmed", "finalized", "enforced", "all_exited", "aborted",
}

func (s Step) String() string {
	if s < numSteps {
		return stepNames[s]
	}
	return fmt.Sprintf("Step(%d)", uint8(s))
}

// MarshalText makes JSON show the name rather than a number.
func (s Step) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText is the inverse of MarshalText.
func (s *Step) UnmarshalText(b []byte) error {
	for i, n := range stepNames {
		if n == string(b) {
			*s = Step(i)
			return nil
		}
	}
	return fmt.Errorf("unknown resource change step %q", b)
}

// Times holds the timestamp of every step; a zero time means "not reached".
// For a SUB, AcceptPublished is the first accept (each accept is also listed
// in Info.Accepts); Finalized is the accept that completed the count.
type Times struct {
	Requested       time.Time `json:"requested,omitzero"`
	DeltaDefined    time.Time `json:"delta_defined,omitzero"`
	JobDataPushed   time.Time `json:"job_data_pushed,omitzero"`
	Announced       time.Time `json:"announced,omitzero"`
	AllStarted      time.Time `json:"all_started,omitzero"`
	AcceptPublished time.Time `json:"accept_published,omitzero"`
	Confirmed       time.Time `json:"confirmed,omitzero"`
	Finalized       time.Time `json:"finalized,omitzero"`
	Enforced        time.Time `json:"enforced,omitzero"`
	AllExited       time.Time `json:"all_exited,omitzero"`
	Aborted         time.Time `json:"aborted,omitzero"`
}

func (t *Times) field(s Step) *time.Time {
	switch s {
	case StepRequested:
		return &t.Requested
	case StepDeltaDefined:
		return &t.DeltaDefined
	case StepJobDataPushed:
		return &t.JobDataPushed
	case StepAnnounced:
		return &t.Announced
	case StepAllStarted:
		return &t.AllStarted
	case StepAcceptPublished:
		return &t.AcceptPublished
	case StepConfirmed:
		return &t.Confirmed
	case StepFinalized:
		return &t.Finalized
	case StepEnforced:
		return &t.Enforced
	case StepAllExited:
		return &t.AllExited
	case StepAborted:
		return &t.Aborted
	}
	panic(fmt.Sprintf("rc: no such step %d", s))
}

// At returns the time of step s (zero if not reached).
func (t Times) At(s Step) time.Time { return *t.field(s) }

// StepTime is one row of Durations.
type StepTime struct {
	Step         Step          `json:"step"`
	At           time.Time     `json:"at"`
	SincePrev    time.Duration `json:"since_prev"`    // from the previous recorded step
	SinceRequest time.Duration `json:"since_request"` // from the request
}

// Durations lists the recorded steps in time order (ties in step order) with
// the time from the previous step and from the request: the numbers
// `dynrc show` prints. Steps that were not reached are left out.
func (t Times) Durations() []StepTime {
	out := make([]StepTime, 0, numSteps)
	for s := StepRequested; s < numSteps; s++ {
		if at := t.At(s); !at.IsZero() {
			out = append(out, StepTime{Step: s, At: at})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	for i := range out {
		if i > 0 {
			out[i].SincePrev = out[i].At.Sub(out[i-1].At)
		}
		if !t.Requested.IsZero() {
			out[i].SinceRequest = out[i].At.Sub(t.Requested)
		}
	}
	return out
}
