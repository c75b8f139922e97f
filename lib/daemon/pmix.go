package daemon

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dynrt/dynrt/lib/pmix"
	"github.com/dynrt/dynrt/lib/proc"
	"github.com/dynrt/dynrt/wire"
)

// The PMIx service (docs/mpi.md): Open MPI programs speak PMIx only. A job
// launched with --pmi pmix has its namespace and local processes
// registered with the process's PMIx server (lib/pmix, started on the
// first such job) before its processes are forked; each process gets the
// server's variables in its environment (pmixAttach). The server's host
// callbacks come back here as pmix.Handler methods of the job: a client
// that connects makes the job static (like a PMI session), a fence over
// several nodes goes through the master's collecting fence as the PMI
// barrier does, an abort takes the PMI abort path. A process that exits
// with status 0 without PMIx_Finalize fails its job (pmixExited). When
// the job's last local process has ended, its namespace is deregistered:
// a daemon without PMIx jobs holds no PMIx state but the server itself,
// which libpmix cannot start twice in a process (lib/pmix).

// pmixFenceID names the runtime fences of PMIx jobs.
const pmixFenceID = "pmix"

// pmixBlobKey is the key of a node's fence contribution (one per node).
const pmixBlobKey = "pmix"

// ompiDirectLaunch is set in the environment of PMIx processes. Open MPI
// 4.1 leaves singleton mode only when a launcher it knows is detected
// (mpirun's daemon URI, Slurm, IBM's jsrun): without it every process of
// `dynrun -n 4` would run alone as "rank 0 of 1". JSM_JSRUN_PORT is read
// by Open MPI's schizo/jsm component alone, which then selects ess/pmi,
// i.e. a process launched directly under a PMIx server, as for srun
// --mpi=pmix (and leaves binding to the launcher). Open MPI 5 finds the
// PMIx server without it.
const ompiDirectLaunch = "JSM_JSRUN_PORT=dynrt"

// Each PMIx job has a scratch directory per node, /dev/shm/dynrt.<node>.<job>,
// removed with the job's last process here, with whatever its processes
// left (crashed ones included): it is PMIX_TMPDIR, and Open MPI keeps
// there its session directory (ompiTmpEnv; by default /tmp/ompi.<host>.<uid>,
// which Open MPI leaves behind when no mpirun cleans up) and its
// shared-memory segments (vaderDirEnv). Open MPI names a segment by host
// name, job and local rank, so the processes of two virtual nodes of one
// host would otherwise share files, and crash. Values set by the user
// stand.
const (
	ompiTmpEnv  = "OMPI_MCA_orte_tmpdir_base"
	vaderDirEnv = "OMPI_MCA_btl_vader_backing_directory"
)

// ompiBoundEnv tells Open MPI 4.1 that the launcher has applied the
// binding policy (mpirun.openmpi sets it too), so that MPI_Init does not
// look at binding itself. dynrun binds nothing; without the variable
// every process loads the node's topology to find out that it is not
// bound, and hwloc loads all its plugins with it (libxml2, ICU, X11,
// OpenCL): about twice the dynamic linking of an Open MPI start-up, some
// 19 ms of CPU per process on this machine (docs/BENCHMARKS.md "Open MPI").
// It is left out when the user asks Open MPI to bind itself
// (ompiBindPolicyEnv) or sets it.
//
// ompiOversubEnv says whether the node is oversubscribed: more processes
// here than CPUs. Open MPI then yields the CPU while it waits instead of
// spinning (mpi_yield_when_idle), which a rank that has work needs when
// its neighbours wait on the same cores. mpirun.openmpi sets it for every
// process it starts (from its slots, which default to the cores); it is
// the runtime's, so a value inherited from a spawning parent is replaced.
const (
	ompiBoundEnv      = "OMPI_MCA_orte_bound_at_launch"
	ompiBindPolicyEnv = "OMPI_MCA_hwloc_base_binding_policy"
	ompiOversubEnv    = "OMPI_MCA_mpi_oversubscribe"
)

