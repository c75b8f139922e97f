package daemon

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/lib/pmi"
	"github.com/dynrt/dynrt/wire"
)

// pmiFenceID names the runtime fences that PMI barriers use, apart from
// the application's own kv.fence calls.
const pmiFenceID = "pmi"

// pmiJob is one job's PMI data on this node. Like Hydra's proxy, the
// daemon gathers the barrier of its local ranks and enters the job-wide
// fence once for all of them (kv.fence with collect, through the master),
// bringing the values its ranks put since the last barrier; the fence's
// reply carries every node's new values, so after a barrier any get is
// answered here, without waiting (PMI gets never block). Values are also
// committed to the runtime's key-value store under the rank that put
// them.
type pmiJob struct {
	svc  *pmiService
	ns   string
	spec wire.PMIJob
	size int
	node []int // node of every rank (index into the placement), for the mapping

	mu        sync.Mutex
	refs      int                  // processes attached on this node
	live      map[uint32]bool      // local ranks that may still enter barriers
	order     []uint32             // local ranks in rank order (MPI_LOCALRANKID)
	kvs       map[string]string    // the job's key-value space as seen here
	pending   map[uint32][]wire.KV // put by local ranks since the last barrier
	bar       *pmiBarrier          // the barrier local ranks are entering
	attrs     map[string]string    // PMI-2 node attributes
	attrCh    chan struct{}        // closed and replaced on every node attribute put
	mapped    *string              // PMI_process_mapping, computed once
	used      bool                 // told the master the job speaks PMI
	published map[string]uint32    // service names published by local ranks, by publisher
}

// pmiBarrier is one barrier of the local ranks.
type pmiBarrier struct {
	in   map[uint32]bool
	done chan struct{}
	err  error
}

// job returns the PMI data of b's job, creating it from the launch. Each
// call counts one attached process (released by leave).
func (svc *pmiService) job(b *wire.LaunchReq) *pmiJob {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	j := svc.jobs[b.Job]
	if j == nil {
		j = &pmiJob{
			svc: svc, ns: b.Job, spec: *b.PMI, live: map[uint32]bool{}, kvs: map[string]string{},
			pending: map[uint32][]wire.KV{}, attrs: map[string]string{}, attrCh: make(chan struct{}),
			published: map[string]uint32{},
		}
		if b.Data != nil {
			j.size = int(b.Data.Size)
			j.node = placementNodes(b.Data.Placement, int(max(b.Data.Size, b.Data.NextRank)))
		}
		if j.size == 0 {
			j.size = b.Ranks.Count()
		}
		for _, kv := range b.PMI.Preput {
			j.kvs[kv.Key] = string(kv.Value)
		}
		svc.jobs[b.Job] = j
	}
	j.mu.Lock()
	j.refs++
	// Every rank of this launch counts for the local barrier from the
	// start, so a quick rank cannot complete it alone before its
	// neighbours are forked.
	for r := range b.Ranks.All() {
		if !j.live[r] {
			j.live[r] = true
			j.order = append(j.order, r)
		}
	}
	slices.Sort(j.order)
	j.mu.Unlock()
	return j
}

// placementNodes gives every rank below n the index of its node in pl
// (-1 when it has none).
func placementNodes(pl []wire.Placement, n int) []int {
	node := make([]int, n)
	for i := range node {
		node[i] = -1
	}
	for i, p := range pl {
		for r := range p.Ranks.All() {
			if int(r) < n {
				node[r] = i
			}
		}
	}
	return node
}

// localRanks returns how many ranks of the job this node runs and the
// index of rank among them.
func (j *pmiJob) localRanks(rank uint32) (int, int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	i, _ := slices.BinarySearch(j.order, rank)
	return len(j.order), i
}

