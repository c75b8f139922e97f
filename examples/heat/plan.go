package main

import (
	"fmt"

	"github.com/dynrt/dynrt/wire"
)

// Range is a half-open interval of grid rows [Lo, Hi).
type Range struct{ Lo, Hi int }

// Len is the number of rows in r (0 for an empty or inverted range).
func (r Range) Len() int { return max(0, r.Hi-r.Lo) }

// Intersect is the rows r and o have in common.
func (r Range) Intersect(o Range) Range {
	x := Range{max(r.Lo, o.Lo), min(r.Hi, o.Hi)}
	if x.Len() == 0 {
		return Range{}
	}
	return x
}

// Block is part k of rows split over n parts: contiguous, in order, the
// first rows%n parts one row longer. Every process derives the same
// decomposition from (rows, n) alone, so no one has to send it.
func Block(rows, n, k int) Range {
	q, rem := rows/n, rows%n
	lo := k*q + min(k, rem)
	hi := lo + q
	if k < rem {
		hi++
	}
	return Range{lo, hi}
}

// Move sends rows Rows from member From to member To (indices into the
// member list of the communicator the moves run over). From == To is a
// copy inside one process.
type Move struct {
	From, To int
	Rows     Range
}

// Plan is the redistribution after a change, over the communicator that
// holds every process before and after it (the new one for a grow, the old
// one for a shrink). cur[i] is what member i holds now (empty for a new
// process); stay[i] says whether it holds rows afterwards. The staying
// members, in rank order, get Block(rows, #staying, k); every row moves
// from its current holder to its new one. It returns the new ranges (empty
// for leavers) and the moves, ordered by (From, To).
func Plan(rows int, cur []Range, stay []bool) ([]Range, []Move, error) {
	if len(cur) != len(stay) {
		return nil, nil, wire.Errorf(wire.ErrInvalid, "heat: plan: %d ranges for %d members", len(cur), len(stay))
	}
	if err := checkTiling(rows, cur); err != nil {
		return nil, nil, err
	}
	n := 0
	for _, s := range stay {
		if s {
			n++
		}
	}
	if n == 0 {
		return nil, nil, wire.Errorf(wire.ErrInvalid, "heat: plan: no process stays")
	}
	if n > rows {
		return nil, nil, wire.Errorf(wire.ErrInvalid, "heat: %d processes for %d rows: every process needs at least one row", n, rows)
	}
	target := make([]Range, len(cur))
	k := 0
	for i, s := range stay {
		if s {
			target[i] = Block(rows, n, k)
			k++
		}
	}
	var moves []Move
	for from, c := range cur {
		for to, t := range target {
			if x := c.Intersect(t); x.Len() > 0 {
				moves = append(moves, Move{From: from, To: to, Rows: x})
			}
		}
	}
	return target, moves, nil
}

// checkTiling verifies that the non-empty ranges of cur cover [0, rows)
// exactly once, in member order (the block decomposition keeps owners
// contiguous and ordered).
func checkTiling(rows int, cur []Range) error {
	next := 0
	for i, c := range cur {
		if c.Len() == 0 {
			continue
		}
		if c.Lo != next {
			return wire.Errorf(wire.ErrInvalid, "heat: plan: member %d holds rows %d-%d, expected them to start at %d", i, c.Lo, c.Hi-1, next)
		}
		next = c.Hi
	}
	if next != rows {
		return wire.Errorf(wire.ErrInvalid, "heat: plan: the members hold rows up to %d of %d", next, rows)
	}
	return nil
}

func (r Range) String() string {
	if r.Len() == 0 {
		return "-"
	}
	return fmt.Sprintf("%d-%d", r.Lo, r.Hi-1)
}

// Buddies chooses, for every member of a communicator (nodes[k] is the
// node of rank k), the member that keeps a copy of its rows: the next rank
// after it, cyclically, on another node, so that losing a whole node never
// loses a partition together with its copy. When every member runs on one
// node, the next rank is chosen anyway (a lost process is covered, a lost
// node is not: apart says false). A communicator of one process has no
// buddy (-1).
func Buddies(nodes []string) (buddy []int, apart bool) {
	n := len(nodes)
	buddy = make([]int, n)
	apart = true
	for k := range nodes {
		buddy[k] = -1
		for d := 1; d < n; d++ {
			if j := (k + d) % n; nodes[j] != nodes[k] {
				buddy[k] = j
				break
			}
		}
		if buddy[k] < 0 && n > 1 {
			buddy[k], apart = (k+1)%n, false
		}
	}
	if n < 2 {
		apart = false
	}
	return buddy, apart
}

// Held is a piece of the grid a member holds in its checkpoint store:
// rows Rows as they were after Step steps (its own rows or a copy of a
// buddy's).
type Held struct {
	Step int
	Rows Range
}

// Restorable is the latest step at which the pieces held (by member)
// cover every one of rows rows: the last complete checkpoint the
// survivors can roll back to. ok is false when none covers them.
func Restorable(rows int, held [][]Held) (step int, ok bool) {
	steps := map[int]bool{}
	for _, hs := range held {
		for _, h := range hs {
			steps[h.Step] = true
		}
	}
	step = -1
	for s := range steps {
		if s > step && covered(rows, held, s) {
			step = s
		}
	}
	return step, step >= 0
}

// covered says whether the pieces at step cover [0, rows).
func covered(rows int, held [][]Held, step int) bool {
	for r := 0; r < rows; {
		next := r
		for _, hs := range held {
			for _, h := range hs {
				if h.Step == step && h.Rows.Lo <= r && h.Rows.Hi > next {
					next = h.Rows.Hi
				}
			}
		}
		if next == r {
			return false
		}
		r = next
	}
	return true
}

// RecoverPlan is the redistribution after a failure: every one of the n
// members (survivors, and new processes that hold nothing) gets
// Block(rows, n, k), filled from the pieces held at step. A member's own
// pieces are used first (no message), else the lowest member holding the
// row. The moves are ordered by destination, then row.
func RecoverPlan(rows int, held [][]Held, step int) ([]Range, []Move, error) {
	n := len(held)
	if n == 0 || n > rows {
		return nil, nil, wire.Errorf(wire.ErrInvalid, "heat: %d processes for %d rows: every process needs at least one row", n, rows)
	}
	source := func(to, r int) (int, Range) {
		if x, ok := holding(held[to], step, r); ok {
			return to, x
		}
		for i := range held {
			if x, ok := holding(held[i], step, r); ok {
				return i, x
			}
		}
		return -1, Range{}
	}
	target := make([]Range, n)
	var moves []Move
	for to := range n {
		target[to] = Block(rows, n, to)
		for r := target[to].Lo; r < target[to].Hi; {
			from, x := source(to, r)
			if from < 0 {
				return nil, nil, wire.Errorf(wire.ErrState, "heat: no member holds row %d as of step %d", r, step)
			}
			x = Range{r, min(x.Hi, target[to].Hi)}
			moves = append(moves, Move{From: from, To: to, Rows: x})
			r = x.Hi
		}
	}
	return target, moves, nil
}

// holding finds the piece of hs at step that holds row r.
func holding(hs []Held, step, r int) (Range, bool) {
	for _, h := range hs {
		if h.Step == step && h.Rows.Lo <= r && r < h.Rows.Hi {
			return h.Rows, true
		}
	}
	return Range{}, false
}
