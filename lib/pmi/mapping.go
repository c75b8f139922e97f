package pmi

import (
	"strconv"
	"strings"

	"github.com/dynrt/dynrt/wire"
)

// PMI_process_mapping tells MPICH which ranks share a node (and so may use
// shared memory): `(vector,(S,C,P),...)`, each block meaning "C nodes from
// node id S on, P consecutive ranks on each". Ranks are dealt block by
// block; when the blocks run out before the ranks, dealing starts again at
// the first block whose S is 0 (MPICH's mpir_nodemap.h), which is how a
// cyclic placement stays short.

// ProcessMapping returns the mapping of a placement: node[r] is any label
// of the node of rank r (equal labels, same node). Node ids are given in
// order of first appearance, so rank 0 is on node 0 and the first block
// starts at 0. Runs of ranks become blocks, neighbouring blocks of the
// same width on consecutive nodes merge, and a placement that repeats
// itself is cut to its first period (wrap-around). An empty placement
// gives "".
func ProcessMapping(node []int) string {
	if len(node) == 0 {
		return ""
	}
	ids := make(map[int]int)
	runs := make([]block, 0, 4)
	for _, n := range node {
		id, ok := ids[n]
		if !ok {
			id = len(ids)
			ids[n] = id
		}
		if k := len(runs) - 1; k >= 0 && runs[k].start == id && runs[k].count == 1 {
			runs[k].size++
			continue
		}
		runs = append(runs, block{start: id, count: 1, size: 1})
	}
	blocks := mergeBlocks(runs)
	blocks = shortestPeriod(blocks, len(node))
	var sb strings.Builder
	sb.WriteString("(vector")
	for _, b := range blocks {
		sb.WriteString(",(")
		sb.WriteString(strconv.Itoa(b.start))
		sb.WriteByte(',')
		sb.WriteString(strconv.Itoa(b.count))
		sb.WriteByte(',')
		sb.WriteString(strconv.Itoa(b.size))
		sb.WriteByte(')')
	}
	sb.WriteByte(')')
	return sb.String()
}

type block struct{ start, count, size int }

// mergeBlocks joins runs of equal width on consecutive node ids.
func mergeBlocks(runs []block) []block {
	out := make([]block, 0, len(runs))
	for _, r := range runs {
		if k := len(out) - 1; k >= 0 {
			last := &out[k]
			if last.size == r.size && last.start+last.count == r.start && r.count == 1 {
				last.count++
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// shortestPeriod returns the shortest prefix of blocks (starting at node
// 0 and followed by a block starting at 0, as MPICH's wrap-around needs)
// that deals the n ranks exactly like the whole list.
func shortestPeriod(blocks []block, n int) []block {
	want := deal(blocks, n)
	for p := 1; p < len(blocks); p++ {
		if blocks[p].start != 0 || !repeats(blocks, p) {
			continue
		}
		if got := deal(blocks[:p], n); got != nil && equalInts(got, want) {
			return blocks[:p]
		}
	}
	return blocks
}

// repeats is a cheap first test for period p: every block but the last
// (which the ranks may fill only in part) equals its image in the first
// period.
func repeats(blocks []block, p int) bool {
	for i := p; i < len(blocks)-1; i++ {
		if blocks[i] != blocks[i%p] {
			return false
		}
	}
	return true
}

// deal assigns n ranks to node ids the way MPICH reads blocks; nil when
// the blocks cannot place them (no ranks, or a wrap without a block at 0).
func deal(blocks []block, n int) []int {
	out := make([]int, 0, n)
	wrapped := false
	for {
		i := 0
		if wrapped {
			for i < len(blocks) && blocks[i].start != 0 {
				i++
			}
		}
		progress := false
		for ; i < len(blocks); i++ {
			b := blocks[i]
			if b.start == 0 {
				wrapped = true
			}
			for node := b.start; node < b.start+b.count; node++ {
				for range b.size {
					out = append(out, node)
					progress = true
					if len(out) == n {
						return out
					}
				}
			}
		}
		if !progress || !wrapped {
			return nil
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ParseMapping reads a mapping for n ranks as MPICH 4.0.2 does and returns
// the node id of every rank. Whitespace is allowed; numbers are decimal
// (MPICH's strtol would read a leading 0 as octal, which ProcessMapping
// never produces, so such numbers are rejected).
func ParseMapping(s string, n int) ([]int, error) {
	bad := func(why string) error {
		return wire.Errorf(wire.ErrMalformed, "pmi: mapping %q: %s", clip([]byte(s)), why)
	}
	p := &mapParser{s: s}
	if !p.lit("(") || !p.lit("vector") {
		return nil, bad("want (vector,...)")
	}
	var blocks []block
	for p.lit(",") {
		if !p.lit("(") {
			return nil, bad("want ( at a block")
		}
		var v [3]int
		for i := range v {
			if i > 0 && !p.lit(",") {
				return nil, bad("want ,")
			}
			x, ok := p.num()
			if !ok {
				return nil, bad("want a number")
			}
			v[i] = x
		}
		if !p.lit(")") {
			return nil, bad("want ) after a block")
		}
		if v[1] < 1 || v[2] < 1 {
			return nil, bad("empty block")
		}
		blocks = append(blocks, block{v[0], v[1], v[2]})
	}
	if !p.lit(")") {
		return nil, bad("want ) at the end")
	}
	p.space()
	if p.i != len(s) {
		return nil, bad("trailing text")
	}
	if len(blocks) == 0 {
		return nil, bad("no blocks")
	}
	if n <= 0 {
		return []int{}, nil
	}
	out := deal(blocks, n)
	if out == nil {
		return nil, bad("does not place every rank")
	}
	return out, nil
}

type mapParser struct {
	s string
	i int
}

func (p *mapParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *mapParser) lit(t string) bool {
	p.space()
	if strings.HasPrefix(p.s[p.i:], t) {
		p.i += len(t)
		return true
	}
	return false
}

func (p *mapParser) num() (int, bool) {
	p.space()
	j := p.i
	for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' && j-p.i < 9 {
		j++
	}
	if j == p.i || (p.s[p.i] == '0' && j-p.i > 1) {
		return 0, false
	}
	n, _ := strconv.Atoi(p.s[p.i:j])
	p.i = j
	return n, true
}
