package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

func TestBlock(t *testing.T) {
	tests := []struct {
		rows, n int
		want    []Range
	}{
		{10, 1, []Range{{0, 10}}},
		{10, 3, []Range{{0, 4}, {4, 7}, {7, 10}}},
		{10, 4, []Range{{0, 3}, {3, 6}, {6, 8}, {8, 10}}},
		{5, 5, []Range{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}}},
		{64, 6, []Range{{0, 11}, {11, 22}, {22, 33}, {33, 44}, {44, 54}, {54, 64}}},
	}
	for _, tc := range tests {
		var got []Range
		for k := range tc.n {
			got = append(got, Block(tc.rows, tc.n, k))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Block(%d, %d): %v, want %v", tc.rows, tc.n, got, tc.want)
		}
	}
}

// TestPlanExamples pins who sends which rows to whom for a few changes.
func TestPlanExamples(t *testing.T) {
	blocks := func(rows, n, extra int) []Range {
		var out []Range
		for k := range n {
			out = append(out, Block(rows, n, k))
		}
		return append(out, make([]Range, extra)...)
	}
	tests := []struct {
		name   string
		rows   int
		cur    []Range
		stay   []bool
		target []Range
		moves  []Move
	}{
		{
			name: "grow 2 to 4", rows: 8, cur: blocks(8, 2, 2), stay: []bool{true, true, true, true},
			target: []Range{{0, 2}, {2, 4}, {4, 6}, {6, 8}},
			moves:  []Move{{0, 0, Range{0, 2}}, {0, 1, Range{2, 4}}, {1, 2, Range{4, 6}}, {1, 3, Range{6, 8}}},
		},
		{
			name: "shrink 3 to 2, the last leaves", rows: 9, cur: blocks(9, 3, 0), stay: []bool{true, true, false},
			target: []Range{{0, 5}, {5, 9}, {}},
			moves:  []Move{{0, 0, Range{0, 3}}, {1, 0, Range{3, 5}}, {1, 1, Range{5, 6}}, {2, 1, Range{6, 9}}},
		},
		{
			name: "shrink 4 to 2, the root's neighbours leave", rows: 8, cur: blocks(8, 4, 0), stay: []bool{true, false, true, false},
			target: []Range{{0, 4}, {}, {4, 8}, {}},
			moves:  []Move{{0, 0, Range{0, 2}}, {1, 0, Range{2, 4}}, {2, 2, Range{4, 6}}, {3, 2, Range{6, 8}}},
		},
		{
			name: "no change", rows: 7, cur: blocks(7, 2, 0), stay: []bool{true, true},
			target: []Range{{0, 4}, {4, 7}},
			moves:  []Move{{0, 0, Range{0, 4}}, {1, 1, Range{4, 7}}},
		},
		{
			name: "everything to one new member", rows: 4, cur: []Range{{0, 4}, {}}, stay: []bool{false, true},
			target: []Range{{}, {0, 4}},
			moves:  []Move{{0, 1, Range{0, 4}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			target, moves, err := Plan(tc.rows, tc.cur, tc.stay)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(target, tc.target) {
				t.Errorf("targets %v, want %v", target, tc.target)
			}
			if !slices.Equal(moves, tc.moves) {
				t.Errorf("moves %v, want %v", moves, tc.moves)
			}
		})
	}
}

func TestPlanRejects(t *testing.T) {
	tests := []struct {
		name string
		rows int
		cur  []Range
		stay []bool
	}{
		{"lengths differ", 4, []Range{{0, 4}}, []bool{true, true}},
		{"nobody stays", 4, []Range{{0, 2}, {2, 4}}, []bool{false, false}},
		{"gap", 4, []Range{{0, 1}, {2, 4}}, []bool{true, true}},
		{"overlap", 4, []Range{{0, 3}, {2, 4}}, []bool{true, true}},
		{"out of order", 4, []Range{{2, 4}, {0, 2}}, []bool{true, true}},
		{"short", 4, []Range{{0, 3}}, []bool{true}},
		{"more processes than rows", 2, []Range{{0, 2}, {}, {}}, []bool{true, true, true}},
	}
	for _, tc := range tests {
		if _, _, err := Plan(tc.rows, tc.cur, tc.stay); !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", tc.name, err)
		}
	}
}

// TestPlanProperties checks many grows and shrinks: every row ends at
// exactly one owner, the owners hold contiguous blocks in rank order, each
// row comes from the process that held it, and processes that leave hold
// nothing.
func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := 0
	for _, rows := range []int{1, 2, 3, 7, 16, 64, 101} {
		for nOld := 1; nOld <= min(rows, 12); nOld++ {
			for nNew := 1; nNew <= min(rows, 12); nNew++ {
				// A grow (nNew > nOld) appends new members, a shrink picks
				// random leavers; equal sizes keep everyone.
				var cur []Range
				var stay []bool
				for k := range nOld {
					cur = append(cur, Block(rows, nOld, k))
				}
				switch {
				case nNew >= nOld:
					cur = append(cur, make([]Range, nNew-nOld)...)
					stay = slices.Repeat([]bool{true}, nNew)
				default:
					stay = make([]bool, nOld)
					for _, k := range rng.Perm(nOld)[:nNew] {
						stay[k] = true
					}
				}
				checkPlan(t, fmt.Sprintf("rows %d %d→%d stay %v", rows, nOld, nNew, stay), rows, cur, stay)
				cases++
			}
		}
	}
	if cases < 400 {
		t.Fatalf("only %d cases", cases)
	}
}

func checkPlan(t *testing.T, name string, rows int, cur []Range, stay []bool) {
	t.Helper()
	target, moves, err := Plan(rows, cur, stay)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	owner := make([]int, rows)
	for i := range owner {
		owner[i] = -1
	}
	for _, m := range moves {
		for r := m.Rows.Lo; r < m.Rows.Hi; r++ {
			if r < cur[m.From].Lo || r >= cur[m.From].Hi {
				t.Fatalf("%s: move %v sends row %d that member %d does not hold", name, m, r, m.From)
			}
			if r < target[m.To].Lo || r >= target[m.To].Hi {
				t.Fatalf("%s: move %v sends row %d that member %d will not hold", name, m, r, m.To)
			}
			if owner[r] != -1 {
				t.Fatalf("%s: row %d moves to %d and %d", name, r, owner[r], m.To)
			}
			owner[r] = m.To
		}
	}
	for r, o := range owner {
		if o == -1 {
			t.Fatalf("%s: row %d has no owner", name, r)
		}
	}
	// Contiguous and in order over the staying members, sizes differing by
	// at most one; leavers hold nothing.
	next, k, nStay := 0, 0, 0
	for _, s := range stay {
		if s {
			nStay++
		}
	}
	for i, tr := range target {
		if !stay[i] {
			if tr.Len() != 0 {
				t.Fatalf("%s: leaving member %d gets %v", name, i, tr)
			}
			continue
		}
		if tr.Lo != next || tr != Block(rows, nStay, k) {
			t.Fatalf("%s: member %d gets %v after row %d (staying member %d)", name, i, tr, next, k)
		}
		if d := tr.Len() - rows/nStay; d < 0 || d > 1 {
			t.Fatalf("%s: member %d gets %d rows of %d over %d", name, i, tr.Len(), rows, nStay)
		}
		next, k = tr.Hi, k+1
	}
	if next != rows {
		t.Fatalf("%s: owners cover rows up to %d of %d", name, next, rows)
	}
}
