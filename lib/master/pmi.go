package master

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/wire"
)

// The master's part of the PMI service (docs/mpi.md). Daemons answer PMI
// themselves (lib/daemon/pmi.go); the master adds what needs the whole
// DVM: the PMI facts of a job at launch (kvsname, universe size, the
// executable blocks and preput data of a spawned job), spawn itself (a
// new job owned by the spawning job's launcher), and the consequences of
// what daemons report: a job whose processes speak PMI is static (no
// resource changes: MPI programs do not know about them), and a process
// that leaves PMI without finalize fails its job, as under Hydra.
//
// A spawned job lives within its parent's lifetime as under mpiexec,
// which waits for spawned processes: job.wait of a job answers once it
// and every job it spawned (transitively) have ended, and killing a job
// kills the jobs it spawned.

// pmiState is the PMI part of the loop's state.
type pmiState struct {
	// next carries a spawn's extras into the launch it is about to make
	// (launch picks them up through pmiLaunch, on the loop, before it
	// returns).
	next *pmiSpawn
}

type pmiSpawn struct {
	parent *job   // the spawning job
	rank   uint32 // the spawning rank
	preput []wire.KV
	blocks []wire.PMIBlock
	nodes  [][]int // per block: the node indices its info keys allow (nil: any)
}

// pmiJob is what the master knows about a job's PMI service.
type pmiJob struct {
	info     *wire.PMIJob // sent with node.launch; nil = launched without PMI
	used     bool         // a process began a PMI session: the job is static
	parent   string       // the spawning job, for a spawned one
	spawner  *job         // the same job (it may be forgotten by name before its children end)
	children []*job       // jobs this one spawned
	dead     []uint32     // keep-going: ranks that left PMI without finalize, in order (pmi_dead.go)
	// malleable: PMIx processes that declared they follow resource
	// changes (DYNRT_PMIX_MALLEABLE, docs/mpi.md).
	malleable map[uint32]bool
	// spaces: the PMIx namespaces of the ranks ADDs started, oldest
	// first (pmix_jobctl.go); the daemons get them in the job data. An
	// aborted ADD's stays: the next ADD gets its ranks in a namespace of
	// its own, and the aborted one's delta set keeps naming its own.
	spaces []wire.PMIxSpace
}

// maxSpawnProcs bounds one spawn (a broken request must not exhaust the
// master).
const maxSpawnProcs = 1 << 20

// checkPMIMode validates JobLaunchReq.PMI.
func checkPMIMode(mode string) error {
	switch mode {
	case "", wire.PMIAuto, wire.PMIFD, wire.PMIPort, wire.PMINone, wire.PMIPMIx, wire.PMIBoth:
		return nil
	}
	return wire.Errorf(wire.ErrInvalid, "master: unknown PMI mode %q (want %s, %s, %s, %s, %s or %s)", mode, wire.PMIAuto, wire.PMIPMIx, wire.PMIFD, wire.PMIBoth, wire.PMIPort, wire.PMINone)
}

// kvsName is the PMI kvsname (PMI-2 jobid) of a job.
func kvsName(ns string) string { return "kvs_" + ns }

// pmiLaunch returns the PMI part of j's node.launch bodies, deciding it
// on first use: nil when the job has no PMI service.
func (s *state) pmiLaunch(j *job) *wire.PMIJob {
	if j.pmi != nil {
		return j.pmi.info
	}
	j.pmi = &pmiJob{}
	mode := j.req.PMI
	switch mode {
	case wire.PMINone:
		s.pmi.next = nil
		return nil
	case "", wire.PMIAuto:
		mode = wire.PMIFD
	}
	info := &wire.PMIJob{Mode: mode, KVS: kvsName(j.ns), Universe: s.universe(j.req.Universe), KeepGoing: j.req.KeepGoing}
	if sp := s.pmi.next; sp != nil {
		s.pmi.next = nil
		info.Parent = kvsName(sp.parent.ns)
		info.ParentJob, info.ParentRank = sp.parent.ns, sp.rank
		info.Preput = sp.preput
		info.Blocks = sp.blocks
		j.pmi.parent, j.pmi.spawner = sp.parent.ns, sp.parent
		if sp.parent.pmi != nil {
			sp.parent.pmi.children = append(sp.parent.pmi.children, j)
		}
	}
	j.pmi.info = info
	return info
}

