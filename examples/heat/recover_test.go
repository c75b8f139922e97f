package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBuddies(t *testing.T) {
	tests := []struct {
		nodes []string
		want  []int
		apart bool
	}{
		{[]string{"a"}, []int{-1}, false},
		{[]string{"a", "a"}, []int{1, 0}, false}, // one node: a lost process is covered, a lost node is not
		{[]string{"a", "b"}, []int{1, 0}, true},
		{[]string{"a", "a", "b", "b"}, []int{2, 2, 0, 0}, true},
		{[]string{"a", "b", "c", "d"}, []int{1, 2, 3, 0}, true},
		{[]string{"a", "a", "a", "b"}, []int{3, 3, 3, 0}, true},
		{[]string{"a", "b", "a", "b", "c"}, []int{1, 2, 3, 4, 0}, true},
	}
	for _, tc := range tests {
		got, apart := Buddies(tc.nodes)
		if !slices.Equal(got, tc.want) || apart != tc.apart {
			t.Errorf("Buddies(%v) = %v apart %v, want %v apart %v", tc.nodes, got, apart, tc.want, tc.apart)
		}
		for k, b := range got {
			if tc.apart && tc.nodes[b] == tc.nodes[k] {
				t.Errorf("Buddies(%v): %d and its buddy %d share node %s", tc.nodes, k, b, tc.nodes[k])
			}
		}
	}
}

