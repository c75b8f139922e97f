package master

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/dynrt/dynrt/lib/daemon"
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

// pmiState is the PMI part of the loop's state.
type pmiState struct {
	// next carries a spawn's extras into the launch it is about to make
	// (launch picks them up through pmiLaunch, on the loop, before it
	// returns).
	next *pmiSpawn
}

type pmiSpawn struct {
	parent string // namespace of the spawning job
	preput []wire.KV
	blocks []daemon.PMIBlock
}

// pmiJob is what the master knows about a job's PMI service.
type pmiJob struct {
	info   *daemon.PMIJob // sent with node.launch; nil = launched without PMI
	used   bool           // a process began a PMI session: the job is static
	parent string         // the spawning job, for a spawned one
}

// maxSpawnProcs bounds one spawn (a broken request must not exhaust the
// master).
const maxSpawnProcs = 1 << 20

// checkPMIMode validates JobLaunchReq.PMI.
func checkPMIMode(mode string) error {
	switch mode {
	case "", wire.PMIAuto, wire.PMIFD, wire.PMIPort, wire.PMINone:
		return nil
	}
	return wire.Errorf(wire.ErrInvalid, "master: unknown PMI mode %q (want %s, %s, %s or %s)", mode, wire.PMIAuto, wire.PMIFD, wire.PMIPort, wire.PMINone)
}

// kvsName is the PMI kvsname (PMI-2 jobid) of a job.
func kvsName(ns string) string { return "kvs_" + ns }

// pmiLaunch returns the PMI part of j's node.launch bodies, deciding it
// on first use: nil when the job has no PMI service.
func (s *state) pmiLaunch(j *job) *daemon.PMIJob {
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
	info := &daemon.PMIJob{Mode: mode, KVS: kvsName(j.ns), Universe: s.alloc.Total()}
	if sp := s.pmi.next; sp != nil {
		s.pmi.next = nil
		info.Parent = kvsName(sp.parent)
		info.Preput = sp.preput
		info.Blocks = sp.blocks
		j.pmi.parent = sp.parent
	}
	j.pmi.info = info
	return info
}

// staticErr refuses a resource change on a job whose processes speak PMI
// (resource changes call it; nil = allowed).
func (j *job) staticErr() error {
	if j.pmi != nil && j.pmi.used {
		return wire.Errorf(wire.ErrState, "master: job %s (%s) was launched as an MPI job without dynrt's session API; its processes cannot be changed (MPI_Comm_spawn through PMI works)", j.app, j.ns)
	}
	return nil
}

func (m *Master) pmiRoutes() {
	wire.HandleTyped(m.daemonMux, daemon.KindPMIReport, m.handlePMIReport)
	wire.HandleTyped(m.daemonMux, daemon.KindPMISpawn, m.handlePMISpawn)
}

func (m *Master) handlePMIReport(ctx context.Context, _ *wire.Request, b *daemon.PMIReport) (any, error) {
	return nil, do(ctx, m, func(s *state) error {
		j := s.jobs[b.Job]
		if j == nil || j.done {
			return nil // ended meanwhile: nothing to do
		}
		switch b.What {
		case daemon.PMIReportInit:
			if j.pmi != nil {
				j.pmi.used = true
			}
		case daemon.PMIReportUnfinished:
			if j.failure == nil {
				node := "?"
				if int(b.Rank) < len(j.procs) {
					node = s.nodes[j.procs[b.Rank].node].name
				}
				j.failure = &failure{rank: b.Rank, code: 1, msg: fmt.Sprintf("rank %d on %s %s", b.Rank, node, b.Msg)}
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
func (m *Master) handlePMISpawn(ctx context.Context, _ *wire.Request, b *daemon.PMISpawnReq) (any, error) {
	rep, err := ask(ctx, m, func(s *state, reply func(*daemon.PMISpawnReply, error)) {
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
		rep.Codes = make([]int, len(j.procs))
		failed := false
		for r, p := range j.procs {
			if p.state == wire.ProcStateFailed {
				rep.Codes[r] = p.code
				failed = true
			}
		}
		if !failed {
			rep.Codes = nil
		}
		return nil
	})
	return rep, err
}

func (s *state) pmiSpawn(b *daemon.PMISpawnReq, reply func(*daemon.PMISpawnReply, error)) {
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
	sp := &pmiSpawn{parent: parent.ns, preput: b.Preput}
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
		sp.blocks = append(sp.blocks, daemon.PMIBlock{Ranks: wire.Span(total, total+a.N-1), Argv: argv, Wdir: wdir})
		total += a.N
	}
	req := &wire.JobLaunchReq{
		Argv: sp.blocks[0].Argv, N: total, MapBy: parent.req.MapBy, Oversubscribe: parent.req.Oversubscribe,
		Env: parent.req.Env, Wdir: parent.req.Wdir, KeepGoing: parent.req.KeepGoing, Output: parent.req.Output,
		PMI: parent.req.PMI,
	}
	s.pmi.next = sp
	s.launch(parent.owner.c, req, func(rep *wire.JobLaunchReply, err error) {
		if err != nil {
			reply(nil, fmt.Errorf("master: spawn from job %s: %w", parent.ns, err))
			return
		}
		reply(&daemon.PMISpawnReply{Job: rep.Job, KVS: kvsName(rep.Job)}, nil)
	})
	s.pmi.next = nil // not consumed when the launch failed early
}

// spawnApp applies the MPI_Info keys Hydra honours: path (where to find a
// program named without a slash) and wdir (relative to the spawning
// job's directory). Others (host, hostfile, ...) are ignored.
func spawnApp(a daemon.PMISpawnApp, parentWdir string) ([]string, string) {
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
			if v != "" && !strings.Contains(argv[0], "/") {
				argv[0] = path.Join(v, argv[0])
			}
		}
	}
	return argv, wdir
}