// ompiEnv completes the environment of an Open MPI process under the
// PMIx server: the direct-launch marker, the job's scratch directory dir
// (none when "") and the binding note, each unless already set, and the
// node's oversubscription.
func ompiEnv(env []string, dir string, oversubscribed bool) []string {
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, ompiOversubEnv+"=") })
	has := func(k string) bool {
		return slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, k+"=") })
	}
	over := "0"
	if oversubscribed {
		over = "1"
	}
	env = append(env, ompiDirectLaunch, ompiOversubEnv+"="+over)
	if dir != "" {
		for _, k := range []string{ompiTmpEnv, vaderDirEnv} {
			if !has(k) {
				env = append(env, k+"="+dir)
			}
		}
	}
	if !has(ompiBoundEnv) && !has(ompiBindPolicyEnv) {
		env = append(env, ompiBoundEnv+"=1")
	}
	return env
}

// pmixService is the daemon's PMIx state. Lock order: d.mu (held by
// rc.push's announcements), then pmixService.mu, then pmixJob.mu or
// pmixProc.mu; never d.mu while holding either of the others.
type pmixService struct {
	d *Daemon

	mu  sync.Mutex
	srv *pmix.Server // nil until the first PMIx job
	// dir is the server's directory, made by this daemon ("" = none):
	// libpmix keeps the node's topology there for its clients.
	dir   string
	jobs  map[string]*pmixJob
	procs map[procKey]*pmixProc
	dyn   pmixDyn // spawn and connect (pmix_dyn.go)
}

func newPMIxService(d *Daemon) *pmixService {
	return &pmixService{d: d, jobs: map[string]*pmixJob{}, procs: map[procKey]*pmixProc{}}
}

// pmixJob is one PMIx namespace of a job on this node; it is the
// pmix.Handler of the namespace. A job has one namespace, its own name,
// and one more per ADD (pmix_space.go): PMIx rank r of the namespace is
// dynrt rank base+r of job.
type pmixJob struct {
	svc  *pmixService
	ns   string // PMIx namespace
	job  string // dynrt job
	base uint32 // dynrt rank of PMIx rank 0
	desc *pmix.Job
	dir  string // the job's scratch directory here ("" = none)

	// ctx ends with the job here: it bounds what the Handler waits for
	// (fences, lookups, direct modex), which DeregisterJob waits for.
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	refs      int               // processes attached here
	used      bool              // told the master the job speaks PMIx
	published map[string]uint32 // names published by local ranks, by publisher
}

// pmixProc is the PMIx side of one process.
type pmixProc struct {
	job *pmixJob
	key procKey

	mu                           sync.Mutex
	connected, finalized, aborts bool
	malleable                    bool // declared DYNRT_PMIX_MALLEABLE: gets the job's resource changes (pmix_events.go)
}

// pmixAttach prepares the start of one rank of a PMIx job: it registers
// the job (first rank here) and the rank with the PMIx server and puts
// the server's variables into the rank's environment. It returns nil for
// a job without PMIx.
func (d *Daemon) pmixAttach(b *wire.LaunchReq, rank uint32, spec *proc.Spec) (*pmixProc, error) {
	if b.PMI == nil || (b.PMI.Mode != wire.PMIPMIx && b.PMI.Mode != wire.PMIBoth) {
		return nil, nil
	}
	svc := d.pmix
	sp := d.pmixSpaceOf(b.Job, rank) // pmix_space.go
	if b.PMI.ParentJob != "" {
		// A process of an ADD's namespace spawned it: its parent by its
		// PMIx name (the master knows dynrt's).
		p := d.pmixProcOf(b.PMI.ParentJob, b.PMI.ParentRank)
		sp.parent = &p
	}
	j, err := svc.job(b, sp)
	if err != nil {
		return nil, err
	}
	xp := &pmixProc{job: j, key: procKey{b.Job, rank}}
	p := pmix.Proc{Nspace: sp.ns, Rank: rank - sp.base}
	if err := svc.srv.RegisterClient(p, os.Getuid(), os.Getgid()); err != nil {
		j.leave()
		return nil, wire.Errorf(wire.ErrInternal, "daemon %s: %v", d.node, err)
	}
	env, err := svc.srv.SetupFork(p)
	if err != nil {
		svc.srv.DeregisterClient(p)
		j.leave()
		return nil, wire.Errorf(wire.ErrInternal, "daemon %s: %v", d.node, err)
	}
	applyBlock(b.PMI, rank, spec)
	// Every rank of this launch is in d.live already (reserve).
	d.mu.Lock()
	here := len(d.live)
	d.mu.Unlock()
	spec.Env = ompiEnv(append(withoutPMIxEnv(spec.Env), env...), j.dir, here > runtime.NumCPU())
	svc.mu.Lock()
	svc.procs[xp.key] = xp
	svc.mu.Unlock()
	return xp, nil
}