func TestRestorable(t *testing.T) {
	h := func(step, lo, hi int) Held { return Held{step, Range{lo, hi}} }
	tests := []struct {
		name string
		held [][]Held
		want int // -1: none
	}{
		{"nothing", [][]Held{{}, {}}, -1},
		{"one member, all rows", [][]Held{{h(10, 0, 8)}}, 10},
		{"latest complete", [][]Held{{h(10, 0, 4), h(20, 0, 4)}, {h(10, 4, 8), h(20, 4, 8)}}, 20},
		{"latest incomplete: fall back", [][]Held{{h(10, 0, 4), h(20, 0, 4)}, {h(10, 4, 8)}}, 10},
		{"a hole in the middle", [][]Held{{h(10, 0, 3)}, {h(10, 4, 8)}}, -1},
		{"overlapping pieces (two decompositions at one step)", [][]Held{{h(5, 0, 5)}, {h(5, 3, 8)}}, 5},
		{"pieces of several members chain", [][]Held{{h(7, 6, 8)}, {h(7, 0, 2)}, {h(7, 2, 6)}}, 7},
	}
	for _, tc := range tests {
		got, ok := Restorable(8, tc.held)
		if !ok {
			got = -1
		}
		if got != tc.want {
			t.Errorf("%s: step %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestRecoverPlanExamples pins the moves for the loss of one of four
// members, whose rows its buddy holds.
func TestRecoverPlanExamples(t *testing.T) {
	// 8 rows over 4 members, member 2 lost; member 3 is its buddy. The
	// survivors hold their own rows and the copies of their wards.
	held := [][]Held{
		{{10, Range{0, 2}}, {10, Range{6, 8}}}, // 0: own, copy of 3's
		{{10, Range{2, 4}}, {10, Range{0, 2}}}, // 1: own, copy of 0's
		{{10, Range{6, 8}}, {10, Range{4, 6}}}, // 3: own, copy of 2's (lost)
	}
	target, moves, err := RecoverPlan(8, held, 10)
	if err != nil {
		t.Fatal(err)
	}
	wantT := []Range{{0, 3}, {3, 6}, {6, 8}}
	wantM := []Move{
		{0, 0, Range{0, 2}}, {1, 0, Range{2, 3}},
		{1, 1, Range{3, 4}}, {2, 1, Range{4, 6}},
		{2, 2, Range{6, 8}},
	}
	if !slices.Equal(target, wantT) || !slices.Equal(moves, wantM) {
		t.Errorf("target %v moves %v, want %v %v", target, moves, wantT, wantM)
	}
	if _, _, err := RecoverPlan(8, held[:2], 10); err == nil {
		t.Error("rows 4-5 held by nobody: no error")
	}
	// A new process (REPLACE) holds nothing and gets its block.
	target, moves, err = RecoverPlan(8, append(held, nil), 10)
	if err != nil || target[3] != (Range{6, 8}) || moves[len(moves)-1] != (Move{0, 3, Range{6, 8}}) {
		t.Errorf("with a new member: %v %v %v", target, moves, err)
	}
}

// TestRecoverySimulated runs the stencil over blocks in one process with
// buddy checkpoints, loses members (one at a time, or a whole "node" of
// two), rolls back with Restorable and RecoverPlan and goes on: the final
// grid equals the serial one bit for bit, as the processes' must.
func TestRecoverySimulated(t *testing.T) {
	const nx, ny, steps = 29, 13, 50
	want := serial(nx, ny, steps)
	tests := []struct {
		n0    int
		every int
		loss  map[int][]int // at step: the members lost (indices of the current members)
	}{
		{4, 5, map[int][]int{12: {2}}},
		{4, 5, map[int][]int{12: {0}, 31: {1}}},  // the root, then a second loss with new buddies
		{6, 7, map[int][]int{20: {2, 3}}},        // a "node" of two
		{5, 10, map[int][]int{10: {4}, 11: {0}}}, // right after a checkpoint, then at once again
		{3, 4, map[int][]int{49: {1}, 50: {0}}},  // late: rolls back over the end
		{8, 3, map[int][]int{1: {7}, 2: {0, 1}}}, // before the second checkpoint, then a node
		// -1: lost before the first checkpoint was taken (rows of step 0
		// come from the initial condition), then later again.
		{4, 5, map[int][]int{-1: {1}, 7: {0}}},
		{6, 4, map[int][]int{-1: {2, 3}}}, // a "node" with its buddy pair
	}
	for i, tc := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			got := simulate(t, nx, ny, steps, tc.n0, tc.every, tc.loss)
			if d, err := MaxDiff(want, got); err != nil || d != 0 {
				t.Errorf("max difference %g (%v), want 0", d, err)
			}
		})
	}
}

// simulate is heat with --buddy in one process: members are blocks with
// a node each (two members per node), checkpoint stores are ckStores.
func simulate(t *testing.T, nx, ny, steps, n0, every int, loss map[int][]int) Grid {
	t.Helper()
	type member struct {
		b    *block
		node string
		ck   ckStore
	}
	ms := make([]*member, n0)
	for k := range ms {
		ms[k] = &member{b: newBlock(nx, ny, Block(nx, n0, k)), node: fmt.Sprint("node", k/2), ck: ckStore{last: -1, nx: nx, ny: ny}}
		ms[k].b.fill()
	}
	step := 0
	checkpoint := func() {
		nodes := make([]string, len(ms))
		for k, m := range ms {
			nodes[k] = m.node
		}
		buddy, _ := Buddies(nodes)
		ps := make([][]piece, len(ms))
		for k, m := range ms {
			own := piece{Held{step, m.b.rows}, m.b.held(m.b.rows)}
			ps[k] = append(ps[k], own)
			if buddy[k] >= 0 {
				ps[buddy[k]] = append(ps[buddy[k]], piece{own.Held, slices.Clone(own.vals)})
			}
		}
		for k, m := range ms {
			m.ck.add(step, ps[k])
		}
	}
	if lost, ok := loss[-1]; ok {
		delete(loss, -1)
		loss[0] = lost // handled at step 0 with no checkpoint taken
	} else {
		checkpoint()
	}
	for step < steps || loss[step] != nil {
		if lost := loss[step]; lost != nil {
			delete(loss, step)
			var surv []*member
			for k, m := range ms {
				if !slices.Contains(lost, k) {
					surv = append(surv, m)
				}
			}
			held := make([][]Held, len(surv))
			for i, m := range surv {
				held[i] = m.ck.held()
			}
			s, ok := Restorable(nx, held)
			if !ok {
				t.Fatalf("step %d: nothing to restore after losing %v", step, lost)
			}
			target, moves, err := RecoverPlan(nx, held, s)
			if err != nil {
				t.Fatal(err)
			}
			nbs := make([]*block, len(surv))
			for i := range surv {
				nbs[i] = newBlock(nx, ny, target[i])
			}
			for _, mv := range moves {
				vals, err := surv[mv.From].ck.rows(s, mv.Rows, ny)
				if err != nil {
					t.Fatal(err)
				}
				nbs[mv.To].put(mv.Rows.Lo, vals)
			}
			for i, m := range surv {
				m.b = nbs[i]
			}
			ms, step = surv, s
			checkpoint()
			continue
		}
		for i, m := range ms {
			b := m.b
			if i > 0 {
				b.put(b.rows.Lo-1, ms[i-1].b.held(Range{b.rows.Lo - 1, b.rows.Lo}))
			}
			if i < len(ms)-1 {
				b.put(b.rows.Hi, ms[i+1].b.held(Range{b.rows.Hi, b.rows.Hi + 1}))
			}
		}
		for _, m := range ms {
			m.b.step()
		}
		step++
		if step%every == 0 {
			checkpoint()
		}
	}
	g := Grid{NX: nx, NY: ny, Steps: steps}
	for _, m := range ms {
		g.V = append(g.V, m.b.held(m.b.rows)...)
	}
	return g
}

// TestRecoverPlanProperties: for random holdings that cover the grid,
// every member ends with its block, every row comes from a member that
// holds it, and a member's own pieces are used before anyone else's.
func TestRecoverPlanProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 4))
	for range 300 {
		rows := 5 + r.IntN(60)
		n := 1 + r.IntN(min(rows, 9))
		held := make([][]Held, n)
		// Cut the grid in random pieces, each held by one or two members.
		for lo := 0; lo < rows; {
			hi := min(rows, lo+1+r.IntN(9))
			for range 1 + r.IntN(2) {
				k := r.IntN(n)
				held[k] = append(held[k], Held{3, Range{lo, hi}})
			}
			lo = hi
		}
		target, moves, err := RecoverPlan(rows, held, 3)
		if err != nil {
			t.Fatalf("rows %d held %v: %v", rows, held, err)
		}
		got := make([][]int, n)
		for _, m := range moves {
			for row := m.Rows.Lo; row < m.Rows.Hi; row++ {
				if _, ok := holding(held[m.From], 3, row); !ok {
					t.Fatalf("move %v: member %d does not hold row %d", m, m.From, row)
				}
				if _, own := holding(held[m.To], 3, row); own && m.From != m.To {
					t.Fatalf("move %v: member %d holds row %d itself", m, m.To, row)
				}
				got[m.To] = append(got[m.To], row)
			}
		}
		for k := range n {
			if target[k] != Block(rows, n, k) {
				t.Fatalf("member %d gets %v, want %v", k, target[k], Block(rows, n, k))
			}
			var want []int
			for row := target[k].Lo; row < target[k].Hi; row++ {
				want = append(want, row)
			}
			if !slices.Equal(got[k], want) {
				t.Fatalf("member %d receives rows %v, want %v", k, got[k], want)
			}
		}
	}
}

