// Package alloc places the processes of jobs on the slots of a DVM using the
// stack policy of thesis fig. 7.1, and hands out ranks.
//
// The slots of all nodes are numbered in one global order: node 0 has slots
// 0..s0-1, node 1 the next s1 slots, and so on. A job grows into the lowest
// free slots and shrinks from its highest ones, so nodes join a job as it
// grows and leave it again as it shrinks.
//
// Ranks come from a per-job counter that only goes up: a rank freed by a SUB
// is never handed out again (thesis §7.4.3, DESIGN §3), so a job's ranks can
// have holes.
//
// # Placement
//
// MapBySlot (the default) takes the lowest free slots in global order.
// MapByNode deals processes round robin over the nodes that still have a
// free slot, starting at node 0 on every call and taking the lowest free
// slot of each node, like `mpirun --map-by node`. Ranks are given in
// placement order.
//
// Without Oversubscribe, a request larger than the number of free slots
// fails with wire.ErrNoResources and changes nothing. With it, the free
// slots are used first (by the MapBy rule) and every remaining process goes,
// one at a time, to the node that holds the fewest oversubscribed processes
// at that moment (ties go to the lowest node index). That is a round robin
// over all nodes that stays balanced across calls. Such a process has Slot
// Oversubscribed (-1): it sits on the node, but on no slot.
//
// When a slot frees up on a node that carries oversubscribed processes, the
// oldest of them takes that slot over (only the bookkeeping changes; the
// process does not move). So a node has oversubscribed processes only while
// all its slots are used, and the free count never counts a slot that is
// physically busy.
//
// # Removal
//
// Victims picks the processes a SUB removes: the job's oversubscribed
// processes first (highest rank first), then those on the highest global
// slots. VictimsRanks checks caller-named ranks. Neither changes anything;
// Release frees the chosen processes and ReleaseJob drops a whole job.
//
// An Alloc is plain data owned by the master's event loop: no I/O, no
// goroutines, not safe for concurrent use.
package alloc

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/dynrt/dynrt/wire"
)

// Oversubscribed is the Slot of a process placed beyond its node's slots.
const Oversubscribed = -1

// Node is one node of the DVM and the number of processes it may run.
type Node struct {
	Name  string `json:"name"`
	Slots int    `json:"slots"`
}

// MapBy chooses how new processes are spread over nodes.
type MapBy uint8

// Mapping policies.
const (
	MapBySlot MapBy = iota // lowest free slots in global order (stack policy)
	MapByNode              // round robin over nodes with a free slot
)

func (m MapBy) String() string {
	switch m {
	case MapBySlot:
		return "slot"
	case MapByNode:
		return "node"
	}
	return fmt.Sprintf("MapBy(%d)", uint8(m))
}

// ParseMapBy accepts "slot" or "node" in any case ("" means slot).
func ParseMapBy(s string) (MapBy, error) {
	switch strings.ToLower(s) {
	case "", "slot":
		return MapBySlot, nil
	case "node":
		return MapByNode, nil
	}
	return 0, wire.Errorf(wire.ErrInvalid, "unknown mapping %q (want slot or node)", s)
}

// Options tune Allocate.
type Options struct {
	MapBy         MapBy
	Oversubscribe bool
	// Nodes, when not empty, lists the indices of the only nodes that may
	// receive the processes (an MPI spawn naming hosts); the rules above
	// then apply to those nodes alone.
	Nodes []int
}

// Proc is one process of a job: its rank, its global slot (or
// Oversubscribed) and the index of its node.
type Proc struct {
	Rank uint32 `json:"rank"`
	Slot int    `json:"slot"`
	Node int    `json:"node"`
}

type job struct {
	name  string
	next  uint32 // next rank to hand out
	procs map[uint32]Proc
}

// Alloc is the slot table of one DVM.
type Alloc struct {
	nodes  []Node
	base   []int  // first global slot of each node
	nodeOf []int  // node index of each global slot
	holder []*job // job on each global slot, nil when free
	rankOf []uint32
	used   []int      // occupied slots per node
	over   [][]uint32 // per node: oversubscribed (job, rank), oldest first
	overJ  [][]*job
	gone   []bool // nodes removed for good (RemoveNode): no slots, never chosen
	free   int
	jobs   map[string]*job
}

