package main

import "github.com/dynrt/dynrt/wire"

// change is one resource change the application asks for itself.
type change struct {
	Type string // wire.RCAdd or wire.RCSub
	N    int
}

// plan lists the changes of a run with --trigger app, after thesis §8.2:
//
//   - inc: n_delta processes at a time from start towards limit (the last
//     change smaller if n_delta does not divide the distance);
//   - step: step i changes by i·n_delta towards limit and back again, for
//     i = 1, 2, … while i·n_delta fits between start and limit, so the job
//     is back at start after every step.
func plan(mode string, start, limit, delta int) []change {
	if delta <= 0 || start == limit {
		return nil
	}
	toward, back := wire.RCAdd, wire.RCSub
	dist := limit - start
	if dist < 0 {
		toward, back, dist = wire.RCSub, wire.RCAdd, -dist
	}
	var out []change
	switch mode {
	case modeInc:
		for done := 0; done < dist; done += delta {
			out = append(out, change{toward, min(delta, dist-done)})
		}
	case modeStep:
		for i := 1; i*delta <= dist; i++ {
			out = append(out, change{toward, i * delta}, change{back, i * delta})
		}
	}
	return out
}