// started is called once the fork is done; a failed fork forgets the
// process at once. It is a no-op on nil.
func (xp *pmixProc) started(err error) {
	if xp != nil && err != nil {
		xp.release()
	}
}

// job returns the PMIx namespace sp of b's job, registering it on first
// use (and starting the server on the very first). Each call counts one
// attached process (released by leave).
func (svc *pmixService) job(b *wire.LaunchReq, sp pmixSpace) (*pmixJob, error) {
	d := svc.d
	d.mu.Lock()
	index := d.index
	d.mu.Unlock()
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if j := svc.jobs[sp.ns]; j != nil {
		j.mu.Lock()
		j.refs++
		j.mu.Unlock()
		return j, nil
	}
	var desc *pmix.Job
	var err error
	if sp.ns == b.Job {
		desc, err = pmixJobOf(b, d.node)
	} else {
		desc, err = sp.describe(b, d.node) // pmix_space.go
	}
	if err != nil {
		return nil, wire.Errorf(wire.ErrInvalid, "daemon %s: %v", d.node, err)
	}
	if svc.srv == nil {
		// A directory per daemon: the virtual nodes of a host share the
		// DVM's socket directory, and each server writes its topology
		// file (hwloc.sm) under a fixed name.
		dir := filepath.Join(d.sockDir, "pmix."+d.node)
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, wire.Errorf(wire.ErrInternal, "daemon %s: PMIx server directory: %v", d.node, err)
		}
		srv, err := pmix.Start(pmix.Config{Dir: dir, Nspace: "dynrt-" + d.dvm, Rank: index})
		if err != nil {
			_ = os.Remove(dir)
			return nil, wire.Errorf(wire.ErrUnsupported, "daemon %s: job %s asks for PMIx (--pmi pmix): %v", d.node, b.Job, err)
		}
		svc.srv, svc.dir = srv, dir
	}
	desc.Dynrt = &pmix.DynrtJob{Job: b.Job, Base: sp.base, Delta: sp.delta}
	if sp.parent != nil {
		desc.Parent = sp.parent
	}
	j := &pmixJob{svc: svc, ns: sp.ns, job: b.Job, base: sp.base, desc: desc, refs: 1, published: map[string]uint32{}}
	j.ctx, j.cancel = context.WithCancel(context.Background())
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		dir := filepath.Join("/dev/shm", "dynrt."+d.node+"."+sp.ns)
		if err := os.Mkdir(dir, 0o700); err == nil || errors.Is(err, fs.ErrExist) {
			j.dir, desc.Tmpdir = dir, dir
			// Should this daemon be killed, its guard removes the
			// directory (kill -9 left them behind).
			if err := d.jobGuard().RemoveAfter(dir); err != nil {
				d.log.Warn("daemon: the PMIx scratch directory would outlive a crash of this daemon", "err", err)
			}
		}
	}
	if err := svc.srv.RegisterJob(desc, j); err != nil {
		j.cancel()
		j.removeDir()
		return nil, wire.Errorf(wire.ErrInternal, "daemon %s: %v", d.node, err)
	}
	svc.jobs[sp.ns] = j
	return j, nil
}

// pmixJobOf describes b's job to the PMIx server: its size, placement and
// applications as the master sent them.
func pmixJobOf(b *wire.LaunchReq, node string) (*pmix.Job, error) {
	j := &pmix.Job{Nspace: b.Job, Spawned: b.PMI.Parent != "", Node: -1}
	if b.PMI.ParentJob != "" {
		j.Parent = &pmix.Proc{Nspace: b.PMI.ParentJob, Rank: b.PMI.ParentRank}
	}
	if b.Data != nil && len(b.Data.Placement) > 0 {
		j.Size = max(b.Data.Size, b.Data.NextRank)
		j.RankNode = placementNodes(b.Data.Placement, int(j.Size))
		for i, p := range b.Data.Placement {
			j.Nodes = append(j.Nodes, p.Node)
			if p.Node == node {
				j.Node = i
			}
		}
	} else {
		// A launch without job data: one node, ranks 0..n-1.
		j.Size = uint32(b.Ranks.Count())
		j.Nodes, j.Node, j.RankNode = []string{node}, 0, make([]int, j.Size)
	}
	if j.Node < 0 {
		return nil, errors.New("pmix: node " + node + " is not in the placement of job " + b.Job)
	}
	if b.PMI.Universe > 0 {
		j.Universe = uint32(b.PMI.Universe)
	}
	if b.Psets != nil {
		for _, s := range b.Psets.Defined {
			if s.Job == "" || s.Job == b.Job {
				if j.Psets == nil {
					j.Psets = map[string][]uint32{}
				}
				j.Psets[s.Name] = slices.Collect(s.Members.All())
			}
		}
	}
	for i, blk := range b.PMI.Blocks {
		if j.RankApp == nil {
			j.RankApp = make([]uint32, j.Size)
		}
		for r := range blk.Ranks.All() {
			if r < j.Size {
				j.RankApp[r] = uint32(i)
			}
		}
	}
	return j, nil
}