// universe is the MPI_UNIVERSE_SIZE a job's processes read (0: unset, as
// under Hydra without -usize; MPICH's test suite, for one, reads a set
// value as "no room to spawn beyond it").
func (s *state) universe(u int32) int {
	if u == wire.UniverseSlots {
		return s.alloc.Total()
	}
	return int(max(u, 0))
}

// staticErr refuses a resource change on a job whose processes speak PMI
// (resource changes call it; nil = allowed).
func (j *job) staticErr() error {
	if j.pmixJob() {
		if j.pmixMalleable() {
			return nil // announced to its processes through PMIx events (lib/daemon/pmix_events.go)
		}
		// Open MPI's communicators know nothing of a change; a program
		// that speaks PMIx itself may follow one, if it says so.
		return wire.Errorf(wire.ErrState, "master: job %s (%s) is an Open MPI job (its processes speak PMIx) and not every process of it declared itself malleable: dynrt cannot carry a resource change through to Open MPI, so its processes cannot be changed. A program that speaks PMIx directly opts in by sending the event DYNRT_PMIX_MALLEABLE (dynrt_pmix.h) to its daemon from every process; a malleable MPI program uses dynrt's session API (docs/mpi.md, docs/session.md, libdynrt)", j.app, j.ns)
	}
	if j.pmi != nil && j.pmi.used {
		return wire.Errorf(wire.ErrState, "master: job %s (%s) was launched as an MPI job without dynrt's session API; its processes cannot be changed (MPI_Comm_spawn through PMI works)", j.app, j.ns)
	}
	return nil
}

func (m *Master) pmiRoutes() {
	wire.HandleTyped(m.daemonMux, wire.KindPMIReport, m.handlePMIReport)
	wire.HandleTyped(m.daemonMux, wire.KindPMISpawn, m.handlePMISpawn)
	wire.HandleTyped(m.daemonMux, wire.KindPMIJobCtl, m.handlePMIJobCtl)
}

func (m *Master) handlePMIReport(ctx context.Context, _ *wire.Request, b *wire.PMIReport) (any, error) {
	return nil, do(ctx, m, func(s *state) error {
		j := s.jobs[b.Job]
		if j == nil || j.done {
			return nil // ended meanwhile: nothing to do
		}
		switch b.What {
		case wire.PMIReportInit:
			if j.pmi != nil {
				j.pmi.used = true
			}
		case wire.PMIReportMalleable:
			if j.pmi != nil {
				if j.pmi.malleable == nil {
					j.pmi.malleable = map[uint32]bool{}
				}
				j.pmi.malleable[b.Rank] = true
			}
		case wire.PMIReportUnfinished:
			if j.req.KeepGoing {
				s.pmiDead(j, b.Rank)
				return nil
			}
			if j.failure == nil {
				node := "?"
				if p := j.procs.at(b.Rank); p != nil {
					node = s.nodes[p.node].name
				}
				j.failure = &failure{rank: b.Rank, code: 1, msg: fmt.Sprintf("rank %d on %s %s", b.Rank, node, b.Msg), how: wire.FailExit}
			}
			// Its peers would wait for it in a barrier forever: like
			// Hydra, end the job whatever keep-going says.
			s.killJob(j, killOrder{reason: reasonFailed})
		default:
			return wire.Errorf(wire.ErrInvalid, "master: unknown PMI report %q", b.What)
		}
		return nil
	})
}