// New builds an empty slot table. Node names must be unique and non-empty;
// slot counts must not be negative.
func New(nodes []Node) (*Alloc, error) {
	if len(nodes) == 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "alloc: no nodes")
	}
	a := &Alloc{
		nodes: slices.Clone(nodes),
		base:  make([]int, len(nodes)),
		used:  make([]int, len(nodes)),
		over:  make([][]uint32, len(nodes)),
		overJ: make([][]*job, len(nodes)),
		gone:  make([]bool, len(nodes)),
		jobs:  make(map[string]*job),
	}
	seen := make(map[string]bool, len(nodes))
	total := 0
	for i, n := range nodes {
		switch {
		case n.Name == "":
			return nil, wire.Errorf(wire.ErrInvalid, "alloc: node %d has no name", i)
		case seen[n.Name]:
			return nil, wire.Errorf(wire.ErrInvalid, "alloc: node name %q used twice", n.Name)
		case n.Slots < 0:
			return nil, wire.Errorf(wire.ErrInvalid, "alloc: node %s has %d slots", n.Name, n.Slots)
		}
		seen[n.Name] = true
		a.base[i] = total
		total += n.Slots
	}
	a.nodeOf = make([]int, total)
	for i, n := range nodes {
		for s := 0; s < n.Slots; s++ {
			a.nodeOf[a.base[i]+s] = i
		}
	}
	a.holder = make([]*job, total)
	a.rankOf = make([]uint32, total)
	a.free = total
	return a, nil
}

// Allocate places n new processes of job (creating the job on first use)
// and returns them in rank order. On error nothing changes.
func (a *Alloc) Allocate(name string, n int, opts Options) ([]Proc, error) {
	switch {
	case name == "":
		return nil, wire.Errorf(wire.ErrInvalid, "alloc: empty job name")
	case n <= 0:
		return nil, wire.Errorf(wire.ErrInvalid, "alloc: job %s: asked for %d processes; need at least 1", name, n)
	case opts.MapBy > MapByNode:
		return nil, wire.Errorf(wire.ErrInvalid, "alloc: job %s: unknown mapping %d", name, opts.MapBy)
	}
	j := a.jobs[name]
	if j == nil {
		j = &job{name: name, procs: make(map[uint32]Proc)}
	}
	if uint64(j.next)+uint64(n) > math.MaxUint32+1 {
		return nil, wire.Errorf(wire.ErrNoResources, "alloc: job %s: rank counter would pass %d", name, uint32(math.MaxUint32))
	}
	allowed, free, total, err := a.allowed(name, opts.Nodes)
	if err != nil {
		return nil, err
	}
	if n > free && !opts.Oversubscribe {
		return nil, wire.Errorf(wire.ErrNoResources,
			"alloc: job %s: asked for %d processes but only %d of %d slots are free (oversubscribe to place more)",
			name, n, free, total)
	}
	onSlots := min(n, free)
	if n > onSlots && !a.canOversubscribe(allowed) {
		return nil, wire.Errorf(wire.ErrNoResources,
			"alloc: job %s: asked for %d processes but only %d of %d slots are free, and no node it may use has slots to oversubscribe",
			name, n, free, total)
	}
	var slots []int
	if opts.MapBy == MapByNode {
		slots = a.pickByNode(onSlots, allowed)
	} else {
		slots = a.pickBySlot(onSlots, allowed)
	}
	a.jobs[name] = j
	out := make([]Proc, 0, n)
	for _, s := range slots {
		p := Proc{Rank: j.next, Slot: s, Node: a.nodeOf[s]}
		j.next++
		a.holder[s], a.rankOf[s] = j, p.Rank
		a.used[p.Node]++
		a.free--
		j.procs[p.Rank] = p
		out = append(out, p)
	}
	// Each remaining process goes to the allowed node with the fewest
	// oversubscribed processes (lowest index on ties): a heap keeps that
	// O(log nodes) per process, so a large request on many nodes does not
	// hold the master's loop (a linear scan took 0.7 s for 65536 processes
	// on 4096 nodes).
	var least overHeap
	if n > onSlots {
		for i := range a.over {
			if (allowed == nil || allowed[i]) && !a.gone[i] && a.nodes[i].Slots > 0 {
				least = append(least, overNode{count: len(a.over[i]), idx: i})
			}
		}
		heap.Init(&least)
	}
	for range n - onSlots {
		node := least[0].idx
		least[0].count++
		heap.Fix(&least, 0)
		p := Proc{Rank: j.next, Slot: Oversubscribed, Node: node}
		j.next++
		a.over[node] = append(a.over[node], p.Rank)
		a.overJ[node] = append(a.overJ[node], j)
		j.procs[p.Rank] = p
		out = append(out, p)
	}
	return out, nil
}

