package main

import (
	"strconv"
	"strings"

	"github.com/dynrt/dynrt/wire"
)

// Request is one entry of --schedule: at step Step, the root asks the
// runtime for a change of its own job.
type Request struct {
	Step  int
	Type  string // wire.RCAdd or wire.RCSub
	N     int    // processes to add or remove (SUB by rank: len(Ranks))
	Ranks []int  // SUB: exactly these communicator ranks (as at Step, once the changes asked for before have ended)
}

// parseSchedule reads "STEP:+N", "STEP:-N" and "STEP:-rA/B/..." items
// separated by commas, e.g. "20:+2,40:-1,60:-r1/2". Steps must increase
// and lie in [1, steps). Removing communicator rank 0 is refused: the root
// runs the schedule.
func parseSchedule(s string, steps int) ([]Request, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []Request
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		st, what, ok := strings.Cut(item, ":")
		if !ok || what == "" {
			return nil, wire.Errorf(wire.ErrInvalid, "schedule item %q: want STEP:+N, STEP:-N or STEP:-rA/B", item)
		}
		step, err := strconv.Atoi(st)
		if err != nil || step < 1 || step >= steps {
			return nil, wire.Errorf(wire.ErrInvalid, "schedule item %q: step must be a number in [1, %d)", item, steps)
		}
		if len(out) > 0 && step <= out[len(out)-1].Step {
			return nil, wire.Errorf(wire.ErrInvalid, "schedule item %q: steps must increase", item)
		}
		r := Request{Step: step}
		switch {
		case what[0] == '+':
			r.Type = wire.RCAdd
		case what[0] == '-':
			r.Type = wire.RCSub
		default:
			return nil, wire.Errorf(wire.ErrInvalid, "schedule item %q: the change must start with + or -", item)
		}
		arg := what[1:]
		if r.Type == wire.RCSub && strings.HasPrefix(arg, "r") {
			for _, f := range strings.Split(arg[1:], "/") {
				k, err := strconv.Atoi(f)
				if err != nil || k < 0 {
					return nil, wire.Errorf(wire.ErrInvalid, "schedule item %q: bad rank %q", item, f)
				}
				if k == 0 {
					return nil, wire.Errorf(wire.ErrInvalid, "schedule item %q: rank 0 runs the schedule and cannot be removed", item)
				}
				r.Ranks = append(r.Ranks, k)
			}
			r.N = len(r.Ranks)
		} else {
			n, err := strconv.Atoi(arg)
			if err != nil || n <= 0 {
				return nil, wire.Errorf(wire.ErrInvalid, "schedule item %q: want a positive number of processes", item)
			}
			r.N = n
		}
		out = append(out, r)
	}
	return out, nil
}