// handlePMISpawn starts the job a PMI spawn asks for and answers once its
// processes have been started (or failed to start).
func (m *Master) handlePMISpawn(ctx context.Context, _ *wire.Request, b *wire.PMISpawnReq) (any, error) {
	rep, err := ask(ctx, m, func(s *state, reply func(*wire.PMISpawnReply, error)) {
		s.pmiSpawn(b, reply)
	})
	if err != nil {
		return nil, err
	}
	// The launch is answered before launchDone books start failures: read
	// them in a later turn of the loop.
	err = do(ctx, m, func(s *state) error {
		j := s.jobs[rep.Job]
		if j == nil {
			return nil
		}
		rep.Codes = make([]int, j.procs.len())
		failed := false
		j.procs.each(func(r uint32, p *jproc) {
			if p.state == wire.ProcStateFailed {
				rep.Codes[r] = p.code
				failed = true
			}
		})
		if !failed {
			rep.Codes = nil
		}
		return nil
	})
	return rep, err
}

func (s *state) pmiSpawn(b *wire.PMISpawnReq, reply func(*wire.PMISpawnReply, error)) {
	parent := s.jobs[b.Job]
	switch {
	case parent == nil || parent.done:
		reply(nil, wire.Errorf(wire.ErrState, "master: spawn from job %s, which is not running", b.Job))
		return
	case parent.owner == nil || parent.owner.closed:
		reply(nil, wire.Errorf(wire.ErrState, "master: spawn from job %s, whose launcher is gone", b.Job))
		return
	case parent.pmi == nil || parent.pmi.info == nil:
		reply(nil, wire.Errorf(wire.ErrState, "master: spawn from job %s, which has no PMI service", b.Job))
		return
	case len(b.Apps) == 0:
		reply(nil, wire.Errorf(wire.ErrInvalid, "master: spawn of nothing"))
		return
	}
	sp := &pmiSpawn{parent: parent, rank: b.Rank, preput: b.Preput}
	total := uint32(0)
	for i, a := range b.Apps {
		if len(a.Argv) == 0 || a.Argv[0] == "" || a.N == 0 {
			reply(nil, wire.Errorf(wire.ErrInvalid, "master: spawn: executable %d has no program or no processes", i))
			return
		}
		if a.N > maxSpawnProcs || total+a.N > maxSpawnProcs {
			reply(nil, wire.Errorf(wire.ErrNoResources, "master: spawn of more than %d processes", maxSpawnProcs))
			return
		}
		argv, wdir := spawnApp(a, parent.req.Wdir)
		hosts, err := spawnHosts(a, parent.req.Wdir)
		if err != nil {
			reply(nil, fmt.Errorf("master: spawn: executable %d: %w", i, err))
			return
		}
		nodes, err := s.hostNodes(hosts)
		if err != nil {
			reply(nil, fmt.Errorf("master: spawn: executable %d: %w", i, err))
			return
		}
		sp.blocks = append(sp.blocks, wire.PMIBlock{Ranks: wire.Span(total, total+a.N-1), Argv: argv, Wdir: wdir, Env: a.Env})
		sp.nodes = append(sp.nodes, nodes)
		total += a.N
	}
	mapBy := parent.req.MapBy
	switch b.MapBy {
	case "":
	case wire.MapBySlot, wire.MapByNode:
		mapBy = b.MapBy
	default:
		reply(nil, wire.Errorf(wire.ErrInvalid, "master: spawn: map-by %q (want %s or %s)", b.MapBy, wire.MapBySlot, wire.MapByNode))
		return
	}
	pmiMode := parent.req.PMI
	if parent.pmi.info.Mode == wire.PMIPMIx {
		// An Open MPI job spawns Open MPI processes: the choice --pmi
		// auto made from the parent's program stands for them.
		pmiMode = wire.PMIPMIx
	}
	req := &wire.JobLaunchReq{
		// Oversubscribe: like Hydra, which places a spawn's processes
		// over its hosts' cores and wraps around, never refusing one
		// for room (MPI_Comm_spawn cannot wait, and MPICH's PMI-2
		// client would not even see the refusal).
		Argv: sp.blocks[0].Argv, N: total, MapBy: mapBy, Oversubscribe: true,
		Env: parent.req.Env, Wdir: parent.req.Wdir, KeepGoing: parent.req.KeepGoing, Output: parent.req.Output,
		PMI: pmiMode, Universe: parent.req.Universe,
	}
	if parent.req.TimeoutMS > 0 {
		// The parent's time limit covers what it spawned (its launcher
		// waits for both).
		left := time.Until(parent.started.Add(time.Duration(parent.req.TimeoutMS) * time.Millisecond))
		req.TimeoutMS = max(left.Milliseconds(), 1)
	}
	s.pmi.next = sp
	s.launch(parent.owner.c, req, func(rep *wire.JobLaunchReply, err error) {
		if err != nil {
			reply(nil, fmt.Errorf("master: spawn from job %s: %w", parent.ns, err))
			return
		}
		reply(&wire.PMISpawnReply{Job: rep.Job, KVS: kvsName(rep.Job)}, nil)
	})
	s.pmi.next = nil // not consumed when the launch failed early
}