// canOversubscribe says whether an allowed node (nil: any) has slots: a
// node with none (the master's host when the host list does not name it)
// takes no process, not even oversubscribed.
func (a *Alloc) canOversubscribe(allowed []bool) bool {
	for i, n := range a.nodes {
		if n.Slots > 0 && !a.gone[i] && (allowed == nil || allowed[i]) {
			return true
		}
	}
	return false
}

// overNode is a node in the heap of Allocate: its oversubscribed count.
type overNode struct{ count, idx int }

// overHeap orders nodes by oversubscribed count, then index.
type overHeap []overNode

func (h overHeap) Len() int { return len(h) }
func (h overHeap) Less(i, j int) bool {
	return h[i].count < h[j].count || h[i].count == h[j].count && h[i].idx < h[j].idx
}
func (h overHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *overHeap) Push(x any)   { *h = append(*h, x.(overNode)) }
func (h *overHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// allowed turns Options.Nodes into a per-node mask (nil: every node) and
// counts the free and total slots of the allowed nodes.
func (a *Alloc) allowed(name string, nodes []int) (mask []bool, free, total int, err error) {
	if len(nodes) == 0 {
		return nil, a.free, len(a.holder), nil
	}
	mask = make([]bool, len(a.nodes))
	for _, i := range nodes {
		if i < 0 || i >= len(a.nodes) {
			return nil, 0, 0, wire.Errorf(wire.ErrInvalid, "alloc: job %s: no node with index %d", name, i)
		}
		if a.gone[i] {
			return nil, 0, 0, wire.Errorf(wire.ErrInvalid, "alloc: job %s: node %s (index %d) has left the DVM", name, a.nodes[i].Name, i)
		}
		if !mask[i] {
			mask[i] = true
			free += a.nodes[i].Slots - a.used[i]
			total += a.nodes[i].Slots
		}
	}
	return mask, free, total, nil
}

// pickBySlot returns the k lowest free slots (of the allowed nodes; nil:
// all).
func (a *Alloc) pickBySlot(k int, allowed []bool) []int {
	out := make([]int, 0, k)
	for s := 0; s < len(a.holder) && len(out) < k; s++ {
		if a.holder[s] == nil && (allowed == nil || allowed[a.nodeOf[s]]) {
			out = append(out, s)
		}
	}
	return out
}

// pickByNode deals k free slots round robin over the (allowed) nodes,
// lowest slot first on each node. k must not exceed their free count.
func (a *Alloc) pickByNode(k int, allowed []bool) []int {
	out := make([]int, 0, k)
	next := slices.Clone(a.base) // next slot to look at on each node
	for len(out) < k {
		for i := range a.nodes {
			if allowed != nil && !allowed[i] {
				continue
			}
			end := a.base[i] + a.nodes[i].Slots
			for next[i] < end && a.holder[next[i]] != nil {
				next[i]++
			}
			if next[i] < end {
				out = append(out, next[i])
				next[i]++
				if len(out) == k {
					break
				}
			}
		}
	}
	return out
}

func (a *Alloc) job(name string) (*job, error) {
	j := a.jobs[name]
	if j == nil {
		return nil, wire.Errorf(wire.ErrNotFound, "alloc: no job %s", name)
	}
	return j, nil
}

// Victims returns the n processes a SUB of job removes under the stack
// policy: oversubscribed ones first (highest rank first), then the highest
// global slots. It fails if n would remove every process of the job.
func (a *Alloc) Victims(name string, n int) ([]uint32, error) {
	j, err := a.job(name)
	if err != nil {
		return nil, err
	}
	switch {
	case n <= 0:
		return nil, wire.Errorf(wire.ErrInvalid, "alloc: job %s: asked to remove %d processes; need at least 1", name, n)
	case n >= len(j.procs):
		return nil, wire.Errorf(wire.ErrInvalid,
			"alloc: job %s: removing %d processes would remove every process (it has %d); end the job instead",
			name, n, len(j.procs))
	}
	// The job's oversubscribed processes sit above every slot; then walk
	// the slots downwards. O(slots + oversubscribed), no sorting of the job.
	out := make([]uint32, 0, n)
	for i := range a.over {
		for k, oj := range a.overJ[i] {
			if oj == j {
				out = append(out, a.over[i][k])
			}
		}
	}
	slices.SortFunc(out, func(x, y uint32) int { return cmp.Compare(y, x) })
	if len(out) > n {
		out = out[:n]
	}
	for s := len(a.holder) - 1; s >= 0 && len(out) < n; s-- {
		if a.holder[s] == j {
			out = append(out, a.rankOf[s])
		}
	}
	return out, nil
}

// VictimsRanks checks that ranks name distinct processes of job and leave at
// least one, and returns a copy of them.
func (a *Alloc) VictimsRanks(name string, ranks []uint32) ([]uint32, error) {
	j, err := a.job(name)
	if err != nil {
		return nil, err
	}
	if len(ranks) == 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "alloc: job %s: no ranks to remove", name)
	}
	if err := j.checkRanks(ranks); err != nil {
		return nil, err
	}
	if len(ranks) == len(j.procs) {
		return nil, wire.Errorf(wire.ErrInvalid,
			"alloc: job %s: removing ranks %v would remove every process; end the job instead", name, ranks)
	}
	return slices.Clone(ranks), nil
}