// applyBlock sets the program of rank's executable block (a job of
// several, MPI_Comm_spawn_multiple) and returns the block's index, its
// appnum.
func applyBlock(spec *wire.PMIJob, rank uint32, ps *proc.Spec) int {
	for i := range spec.Blocks {
		blk := &spec.Blocks[i]
		if blk.Ranks.Contains(rank) && len(blk.Argv) > 0 {
			ps.Path, ps.Args = blk.Argv[0], blk.Argv
			if blk.Wdir != "" {
				ps.Dir = blk.Wdir
			}
			ps.Env = overrideEnv(ps.Env, blk.Env)
			return i
		}
	}
	return 0
}

// withoutPMIxEnv drops inherited PMIx variables (dynrun may itself run
// under mpirun or srun): the process's own come from SetupFork.
func withoutPMIxEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PMIX_") {
			out = append(out, kv)
		}
	}
	return out
}

// leave drops one attached process; the last one deregisters the job.
func (j *pmixJob) leave() {
	svc := j.svc
	svc.mu.Lock()
	j.mu.Lock()
	j.refs--
	last := j.refs <= 0
	names := maps.Clone(j.published)
	j.mu.Unlock()
	if last && svc.jobs[j.ns] == j {
		delete(svc.jobs, j.ns)
	}
	srv := svc.srv
	svc.mu.Unlock()
	if last {
		j.cancel()
		srv.DeregisterJob(j.ns)
		j.removeDir()
		svc.jobLeft(j.ns)
		if len(names) > 0 {
			// Published names live as long as the job, as under mpirun.
			go unpublishAll(svc.d, j.job, names)
		}
	}
}

func (j *pmixJob) removeDir() {
	if j.dir != "" {
		_ = os.RemoveAll(j.dir)
		j.svc.d.jobGuard().Keep(j.dir)
	}
}

// release forgets a process that has ended (or never started). Its
// PMIx client goes with its namespace: deregistering a client whose
// connection libpmix is still closing leaves libpmix with events on a
// closed socket ("read hdr on socket -1"), and after a few jobs new
// clients of a warm DVM hung in PMIx_Init.
func (xp *pmixProc) release() {
	svc := xp.job.svc
	svc.mu.Lock()
	if svc.procs[xp.key] == xp {
		delete(svc.procs, xp.key)
	}
	svc.mu.Unlock()
	xp.job.leave()
}

// pmixExited settles the PMIx side of a process that has exited, before
// its exit is reported: one that began PMIx and ended with status 0
// without PMIx_Finalize fails its job, as under mpirun.
func (d *Daemon) pmixExited(key procKey, st proc.ExitStatus) {
	svc := d.pmix
	svc.mu.Lock()
	xp := svc.procs[key]
	svc.mu.Unlock()
	if xp == nil {
		return
	}
	xp.mu.Lock()
	unfinished := xp.connected && !xp.finalized && !xp.aborts
	xp.mu.Unlock()
	if unfinished && st.Success() {
		d.pmi.report(key, wire.PMIReportUnfinished, "exited without finalizing PMIx (MPI_Finalize was not called)")
	}
	xp.release()
}

// proc returns the attached process of a rank of the job (nil if none).
func (j *pmixJob) proc(rank uint32) *pmixProc {
	svc := j.svc
	svc.mu.Lock()
	defer svc.mu.Unlock()
	return svc.procs[procKey{j.job, j.base + rank}]
}

// The pmix.Handler of the job.