// leave drops one attached process: its rank no longer holds up local
// barriers. The last one to leave drops the job's data here and takes
// back the names its ranks published (they live as long as the job, as
// under Hydra, where they die with mpiexec).
func (j *pmiJob) leave(rank uint32) {
	j.mu.Lock()
	delete(j.live, rank)
	j.refs--
	last := j.refs <= 0
	flush := j.readyLocked()
	names := maps.Clone(j.published)
	j.mu.Unlock()
	if flush != nil {
		go flush()
	}
	if !last {
		return
	}
	svc := j.svc
	svc.mu.Lock()
	if svc.jobs[j.ns] == j {
		delete(svc.jobs, j.ns)
	}
	svc.mu.Unlock()
	if len(names) > 0 {
		go unpublishAll(j.svc.d, j.ns, names)
	}
}

// unpublishAll withdraws the names (name → publisher rank) of job ns
// when its last process here has gone (PMI and PMIx services).
func unpublishAll(d *Daemon, ns string, names map[string]uint32) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, rank := range names {
		_ = d.master.Call(ctx, wire.KindUnpublish, &wire.UnpublishReq{
			Job: ns, Rank: rank, Range: wire.RangeDVM, Keys: []string{name},
		}, nil)
	}
}

func (j *pmiJob) addPublished(name string, rank uint32) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.published[name] = rank
}

// publisher returns the local rank that published name, or rank when no
// local rank did (the master then decides).
func (j *pmiJob) publisher(name string, rank uint32) uint32 {
	j.mu.Lock()
	defer j.mu.Unlock()
	if r, ok := j.published[name]; ok {
		return r
	}
	return rank
}

func (j *pmiJob) unpublished(name string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.published, name)
}

// started marks the job as one that speaks PMI: the master then refuses
// resource changes for it. Once per job and node.
func (j *pmiJob) started() {
	j.mu.Lock()
	first := !j.used
	j.used = true
	j.mu.Unlock()
	if first {
		go j.svc.report(procKey{j.ns, 0}, wire.PMIReportInit, "")
	}
}

func (j *pmiJob) mapping() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.mapped == nil {
		m := ""
		if len(j.node) > 0 && !slices.Contains(j.node, -1) {
			m = pmi.ProcessMapping(j.node)
		}
		j.mapped = &m
	}
	return *j.mapped
}

func (j *pmiJob) put(rank uint32, key, value string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.kvs[key] = value // visible at once on this node, elsewhere after the barrier
	j.pending[rank] = append(j.pending[rank], wire.KV{Key: key, Value: []byte(value)})
}

func (j *pmiJob) get(key string) (string, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	v, ok := j.kvs[key]
	return v, ok
}

// fence enters rank into the local barrier and waits for the job-wide
// one.
func (j *pmiJob) fence(ctx context.Context, rank uint32) error {
	j.mu.Lock()
	if j.bar == nil {
		j.bar = &pmiBarrier{in: map[uint32]bool{}, done: make(chan struct{})}
	}
	b := j.bar
	if b.in[rank] {
		j.mu.Unlock()
		return wire.Errorf(wire.ErrState, "daemon: rank %d of %s entered a PMI barrier twice", rank, j.ns)
	}
	b.in[rank] = true
	flush := j.readyLocked()
	j.mu.Unlock()
	if flush != nil {
		flush()
	}
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return wire.Errorf(wire.ErrCanceled, "daemon: PMI barrier of rank %d of %s: %w", rank, j.ns, ctx.Err())
	}
}

// readyLocked returns the function that completes the current local
// barrier if every live local rank has entered it (nil otherwise); the
// barrier is detached, so the next one starts fresh. j.mu must be held.
func (j *pmiJob) readyLocked() func() {
	b := j.bar
	if b == nil || len(b.in) == 0 {
		return nil
	}
	for r := range j.live {
		if !b.in[r] {
			return nil
		}
	}
	j.bar = nil
	data := j.pending
	j.pending = map[uint32][]wire.KV{}
	ranks := slices.Sorted(maps.Keys(b.in))
	return func() { j.flush(b, ranks, data) }
}