func (j *job) checkRanks(ranks []uint32) error {
	seen := make(map[uint32]bool, len(ranks))
	for _, r := range ranks {
		if seen[r] {
			return wire.Errorf(wire.ErrInvalid, "alloc: job %s: rank %d named twice", j.name, r)
		}
		seen[r] = true
		if _, ok := j.procs[r]; !ok {
			return wire.Errorf(wire.ErrNotFound, "alloc: job %s: rank %d is not a process of the job", j.name, r)
		}
	}
	return nil
}

// Release frees the given processes of job (victims of a SUB, processes of
// an aborted ADD, or processes that died). All ranks are checked before
// anything changes. The job stays known, with its rank counter, even if it
// ends up empty.
func (a *Alloc) Release(name string, ranks []uint32) error {
	j, err := a.job(name)
	if err != nil {
		return err
	}
	if err := j.checkRanks(ranks); err != nil {
		return err
	}
	// Oversubscribed victims go first so that a freed slot is never handed
	// to a process that is itself being released.
	for _, r := range ranks {
		if p := j.procs[r]; p.Slot == Oversubscribed {
			a.dropOver(p.Node, j, r)
			delete(j.procs, r)
		}
	}
	for _, r := range ranks {
		if p, ok := j.procs[r]; ok {
			delete(j.procs, r)
			a.freeSlot(p.Slot)
		}
	}
	return nil
}

// ReleaseJob frees every process of job and forgets it (its rank counter
// included: job names are unique in a DVM, so a later job of the same name
// is a new job).
func (a *Alloc) ReleaseJob(name string) error {
	j, err := a.job(name)
	if err != nil {
		return err
	}
	ranks := make([]uint32, 0, len(j.procs))
	for r := range j.procs {
		ranks = append(ranks, r)
	}
	if err := a.Release(name, ranks); err != nil {
		return err
	}
	delete(a.jobs, name)
	return nil
}

func (a *Alloc) dropOver(node int, j *job, rank uint32) {
	for i := range a.over[node] {
		if a.overJ[node][i] == j && a.over[node][i] == rank {
			a.over[node] = slices.Delete(a.over[node], i, i+1)
			a.overJ[node] = slices.Delete(a.overJ[node], i, i+1)
			return
		}
	}
}

// freeSlot empties slot s, or hands it to the oldest oversubscribed process
// of the same node.
func (a *Alloc) freeSlot(s int) {
	node := a.nodeOf[s]
	if len(a.over[node]) > 0 {
		j, r := a.overJ[node][0], a.over[node][0]
		a.over[node], a.overJ[node] = a.over[node][1:], a.overJ[node][1:]
		a.holder[s], a.rankOf[s] = j, r
		p := j.procs[r]
		p.Slot = s
		j.procs[r] = p
		return
	}
	a.holder[s], a.rankOf[s] = nil, 0
	a.used[node]--
	a.free++
}

