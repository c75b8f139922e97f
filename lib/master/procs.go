package master

import (
	"maps"
	"slices"
)

// procTable is a job's table of processes by rank. Ranks are never
// reused, so a job that grows and shrinks forever would grow a plain slice
// forever: the table keeps ranks in chunks and frees a chunk once every
// rank in it has been forgotten (rcRetain forgets the ended processes of
// the changes it forgets; processes of a job that never changes are never
// forgotten). The next rank, len, keeps counting whatever is forgotten.
type procTable struct {
	next   uint32
	chunks map[uint32]*procChunk
}

const procChunkSize = 256

type procChunk struct {
	p     [procChunkSize]jproc
	known int
}

// len returns the number of ranks handed out: the next rank.
func (t *procTable) len() int { return int(t.next) }

// at returns the process of rank r, or nil when r was never handed out or
// has been forgotten.
func (t *procTable) at(r uint32) *jproc {
	if r >= t.next {
		return nil
	}
	c := t.chunks[r/procChunkSize]
	if c == nil {
		return nil
	}
	if p := &c.p[r%procChunkSize]; p.state != "" {
		return p
	}
	return nil
}

// add appends the process of the next rank and returns that rank. p.state
// must be set (an empty state marks a free entry).
func (t *procTable) add(p jproc) uint32 {
	r := t.next
	t.next++
	if t.chunks == nil {
		t.chunks = make(map[uint32]*procChunk)
	}
	c := t.chunks[r/procChunkSize]
	if c == nil {
		c = &procChunk{}
		t.chunks[r/procChunkSize] = c
	}
	c.p[r%procChunkSize] = p
	c.known++
	return r
}

// known returns how many ranks have an entry.
func (t *procTable) known() int {
	n := 0
	for _, c := range t.chunks {
		n += c.known
	}
	return n
}

// forget drops the entry of rank r.
func (t *procTable) forget(r uint32) {
	p := t.at(r)
	if p == nil {
		return
	}
	*p = jproc{}
	c := t.chunks[r/procChunkSize]
	if c.known--; c.known == 0 {
		delete(t.chunks, r/procChunkSize)
	}
}

// rewind sets the next rank back to next after the entries from next on
// were forgotten (an aborted ADD gives back ranks no member ever had); it
// reports false, changing nothing, if one is still known.
func (t *procTable) rewind(next uint32) bool {
	for r := next; r < t.next; r++ {
		if t.at(r) != nil {
			return false
		}
	}
	t.next = min(t.next, next)
	return true
}

// each calls f for every known rank in ascending order.
func (t *procTable) each(f func(r uint32, p *jproc)) {
	for _, k := range slices.Sorted(maps.Keys(t.chunks)) {
		c := t.chunks[k]
		for i := range c.p {
			if p := &c.p[i]; p.state != "" {
				f(k*procChunkSize+uint32(i), p)
			}
		}
	}
}