// spawnApp applies the MPI_Info keys that shape the command: path (the
// directory of the program) and wdir (relative to the spawning job's
// directory). spawnHosts reads the placement keys; others
// are ignored.
func spawnApp(a wire.PMISpawnApp, parentWdir string) ([]string, string) {
	argv := append([]string(nil), a.Argv...)
	wdir := parentWdir
	for _, kv := range a.Info {
		v := string(kv.Value)
		switch kv.Key {
		case "wdir":
			if v != "" {
				if !filepath.IsAbs(v) && parentWdir != "" {
					v = filepath.Join(parentWdir, v)
				}
				wdir = v
			}
		case "path":
			// Hydra's rule: path, a slash, the command, as they are
			// ("." + "prog" is "./prog", run from wdir; path.Join would
			// make it "prog", looked up in $PATH).
			if v != "" {
				argv[0] = v + "/" + argv[0]
			}
		}
	}
	return argv, wdir
}

// spawnHosts returns the hosts an executable's info keys name: host and
// hosts (comma-separated lists, as Hydra reads them) and hostfile (a
// file of the forms --hostfile takes, relative to the spawning job's
// directory; its slot counts are not used: the DVM's slots apply). nil
// means no key named any.
func spawnHosts(a wire.PMISpawnApp, parentWdir string) ([]string, error) {
	var hosts []string
	for _, kv := range a.Info {
		v := strings.TrimSpace(string(kv.Value))
		switch kv.Key {
		case "host", "hosts":
			for h := range strings.SplitSeq(v, ",") {
				if h = strings.TrimSpace(h); h != "" {
					hosts = append(hosts, h)
				}
			}
		case "hostfile":
			if v == "" {
				continue
			}
			if !filepath.IsAbs(v) && parentWdir != "" {
				v = filepath.Join(parentWdir, v)
			}
			nodes, err := launcher.ReadHostfile(v, 1)
			if err != nil {
				return nil, wire.Errorf(wire.ErrInvalid, "info key hostfile: %w", err)
			}
			if len(nodes) == 0 {
				return nil, wire.Errorf(wire.ErrInvalid, "hostfile %s names no host", v)
			}
			for _, n := range nodes {
				hosts = append(hosts, n.Name)
			}
		}
	}
	return hosts, nil
}

// hostNodes maps host names to node indices: a node's name matches
// itself, and a host name matches every node whose daemon runs on that
// host (all virtual nodes of this machine). nil hosts → nil (any node).
func (s *state) hostNodes(hosts []string) ([]int, error) {
	if len(hosts) == 0 {
		return nil, nil
	}
	var out []int
	for _, h := range hosts {
		found := false
		for _, n := range s.nodes {
			if n.name == h || n.host == h {
				out = append(out, n.idx)
				found = true
			}
		}
		if !found {
			names := make([]string, len(s.nodes))
			for i, n := range s.nodes {
				names[i] = n.name
			}
			return nil, wire.Errorf(wire.ErrNotFound, "host %q is not a node of DVM %s (nodes: %s)", h, s.id, strings.Join(names, ", "))
		}
	}
	return out, nil
}

