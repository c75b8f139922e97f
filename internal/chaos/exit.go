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
}

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
	var allowed []int
	var why []string
	add := func(code int, what string) {
		if !slices.Contains(allowed, code) {
			allowed = append(allowed, code)
		}
		why = append(why, what)
	}
	if f.NotRun {
		// "dynrun could not run the job": 1.
		return []int{1}, "the launch was refused"
	}
	for _, fl := range f.Failures {
		add(fl.Code, fl.What)
		if fl.Sure {
			if f.KeepGoing && f.EndedBy != "" {
				// With --keep-going the job runs on: dynrun, killed
				// later, may report the signal that ended it.
				add(sigTermed, "then "+f.EndedBy+" (keep-going)")
			}
			slices.Sort(allowed)
			return allowed, strings.Join(why, "; ")
		}
	}
	if f.EndedBy != "" {
		add(sigTermed, f.EndedBy)
	}
	slices.Sort(allowed)
	if len(why) == 0 {
		why = append(why, "the job ended by itself without any fault")
	}
	return allowed, strings.Join(why, "; ")
}