// AddNode appends a node (a DVM that grows at run time) and returns its
// index. Its slots come after every existing slot, so the global slot
// numbers of the other nodes do not change. Its name must not be that of
// a node still in the table (a removed node's name may come back).
func (a *Alloc) AddNode(n Node) (int, error) {
	switch {
	case n.Name == "":
		return 0, wire.Errorf(wire.ErrInvalid, "alloc: a new node needs a name")
	case n.Slots < 1:
		return 0, wire.Errorf(wire.ErrInvalid, "alloc: new node %s has %d slots; need at least 1", n.Name, n.Slots)
	}
	for i, m := range a.nodes {
		if m.Name == n.Name && !a.gone[i] {
			return 0, wire.Errorf(wire.ErrExists, "alloc: node name %q is taken (node %d)", n.Name, i)
		}
	}
	idx := len(a.nodes)
	total := len(a.holder)
	a.nodes = append(a.nodes, n)
	a.base = append(a.base, total)
	a.used = append(a.used, 0)
	a.over = append(a.over, nil)
	a.overJ = append(a.overJ, nil)
	a.gone = append(a.gone, false)
	for range n.Slots {
		a.nodeOf = append(a.nodeOf, idx)
		a.holder = append(a.holder, nil)
		a.rankOf = append(a.rankOf, 0)
	}
	a.free += n.Slots
	return idx, nil
}

// RemoveNode takes node i out of the table for good: it keeps its index
// (jobs and records refer to nodes by index) but has no slots any more and
// is never chosen again. It fails, changing nothing, while any process is
// placed on the node. The global slots of the nodes after it move down by
// its slot count (their processes' Slot fields with them).
func (a *Alloc) RemoveNode(i int) error {
	switch {
	case i < 0 || i >= len(a.nodes):
		return wire.Errorf(wire.ErrInvalid, "alloc: no node with index %d", i)
	case a.gone[i]:
		return wire.Errorf(wire.ErrState, "alloc: node %s (index %d) was removed already", a.nodes[i].Name, i)
	case a.used[i] > 0 || len(a.over[i]) > 0:
		return wire.Errorf(wire.ErrBusy, "alloc: node %s still holds %d processes", a.nodes[i].Name, a.used[i]+len(a.over[i]))
	}
	k := a.nodes[i].Slots
	lo, hi := a.base[i], a.base[i]+k
	// Renumber the processes on the slots above the node's.
	for s := hi; s < len(a.holder); s++ {
		if j := a.holder[s]; j != nil {
			p := j.procs[a.rankOf[s]]
			p.Slot = s - k
			j.procs[a.rankOf[s]] = p
		}
	}
	a.holder = slices.Delete(a.holder, lo, hi)
	a.rankOf = slices.Delete(a.rankOf, lo, hi)
	a.nodeOf = slices.Delete(a.nodeOf, lo, hi)
	for n := i + 1; n < len(a.nodes); n++ {
		a.base[n] -= k
	}
	a.nodes[i].Slots = 0
	a.gone[i] = true
	a.free -= k
	return nil
}

// Gone reports whether node i was removed.
func (a *Alloc) Gone(i int) bool { return i >= 0 && i < len(a.gone) && a.gone[i] }

// Nodes returns the DVM's nodes in slot order.
func (a *Alloc) Nodes() []Node { return slices.Clone(a.nodes) }

// Total returns the number of slots of the DVM.
func (a *Alloc) Total() int { return len(a.holder) }

// Free returns the number of free slots.
func (a *Alloc) Free() int { return a.free }

// NodeUsage is the load of one node.
type NodeUsage struct {
	Name  string `json:"name"`
	Slots int    `json:"slots"`
	Used  int    `json:"used"` // slots in use
	Over  int    `json:"over"` // oversubscribed processes beyond Slots
}

// Usage returns per-node used/total counts in node order.
func (a *Alloc) Usage() []NodeUsage {
	out := make([]NodeUsage, len(a.nodes))
	for i, n := range a.nodes {
		out[i] = NodeUsage{Name: n.Name, Slots: n.Slots, Used: a.used[i], Over: len(a.over[i])}
	}
	return out
}