// place allocates the processes of a new job: in one piece, or block by
// block for a spawn whose info keys confine blocks to some nodes (ranks
// are handed out in order, so each block gets its own ranks).
func (s *state) place(ns string, n int, opts alloc.Options) ([]alloc.Proc, error) {
	sp := s.pmi.next
	if sp == nil || !slices.ContainsFunc(sp.nodes, func(x []int) bool { return x != nil }) {
		return s.allocate(ns, n, opts)
	}
	var out []alloc.Proc
	for i, b := range sp.blocks {
		o := opts
		o.Nodes = sp.nodes[i]
		ps, err := s.allocate(ns, b.Ranks.Count(), o)
		if err != nil {
			if len(out) > 0 {
				_ = s.alloc.ReleaseJob(ns)
			}
			return nil, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

// spawnedLive reports whether a job that j spawned, or one of theirs, has
// not ended yet.
func (s *state) spawnedLive(j *job) bool {
	if j.pmi == nil {
		return false
	}
	for _, c := range j.pmi.children {
		if !c.done || s.spawnedLive(c) {
			return true
		}
	}
	return false
}

// settleWaits answers the job.wait requests of j, then of the job that
// spawned it and so on up, as far as each has ended with nothing it
// spawned still running. endJob calls it.
func (s *state) settleWaits(j *job) {
	for j != nil && j.done && !s.spawnedLive(j) {
		for _, w := range j.waiters {
			s.answerWait(j, w)
		}
		j.waiters = nil
		if j.pmi == nil {
			return
		}
		j = j.pmi.spawner
	}
}

// waitEnd is what job.wait reports for an ended job: its own end, or,
// when it succeeded but a job it spawned did not, that job's failure (so
// its launcher exits non-zero, as mpiexec does when any process fails).
func (s *state) waitEnd(j *job) wire.JobInfo {
	end := j.end
	if end.State != wire.JobStateDone || end.Code != 0 || end.Reason != wire.JobEndNone {
		return end
	}
	if f := failedSpawn(j); f != nil {
		end.Code = f.end.Code
		end.Msg = fmt.Sprintf("%s (spawned by job %s)", f.end.Msg, j.ns)
	}
	return end
}

// failedSpawn returns the first job j spawned (transitively) that did not
// succeed, or nil. A job whose processes could not start does not count:
// the spawn's error codes told the parent already, and it went on.
func failedSpawn(j *job) *job {
	if j.pmi == nil {
		return nil
	}
	for _, c := range j.pmi.children {
		startFailed := c.failure != nil && c.procs.at(c.failure.rank) != nil && c.procs.at(c.failure.rank).state == wire.ProcStateFailed
		if c.done && (c.end.State != wire.JobStateDone || c.end.Code != 0) && !startFailed {
			return c
		}
		if f := failedSpawn(c); f != nil {
			return f
		}
	}
	return nil
}

// spawnRoot returns the job at the root of j's spawn tree: the one its
// launcher started (j itself when it was not spawned).
func spawnRoot(j *job) *job {
	for j.pmi != nil && j.pmi.spawner != nil {
		j = j.pmi.spawner
	}
	return j
}

// killSpawned passes a kill of j on to the live jobs it spawned. A
// failure of j reaches them as an abort naming it.
func (s *state) killSpawned(j *job, k killOrder) {
	if j.pmi == nil {
		return
	}
	if k.reason == reasonFailed {
		k = killOrder{reason: reasonAbort, sig: k.sig, grace: k.grace, msg: fmt.Sprintf("job %s, which spawned it, failed", j.ns)}
	}
	for _, c := range j.pmi.children {
		if !c.done {
			s.killJob(c, k)
		}
	}
}