// flush enters the job-wide fence for the local ranks with their new
// values, merges what every node brought and releases the local ranks.
// When the local ranks are every rank the job ever had, the local barrier
// is the job-wide one: it completes here, without the master's round trip
// (one node's MPI job, as in a private DVM; Hydra's proxy still asks its
// server).
func (j *pmiJob) flush(b *pmiBarrier, ranks []uint32, data map[uint32][]wire.KV) {
	d := j.svc.d
	body := &wire.FenceReq{ID: pmiFenceID, Collect: true, Job: j.ns}
	body.Local = wire.RangesOf(ranks)
	for _, r := range slices.Sorted(maps.Keys(data)) {
		body.Data = append(body.Data, wire.ProcKV{Job: j.ns, Rank: r, Data: data[r]})
	}
	var rep wire.FenceReply
	var err error
	if j.wholeJob(len(ranks)) {
		rep.Data = body.Data
	} else {
		err = d.master.Call(context.Background(), wire.KindFence, body, &rep)
	}
	if err == nil {
		j.mu.Lock()
		for _, p := range rep.Data {
			if p.Job != j.ns {
				continue
			}
			for _, kv := range p.Data {
				j.kvs[kv.Key] = string(kv.Value)
			}
		}
		j.mu.Unlock()
		if d.sess != nil {
			for r, kvs := range data {
				d.sess.commitPMI(procKey{j.ns, r}, kvs)
			}
		}
	}
	b.err = err
	close(b.done)
}

// wholeJob reports whether n distinct ranks of this node are all the
// ranks the job ever had (its job data's size counts ended ranks too, so
// a job that lost or moved a rank never qualifies).
func (j *pmiJob) wholeJob(n int) bool {
	d := j.svc.d
	d.mu.Lock()
	defer d.mu.Unlock()
	jc := d.jobs[j.ns]
	return jc != nil && jc.data.Size > 0 && int(jc.data.Size) == n && jc.local.Count() == n
}

// commitPMI stores values a local process put through PMI as its
// committed data in the runtime's key-value store (kv.get and kv.fetch
// then see them).
func (s *sessionState) commitPMI(owner procKey, kvs []wire.KV) {
	if len(kvs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.committed[owner]
	if m == nil {
		m = make(map[string][]byte, len(kvs))
		s.committed[owner] = m
	}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

func (j *pmiJob) putAttr(key, value string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.attrs[key] = value
	close(j.attrCh)
	j.attrCh = make(chan struct{})
}

// getAttr returns a node attribute, waiting for its put if asked to (MPI
// broadcasts a node's shared-memory handle this way, without a fence).
func (j *pmiJob) getAttr(ctx context.Context, key string, wait bool) (string, bool, error) {
	for {
		j.mu.Lock()
		v, ok := j.attrs[key]
		ch := j.attrCh
		j.mu.Unlock()
		if ok || !wait {
			return v, ok, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return "", false, wire.Errorf(wire.ErrCanceled, "daemon: waiting for node attribute %q: %w", key, ctx.Err())
		}
	}
}

// deadList is the job's PMI_dead_processes: the ranks the master last
// listed as dead (handlePMIDead). It takes d.mu, which pmi locks never
// hold.
func (j *pmiJob) deadList() string {
	d := j.svc.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if jc := d.jobs[j.ns]; jc != nil {
		return jc.pmiDead
	}
	return ""
}

// handlePMIDead takes the master's list of a keep-going job's dead ranks
// and then sends SIGUSR1 to the job's processes here, as Hydra's proxy
// does: MPICH's handler reads PMI_dead_processes at once, so the list is
// in place before the first signal goes out.
func (d *Daemon) handlePMIDead(_ context.Context, _ *wire.Request, b *wire.PMIDead) (any, error) {
	parts := make([]string, len(b.Ranks))
	for i, r := range b.Ranks {
		parts[i] = strconv.FormatUint(uint64(r), 10)
	}
	d.mu.Lock()
	if jc := d.jobs[b.Job]; jc != nil {
		jc.pmiDead = strings.Join(parts, ",")
	}
	var ps []Process
	for k, e := range d.live {
		if k.job == b.Job && e.p != nil {
			ps = append(ps, e.p)
		}
	}
	d.mu.Unlock()
	for _, p := range ps {
		_ = p.Signal(syscall.SIGUSR1) // ErrDone: it has just ended
	}
	return nil, nil
}
