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