func TestCkStore(t *testing.T) {
	var s ckStore
	p := func(step, lo, hi int) piece {
		vals := make([]float64, (hi-lo)*2)
		for i := range vals {
			vals[i] = float64(step*1000 + lo*2 + i)
		}
		return piece{Held{step, Range{lo, hi}}, vals}
	}
	s.add(10, []piece{p(10, 0, 4), p(10, 4, 6)})
	s.add(20, []piece{p(20, 0, 3)})
	s.add(20, []piece{p(20, 2, 6)}) // the same step again (after a change): kept beside
	s.add(30, []piece{p(30, 0, 6)}) // drops step 10
	if got := s.held(); !slices.Equal(got, []Held{{20, Range{0, 3}}, {20, Range{2, 6}}, {30, Range{0, 6}}}) {
		t.Errorf("held %v", got)
	}
	if s.last != 30 {
		t.Errorf("last checkpoint %d, want 30", s.last)
	}
	v, err := s.rows(20, Range{1, 3}, 2)
	if err != nil || !slices.Equal(v, []float64{20002, 20003, 20004, 20005}) {
		t.Errorf("rows 2-3 at 20: %v %v", v, err)
	}
	if _, err := s.rows(10, Range{0, 1}, 2); err == nil {
		t.Error("rows of a dropped checkpoint: no error")
	}
}