// SlotInfo says who holds one slot.
type SlotInfo struct {
	Slot int    `json:"slot"`
	Node int    `json:"node"`
	Job  string `json:"job,omitempty"` // "" when free
	Rank uint32 `json:"rank"`
}

// SlotMap lists every slot in global order with its holder (dyntop's slot
// map). Oversubscribed processes are not on any slot; see Usage and Procs.
func (a *Alloc) SlotMap() []SlotInfo {
	out := make([]SlotInfo, len(a.holder))
	for s, j := range a.holder {
		out[s] = SlotInfo{Slot: s, Node: a.nodeOf[s]}
		if j != nil {
			out[s].Job, out[s].Rank = j.name, a.rankOf[s]
		}
	}
	return out
}

// Jobs returns the names of the known jobs, sorted.
func (a *Alloc) Jobs() []string {
	out := make([]string, 0, len(a.jobs))
	for n := range a.jobs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Size returns the number of processes of job (0 if unknown).
func (a *Alloc) Size(name string) int {
	if j := a.jobs[name]; j != nil {
		return len(j.procs)
	}
	return 0
}

// NextRank returns the rank the next process of job will get.
func (a *Alloc) NextRank(name string) uint32 {
	if j := a.jobs[name]; j != nil {
		return j.next
	}
	return 0
}

// Proc returns the process of job with the given rank.
func (a *Alloc) Proc(name string, rank uint32) (Proc, bool) {
	if j := a.jobs[name]; j != nil {
		p, ok := j.procs[rank]
		return p, ok
	}
	return Proc{}, false
}

// Procs returns the processes of job in rank order.
func (a *Alloc) Procs(name string) []Proc {
	j := a.jobs[name]
	if j == nil {
		return nil
	}
	out := make([]Proc, 0, len(j.procs))
	for _, p := range j.procs {
		out = append(out, p)
	}
	sort.Slice(out, func(x, y int) bool { return out[x].Rank < out[y].Rank })
	return out
}

// JobNodes returns the indices of the nodes that run at least one process
// of job, ascending.
func (a *Alloc) JobNodes(name string) []int {
	j := a.jobs[name]
	if j == nil {
		return nil
	}
	on := make([]bool, len(a.nodes))
	for _, p := range j.procs {
		on[p.Node] = true
	}
	var out []int
	for i, b := range on {
		if b {
			out = append(out, i)
		}
	}
	return out
}

// Retract undoes the latest Allocate of job, which returned ps: the
// processes are released and the rank counter goes back to ps[0].Rank, so
// that ranks no process ever had are handed out again (a change refused
// before anything ran with them consumes no ranks). It fails, changing
// nothing, unless ps are the job's newest ranks.
func (a *Alloc) Retract(name string, ps []Proc) error {
	if len(ps) == 0 {
		return nil
	}
	j, err := a.job(name)
	if err != nil {
		return err
	}
	first := ps[0].Rank
	for i, p := range ps {
		if p.Rank != first+uint32(i) {
			return wire.Errorf(wire.ErrInvalid, "alloc: job %s: retract: ranks not consecutive at %d", name, p.Rank)
		}
	}
	if uint64(first)+uint64(len(ps)) != uint64(j.next) {
		return wire.Errorf(wire.ErrState, "alloc: job %s: retract of ranks %d-%d: the newest rank handed out is %d", name, first, first+uint32(len(ps))-1, j.next-1)
	}
	ranks := make([]uint32, len(ps))
	for i, p := range ps {
		ranks[i] = p.Rank
	}
	if err := a.Release(name, ranks); err != nil {
		return err
	}
	return a.Rewind(name, first)
}

// Rewind sets the rank counter of job back to next, so that ranks no
// member of the job ever had (those of an aborted change, whose processes
// are all gone) are handed out again. It fails, changing nothing, while
// any process at or above next still holds a slot.
func (a *Alloc) Rewind(name string, next uint32) error {
	j, err := a.job(name)
	if err != nil {
		return err
	}
	if next > j.next {
		return wire.Errorf(wire.ErrInvalid, "alloc: job %s: rewind to %d, past the next rank %d", name, next, j.next)
	}
	for r := range j.procs {
		if r >= next {
			return wire.Errorf(wire.ErrState, "alloc: job %s: rewind to %d: rank %d still holds a slot", name, next, r)
		}
	}
	j.next = next
	return nil
}
