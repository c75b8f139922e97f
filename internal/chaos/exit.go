package chaos

import (
	"slices"
	"strings"
	"syscall"
)

// What the harness did to a job, for the exit status its dynrun must
// have (docs/dynrun.md, "Exit status"): the first failing process's code,
// 128+n for signal n; 143 for a job dynrun killed on SIGTERM or that the
// DVM's stop killed.
type ExitFacts struct {
	// Failures are the faults that hit the job's processes, in order.
	Failures []JobFailure
	// EndedBy says how the harness ended the job: EndTerm (SIGTERM to
	// its dynrun), EndDVMStop, or "" (it has not: the job ended by
	// itself).
	EndedBy string
	// KeepGoing: the job was launched with --keep-going.
	KeepGoing bool
	// NotRun: dynrun ended before the master had the job running (the
	// launch was refused, no free slots, or a node was lost while its
	// processes started).
	NotRun bool
	// Shrink: the job was launched with --on-failure shrink; its losses
	// are failure changes, not failures (docs/rc.md "Failures as
	// changes"). EndStep is the step in which the harness ended it, and
	// Report what dynrun printed last.
	Shrink  bool
	EndStep int
	Report  string
}

// CannotKeep is what the master says when a shrink job lost every
// process: the one way a malleable shrink job in the harness may end
// because of a loss (its program always accepts changes).
const CannotKeep = "every process of the job was lost"

// CannotReplace, ReplaceFailed and NobodyToAccept are what the master
// says when a job under --on-failure replace cannot be kept: no free
// slots for the new processes (a full DVM that lost a node), the new
// processes failed too, or every member of the set that held the lost
// ranks was lost, so no member is left to accept the REPLACE (a split
// job's part on one node) (docs/rc.md "Failures as changes").
const (
	CannotReplace  = "no new processes can replace them"
	ReplaceFailed  = "the processes that were to replace them failed"
	NobodyToAccept = "so nobody could accept their replacement"
)

// How the harness ended a job (ExitFacts.EndedBy).
const (
	EndTerm    = "sigterm to dynrun"
	EndDVMStop = "dvm stop"
)

// JobFailure is one fault that hit a process of a job.
type JobFailure struct {
	Code int // the process's status as the rule counts it: 128+9 for kill -9
	// Sure says the fault is a failure of the job whatever the timing
	// (an established member killed, a node lost with its ranks); not sure
	// when the runtime may count it as part of a change instead (a new
	// process of an ADD not yet FINALIZED dies: the ADD aborts) or may not
	// see it at all (a daemon stopped for about the failure timeout).
	Sure bool
	Step int // the step that injected it
	What string
}

// SigKilled is the status of a process killed by kill -9.
const SigKilled = 128 + int(syscall.SIGKILL)

// sigTermed is the status of a job killed on SIGTERM (dynrun's own, or
// the DVM's stop).
const sigTermed = 128 + int(syscall.SIGTERM)

// ExitRule returns the exit statuses the documented rule allows for a job
// with these facts, and a description of why.
func ExitRule(f ExitFacts) ([]int, string) {
	r := &rule{}
	if f.NotRun {
		// "dynrun could not run the job": 1.
		return []int{1}, "the launch was refused"
	}
	if f.Shrink {
		return shrinkRule(f)
	}
	for _, fl := range f.Failures {
		r.add(fl.Code, fl.What)
		if fl.Sure {
			if f.KeepGoing && f.EndedBy != "" {
				// With --keep-going the job runs on: dynrun, killed
				// later, may report the signal that ended it.
				r.add(sigTermed, "then "+f.EndedBy+" (keep-going)")
			}
			return r.result()
		}
	}
	if f.EndedBy != "" {
		r.add(sigTermed, f.EndedBy)
	}
	if len(r.why) == 0 {
		r.why = append(r.why, "the job ended by itself without any fault")
	}
	return r.result()
}

// shrinkRule is ExitRule for a job with --on-failure shrink: a loss is a
// failure change, so the job ends as the harness ended it (143) or by
// itself (0), unless every process was lost (the status of the loss it
// could not be kept after, 137 here: the last). A loss in the step that ended the job may be judged
// as a failure, as under abort: the job was being killed.
func shrinkRule(f ExitFacts) ([]int, string) {
	r := &rule{}
	if f.EndedBy != "" {
		r.add(sigTermed, f.EndedBy+" (shrink: its losses were failure changes)")
		for _, fl := range f.Failures {
			if fl.Step == f.EndStep {
				r.add(fl.Code, fl.What+" in the step that ended the job (judged as a failure while it was being killed)")
			}
		}
	} else {
		r.add(0, "ended by itself (shrink: its losses were failure changes)")
	}
	if strings.Contains(f.Report, CannotKeep) {
		r.addLast(f.Failures, "every process was lost: the job could not be kept")
	}
	if strings.Contains(f.Report, CannotReplace) || strings.Contains(f.Report, ReplaceFailed) || strings.Contains(f.Report, NobodyToAccept) {
		r.addLast(f.Failures, "replace: the lost processes could not be replaced, so the job could not be kept")
	}
	return r.result()
}

// addLast allows the statuses of the losses of the last step that had
// any: under shrink and replace the earlier ones became failure changes
// and the job went on; the last is the one it could not be kept after,
// and dynrun ends with its status.
func (r *rule) addLast(fs []JobFailure, why string) {
	if len(fs) == 0 {
		return
	}
	last := fs[len(fs)-1].Step
	for _, fl := range fs {
		if fl.Step == last {
			r.add(fl.Code, why)
		}
	}
}

// rule collects the statuses a rule allows, each with why.
type rule struct {
	allowed []int
	why     []string
}

func (r *rule) add(code int, what string) {
	if !slices.Contains(r.allowed, code) {
		r.allowed = append(r.allowed, code)
	}
	r.why = append(r.why, what)
}

func (r *rule) result() ([]int, string) {
	slices.Sort(r.allowed)
	return r.allowed, strings.Join(r.why, "; ")
}
