package main

import "math"

// The work of thesis listing 8.1, read physically (§8.1.1): a body thrown
// at speed v0 and angle β from (x0, y0) flies a parabola; the time interval
// [0, horizon) is cut into problem-size sampling points, and the work counts
// the points at which the body is inside a box. Every process counts the
// points of its own slice, so the sum over the processes is the same
// whatever their number: the check that a resize lost or doubled no work.
const (
	v0      = 25.0 // m/s
	beta    = math.Pi / 3
	gravity = 9.81
	x0, y0  = 0.0, 1.5
	horizon = 4.5 // s
	xMin    = 12.0
	xMax    = 40.0
	yMin    = 8.0
	yMax    = 30.0
)

// partition is the half-open slice [lo, hi) of the sampling points that
// process rank of n works on (listing 8.1's rebalance): equal parts, the
// last one taking the remainder.
func partition(problem int64, rank, n int) (lo, hi int64) {
	size := problem / int64(n)
	lo = size * int64(rank)
	hi = lo + size
	if rank == n-1 {
		hi = problem
	}
	return lo, hi
}

// work counts the sampling points in [lo, hi) at which the body is inside
// the box (listing 8.1's work_step, about ten floating-point operations per
// point). The time of point i depends on i and problem only, never on the
// slice, so every split gives the same total.
func work(problem, lo, hi int64) int64 {
	dt := horizon / float64(problem)
	vx, vy := v0*math.Cos(beta), v0*math.Sin(beta)
	var n int64
	for i := lo; i < hi; i++ {
		t := float64(i) * dt
		x := vx*t + x0
		y := vy*t - gravity/2*t*t + y0
		if x > xMin && x < xMax && y > yMin && y < yMax {
			n++
		}
	}
	return n
}