func (j *pmixJob) ClientConnected(p pmix.Proc, done func(error)) {
	if xp := j.proc(p.Rank); xp != nil {
		xp.mu.Lock()
		xp.connected = true
		xp.mu.Unlock()
	}
	j.mu.Lock()
	first := !j.used
	j.used = true
	j.mu.Unlock()
	if first {
		// The job becomes static, as a PMI job does (lib/master rc.go).
		j.svc.d.pmi.report(procKey{j.job, j.base + p.Rank}, wire.PMIReportInit, "")
	}
	done(nil)
}

func (j *pmixJob) ClientFinalized(p pmix.Proc, done func(error)) {
	if xp := j.proc(p.Rank); xp != nil {
		xp.mu.Lock()
		xp.finalized = true
		xp.mu.Unlock()
	}
	done(nil)
}

// Abort takes the path of a PMI abort: the master ends the job and the
// jobs spawned with it, with the given exit status.
func (j *pmixJob) Abort(p pmix.Proc, status int, msg string, _ []pmix.Proc, done func(error)) {
	if xp := j.proc(p.Rank); xp != nil {
		xp.mu.Lock()
		xp.aborts = true
		xp.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := j.svc.d.master.Call(ctx, wire.KindSessionAbort, &wire.AbortReq{
		Job: j.job, Rank: j.base + p.Rank, Status: status, Msg: strings.TrimSpace(msg),
	}, nil)
	if errors.Is(err, wire.ErrState) {
		err = nil // the job is ending already
	}
	done(err)
}

// Fence enters the job-wide fence for this node's processes with the
// server's contribution and returns every node's, concatenated (libpmix
// completes a fence of a single node's processes itself).
func (j *pmixJob) Fence(procs []pmix.Proc, _ bool, data []byte, done func([]byte, error)) {
	if len(procs) != 1 || procs[0] != (pmix.Proc{Nspace: j.ns, Rank: pmix.RankWildcard}) {
		done(j.svc.fence(j.ctx, procs, data)) // pmix_dyn.go
		return
	}
	local := j.desc.LocalRanks()
	for i := range local {
		local[i] += j.base
	}
	body := &wire.FenceReq{
		ID: pmixFenceID, Collect: true, Job: j.job, Local: wire.RangesOf(local), Procs: j.svc.d.pmixFenceProcs(j),
		Data: []wire.ProcKV{{Job: j.job, Rank: local[0], Data: []wire.KV{{Key: pmixBlobKey, Value: data}}}},
	}
	var rep wire.FenceReply
	if err := j.svc.d.master.Call(j.ctx, wire.KindFence, body, &rep); err != nil {
		done(nil, err)
		return
	}
	var all []byte
	for _, pk := range rep.Data {
		if pk.Job != j.job {
			continue
		}
		for _, kv := range pk.Data {
			if kv.Key == pmixBlobKey {
				all = append(all, kv.Value...)
			}
		}
	}
	done(all, nil)
}

// pmixModexKey is the kv.fetch key that asks a daemon for the PMIx data
// of one of its processes (pmixModexFetch) rather than for committed
// session data.
const pmixModexKey = "dynrt.pmix.modex"

// DirectModex fetches the data of a process of another node (of this
// job or another one) from its daemon, through the master's kv.fetch
// routing, which knows where every rank runs. It waits for the process
// to commit its data for as long as this job lives here. The data is
// there while the process's job has a live process on its node (its
// namespace is deregistered after the last one).
func (j *pmixJob) DirectModex(p pmix.Proc, done func([]byte, error)) {
	done(j.svc.fetchModex(j.ctx, p))
}

// fetchModex is DirectModex for the clients of this node (also of the
// namespaces a connect registered here, pmix_dyn.go).
// The master routes it by dynrt job and rank (pmix_space.go).
func (svc *pmixService) fetchModex(ctx context.Context, p pmix.Proc) ([]byte, error) {
	q := p
	if ps := svc.d.pmixDynrt([]pmix.Proc{p}); len(ps) == 1 {
		q = ps[0]
	}
	var rep wire.KVFetchReply
	err := svc.d.master.Call(ctx, wire.KindKVFetch, &wire.KVFetchReq{
		Procs: []wire.ProcRanges{{Job: q.Nspace, Ranks: wire.Span(q.Rank, q.Rank)}}, Key: pmixModexKey, Wait: true,
	}, &rep)
	if err != nil {
		return nil, err
	}
	for _, pk := range rep.Data {
		for _, kv := range pk.Data {
			if pk.Job == q.Nspace && pk.Rank == q.Rank && kv.Key == pmixModexKey {
				return kv.Value, nil
			}
		}
	}
	return nil, &pmix.StatusError{Status: pmix.CodeNotFound, Msg: "dynrt: no PMIx data of " + p.String()}
}

// pmixModexFetch answers a kv.fetch of pmixModexKey: the PMIx data of a
// process of this node, once it has committed it.
func (d *Daemon) pmixModexFetch(ctx context.Context, b *wire.KVFetchReq) (*wire.KVFetchReply, error) {
	if len(b.Procs) != 1 || b.Procs[0].Ranks.Count() != 1 {
		return nil, wire.Errorf(wire.ErrInvalid, "daemon %s: a PMIx direct modex is about exactly one process", d.node)
	}
	job, rank := b.Procs[0].Job, b.Procs[0].Ranks[0].Lo
	p := d.pmixProcOf(job, rank) // its PMIx name (pmix_space.go)
	svc := d.pmix
	svc.mu.Lock()
	srv, ok := svc.srv, svc.jobs[p.Nspace] != nil
	svc.mu.Unlock()
	if !ok {
		return nil, wire.Errorf(wire.ErrNotFound, "daemon %s: no PMIx job %s here", d.node, p.Nspace)
	}
	data, err := srv.DirectModexRequest(ctx, p)
	if err != nil {
		return nil, wire.Errorf(wire.ErrNotFound, "daemon %s: %v", d.node, err)
	}
	return &wire.KVFetchReply{Data: []wire.ProcKV{{Job: job, Rank: rank, Data: []wire.KV{{Key: pmixModexKey, Value: data}}}}}, nil
}

// Publish, Lookup, Unpublish: pmixJob is a pmix.Publisher on the master's
// name service, DVM-wide, as PMI's publish (MPI_Publish_name between
// jobs).

// A publish without a persistence keeps today's life (until unpublished,
// and withdrawn by this daemon when the job ends here, as the PMI service
// does: PRRTE's data server also takes unmarked names at their job's end);
// with one, the master keeps the name as long as it says.
func (j *pmixJob) Publish(p pmix.Proc, data map[string]string, persist pmix.Persistence, done func(error)) {
	req := &wire.PublishReq{Job: j.job, Rank: j.base + p.Rank, Range: wire.RangeDVM, Persist: wirePersist[persist]}
	for _, k := range slices.Sorted(maps.Keys(data)) {
		req.Data = append(req.Data, wire.KV{Key: k, Value: []byte(data[k])})
	}
	ctx, cancel := context.WithTimeout(j.ctx, 10*time.Second)
	defer cancel()
	err := j.svc.d.master.Call(ctx, wire.KindPublish, req, nil)
	if err == nil && req.Persist == wire.PersistDefault {
		j.mu.Lock()
		for k := range data {
			j.published[k] = j.base + p.Rank
		}
		j.mu.Unlock()
	}
	done(pmixStatus(err))
}

// wirePersist names PMIx's persistences on the wire.
var wirePersist = map[pmix.Persistence]string{
	pmix.PersistDefault:   wire.PersistDefault,
	pmix.PersistIndef:     wire.PersistIndef,
	pmix.PersistFirstRead: wire.PersistFirstRead,
	pmix.PersistProc:      wire.PersistProc,
	pmix.PersistApp:       wire.PersistApp,
	pmix.PersistSession:   wire.PersistSession,
}

func (j *pmixJob) Lookup(p pmix.Proc, keys []string, wait bool, done func(map[string]string, error)) {
	ctx := j.ctx // a waiting lookup waits as long as the job lives
	if !wait {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(j.ctx, 10*time.Second)
		defer cancel()
	}
	var rep wire.LookupReply
	err := j.svc.d.master.Call(ctx, wire.KindLookup, &wire.LookupReq{
		Job: j.job, Rank: j.base + p.Rank, Range: wire.RangeDVM, Keys: keys, Wait: wait,
	}, &rep)
	found := map[string]string{}
	for _, kv := range rep.Data {
		found[kv.Key] = string(kv.Value)
	}
	done(found, pmixStatus(err))
}

func (j *pmixJob) Unpublish(p pmix.Proc, keys []string, done func(error)) {
	ctx, cancel := context.WithTimeout(j.ctx, 10*time.Second)
	defer cancel()
	d := j.svc.d
	if len(keys) == 0 {
		me := j.base + p.Rank
		err := d.master.Call(ctx, wire.KindUnpublish, &wire.UnpublishReq{Job: j.job, Rank: me, Range: wire.RangeDVM}, nil)
		if err == nil {
			j.mu.Lock()
			maps.DeleteFunc(j.published, func(_ string, r uint32) bool { return r == me })
			j.mu.Unlock()
		}
		done(pmixStatus(err))
		return
	}
	var errs []error
	for _, k := range keys {
		// A name published by another local rank of the job is withdrawn
		// in its publisher's name, as the PMI service does.
		j.mu.Lock()
		owner, ok := j.published[k]
		j.mu.Unlock()
		if !ok {
			owner = j.base + p.Rank
		}
		err := d.master.Call(ctx, wire.KindUnpublish, &wire.UnpublishReq{Job: j.job, Rank: owner, Range: wire.RangeDVM, Keys: []string{k}}, nil)
		if err == nil {
			j.mu.Lock()
			delete(j.published, k)
			j.mu.Unlock()
		}
		errs = append(errs, err)
	}
	done(pmixStatus(errors.Join(errs...)))
}

// Query answers the process-set keys of PMIx_Query_info from the job's
// sets as this daemon knows them (the master pushes every change).
func (j *pmixJob) Query(_ pmix.Proc, queries []pmix.Query, done func([]pmix.QueryResult, error)) {
	d := j.svc.d
	d.mu.Lock()
	var sets []wire.PsetInfo
	var data wire.JobData
	if jc := d.jobs[j.job]; jc != nil {
		sets = jc.latestSets("", false, true)
		data = jc.data
	}
	d.mu.Unlock()
	names := make([]string, len(sets))
	for i, s := range sets {
		names[i] = s.Name
	}
	var res []pmix.QueryResult
	asked := 0
	for _, q := range queries {
		for _, k := range q.Keys {
			asked++
			switch k {
			case pmix.KeyQueryNumPsets:
				res = append(res, pmix.QueryResult{Key: k, Value: uint64(len(sets))})
			case pmix.KeyQueryPsetNames:
				res = append(res, pmix.QueryResult{Key: k, Value: strings.Join(names, ",")})
			case pmix.KeyQueryPsetMembership:
				if i := slices.Index(names, q.Qualifiers[pmix.KeyPsetName]); i >= 0 {
					var members []pmix.Proc
					for r := range sets[i].Members.All() {
						members = append(members, pmixNameIn(&data, sets[i].Job, sets[i].Name, r)) // pmix_space.go
					}
					res = append(res, pmix.QueryResult{Key: k, Value: members})
				}
			}
		}
	}
	var err error
	if len(res) > 0 && len(res) < asked {
		err = &pmix.StatusError{Status: pmix.CodePartialSuccess, Msg: "dynrt: some query keys are not known"}
	}
	done(res, err)
}

// pmixStatus gives the name service's errors the PMIx status a client
// expects (MPI_Publish_name of a taken name, MPI_Lookup_name of an unknown
// one).
func pmixStatus(err error) error {
	code := 0
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wire.ErrExists):
		code = pmix.CodeDuplicateKey
	case errors.Is(err, wire.ErrNotFound):
		code = pmix.CodeNotFound
	case errors.Is(err, wire.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		code = pmix.CodeTimeout
	case errors.Is(err, wire.ErrPermission):
		code = pmix.CodeNoPermissions
	default:
		return err
	}
	return &pmix.StatusError{Status: code, Msg: err.Error()}
}

// closePMIx deregisters what remains at the daemon's end (processes
// that never reported their exit).
func (svc *pmixService) close() {
	svc.mu.Lock()
	jobs := slices.Collect(maps.Values(svc.jobs))
	svc.jobs, svc.procs = map[string]*pmixJob{}, map[procKey]*pmixProc{}
	srv := svc.srv
	svc.mu.Unlock()
	for _, j := range jobs {
		j.cancel()
		srv.DeregisterJob(j.ns)
		j.removeDir()
		svc.jobLeft(j.ns)
	}
	// libpmix leaves the topology file even at finalize. The server may
	// outlive the daemon (one per process): a later client that cannot
	// open the file discovers the topology itself.
	if svc.dir != "" {
		_ = os.RemoveAll(svc.dir)
	}
}
