package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/dynrt/dynrt/lib/pmix"
	"github.com/dynrt/dynrt/wire"
)

// Dynamic processes of PMIx jobs (docs/mpi.md "Open MPI (PMIx)"):
// MPI_Comm_spawn arrives as the PMIx spawn callback and takes the path of
// a PMI spawn (the master places and launches the new job, which belongs
// to the spawning job's tree); Open MPI then joins the two jobs with
// PMIx_Connect, as it does for MPI_Comm_connect/accept. A connect is a
// collective through the master over the union of the namespaces'
// processes (a kv.fence with several jobs). Each node's entry carries the
// descriptions of its jobs, so that when it completes every server of the
// connect can register the namespaces it does not host (Node -1): its
// clients then address the other job's processes, whose data comes by
// direct modex (pmixJob.DirectModex).

// Fence ids and data keys of connects.
const (
	pmixConnectID    = "pmix.connect"
	pmixDisconnectID = "pmix.disconnect"
	pmixJobKey       = "pmix.job" // a job's description (pmix.Job as JSON)
)

// pmixDyn is the dynamic-process state of the PMIx service: the
// namespaces registered here without local processes (by a connect),
// each with the local jobs that connected to it; the last of them to end
// here deregisters it.
type pmixDyn struct {
	mu      sync.Mutex
	foreign map[string]map[string]bool
}

// Spawn starts the job a process asks for through the master, as a PMI
// spawn does, and answers with its namespace once its processes started.
func (j *pmixJob) Spawn(p pmix.Proc, jobInfo []pmix.KV, apps []pmix.App, done func(string, error)) {
	j.svc.d.log.Debug("pmix spawn", "job", j.ns, "rank", p.Rank, "info", jobInfo, "apps", apps)
	req, err := pmixSpawnReq(j.job, j.base+p.Rank, jobInfo, apps, findInCwd)
	if err != nil {
		done("", &pmix.StatusError{Status: pmix.CodeBadParam, Msg: err.Error()})
		return
	}
	var rep wire.PMISpawnReply
	if err := j.svc.d.master.Call(j.ctx, wire.KindPMISpawn, req, &rep); err != nil {
		j.svc.d.log.Warn("pmix spawn", "job", j.ns, "rank", p.Rank, "err", err)
		done("", &pmix.StatusError{Status: pmix.CodeFailedToLaunch, Msg: err.Error()})
		return
	}
	for r, c := range rep.Codes {
		if c != 0 {
			done("", &pmix.StatusError{Status: pmix.CodeFailedToLaunch, Msg: fmt.Sprintf("dynrt: rank %d of spawned job %s failed to start (code %d)", r, rep.Job, c)})
			return
		}
	}
	done(rep.Job, nil)
}

// pmixSpawnReq translates a PMIx spawn into the master's request: the
// info keys Open MPI passes from MPI_Info (host, hostfile, wdir) become
// the ones the master reads for a PMI spawn, the app's environment
// (Open MPI's OMPI_PARENT_PORT) goes along, and a simple mapping policy
// is kept. find resolves a program named without a slash (see findInCwd).
func pmixSpawnReq(job string, rank uint32, jobInfo []pmix.KV, apps []pmix.App, find func(prog, cwd string) string) (*wire.PMISpawnReq, error) {
	req := &wire.PMISpawnReq{Job: job, Rank: rank}
	for _, kv := range jobInfo {
		if kv.Key == pmixKeyMapBy {
			m, err := pmixMapBy(kv.Value)
			if err != nil {
				return nil, err
			}
			req.MapBy = m
		}
	}
	for i, a := range apps {
		argv := a.Argv
		if a.Cmd != "" {
			argv = append([]string{a.Cmd}, argv[min(1, len(argv)):]...)
		}
		if len(argv) == 0 || argv[0] == "" {
			return nil, fmt.Errorf("dynrt: spawn: application %d names no program", i)
		}
		if a.MaxProcs <= 0 {
			return nil, fmt.Errorf("dynrt: spawn: application %d (%s) asks for %d processes", i, argv[0], a.MaxProcs)
		}
		app := wire.PMISpawnApp{Argv: argv, N: uint32(a.MaxProcs), Env: spawnEnv(a.Env)}
		wdir := a.Cwd
		for _, kv := range a.Info {
			switch kv.Key {
			case pmixKeyHost, pmixKeyAddHost:
				app.Info = append(app.Info, wire.KV{Key: "host", Value: []byte(kv.Value)})
			case pmixKeyHostfile, pmixKeyAddHostfile:
				app.Info = append(app.Info, wire.KV{Key: "hostfile", Value: []byte(kv.Value)})
			case pmixKeyWdir:
				wdir = kv.Value
			case pmixKeyMapBy:
				m, err := pmixMapBy(kv.Value)
				if err != nil {
					return nil, err
				}
				req.MapBy = m
			}
		}
		if wdir != "" {
			app.Info = append(app.Info, wire.KV{Key: "wdir", Value: []byte(wdir)})
		}
		if !strings.Contains(argv[0], "/") && find != nil {
			argv[0] = find(argv[0], wdir)
		}
		req.Apps = append(req.Apps, app)
	}
	return req, nil
}

// spawnEnv is what of a spawn's app environment the new processes get:
// Open MPI 4.1 passes the spawning process's OMPI_ variables along, among
// them what the daemon set for the parent's job on the parent's node
// (its scratch directory), which the children get for their own job and
// node, and Open MPI's per-job values (its size, the transport key).
func spawnEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case ompiTmpEnv, vaderDirEnv, "OMPI_MCA_orte_ess_num_procs", "OMPI_MCA_orte_precondition_transports":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// findInCwd resolves a spawned program named without a slash as
// mpirun.openmpi does: from $PATH, else from the working directory of the
// spawn (where MPICH programs would give the info key path).
func findInCwd(prog, cwd string) string {
	if _, err := exec.LookPath(prog); err == nil || cwd == "" {
		return prog
	}
	p := filepath.Join(cwd, prog)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return p
	}
	return prog
}

// PMIx keys of spawn requests (pmix_common.h).
const (
	pmixKeyHost        = "pmix.host"
	pmixKeyAddHost     = "pmix.addhost"
	pmixKeyHostfile    = "pmix.hostfile"
	pmixKeyAddHostfile = "pmix.addhostfile"
	pmixKeyWdir        = "pmix.wdir"
	pmixKeyMapBy       = "pmix.mapby"
)

// pmixMapBy maps a PMIx mapping policy (Open MPI's --map-by syntax, with
// modifiers after a colon) onto dynrt's: by node, or by slot.
func pmixMapBy(v string) (string, error) {
	f := strings.Split(strings.ToLower(strings.TrimSpace(v)), ":")
	switch f[0] {
	case "", "slot", "core", "hwthread", "socket", "package", "numa", "l3cache", "l2cache", "l1cache", "board":
		return wire.MapBySlot, nil
	case "node":
		return wire.MapByNode, nil
	case "ppr":
		if len(f) >= 3 && f[1] == "1" && f[2] == "node" {
			return wire.MapByNode, nil
		}
	}
	return "", fmt.Errorf("dynrt: spawn: mapping policy %q is not supported (dynrt maps by slot or by node; ppr:1:node is by node)", v)
}

// Connect and Disconnect: pmixJob is a pmix.Connector.

func (j *pmixJob) Connect(procs []pmix.Proc, done func(error)) {
	err := j.svc.connect(j.ctx, procs, true)
	if err != nil {
		j.svc.d.log.Warn("pmix connect", "job", j.ns, "err", err)
	}
	done(err)
}

func (j *pmixJob) Disconnect(procs []pmix.Proc, done func(error)) {
	err := j.svc.connect(j.ctx, procs, false)
	if err != nil {
		j.svc.d.log.Warn("pmix disconnect", "job", j.ns, "err", err)
	}
	done(err)
}

// pmixConnectProcs groups a connect's processes by namespace, in namespace
// order: a namespace given with RankWildcard takes part whole (nil ranks).
// Pure.
func pmixConnectProcs(procs []pmix.Proc) (map[string][]uint32, []wire.ProcRanges) {
	parts := map[string][]uint32{}
	whole := map[string]bool{}
	for _, p := range procs {
		if p.Rank == pmix.RankWildcard {
			whole[p.Nspace] = true
			parts[p.Nspace] = nil
			continue
		}
		if !whole[p.Nspace] {
			parts[p.Nspace] = append(parts[p.Nspace], p.Rank)
		}
	}
	var fence []wire.ProcRanges
	for _, ns := range slices.Sorted(maps.Keys(parts)) {
		rs := parts[ns]
		if rs != nil {
			slices.Sort(rs)
			rs = slices.Compact(rs)
			parts[ns] = rs
		}
		fence = append(fence, wire.ProcRanges{Job: ns, Ranks: wire.RangesOf(rs)})
	}
	return parts, fence
}

// connect runs a connect (or disconnect) for this node's participants.
func (svc *pmixService) connect(ctx context.Context, procs []pmix.Proc, connect bool) error {
	svc.d.log.Debug("pmix connect", "connect", connect, "procs", procs)
	if !connect {
		_, err := svc.collective(ctx, pmixDisconnectID, procs, false, nil)
		return err
	}
	data, err := svc.collective(ctx, pmixConnectID, procs, true, func(j *pmixJob, local []uint32) ([]wire.ProcKV, error) {
		desc, err := json.Marshal(j.desc)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ns, err)
		}
		return []wire.ProcKV{{Job: j.ns, Rank: local[0], Data: []wire.KV{{Key: pmixJobKey, Value: desc}}}}, nil
	})
	if err != nil {
		return err
	}
	return svc.connected(data)
}

// fence runs a fence over processes of several jobs, or some processes
// of one (Open MPI's MPI_Comm_disconnect fences both jobs of an
// intercommunicator): this node's contribution data goes along with its
// first local participant, and the answer is every node's, concatenated.
func (svc *pmixService) fence(ctx context.Context, procs []pmix.Proc, data []byte) ([]byte, error) {
	sent := false
	got, err := svc.collective(ctx, pmixFenceID, procs, true, func(j *pmixJob, local []uint32) ([]wire.ProcKV, error) {
		if sent {
			return nil, nil
		}
		sent = true
		return []wire.ProcKV{{Job: j.ns, Rank: local[0], Data: []wire.KV{{Key: pmixBlobKey, Value: data}}}}, nil
	})
	var all []byte
	for _, pk := range got {
		for _, kv := range pk.Data {
			if kv.Key == pmixBlobKey {
				all = append(all, kv.Value...)
			}
		}
	}
	return all, err
}

// collective enters this node's participants among procs into the
// master's fence id over procs: one entry per local job, all of the same
// fence, each with what contribute gives for the job's participants here.
// It returns the collected data.
func (svc *pmixService) collective(ctx context.Context, id string, procs []pmix.Proc, collect bool,
	contribute func(j *pmixJob, local []uint32) ([]wire.ProcKV, error)) ([]wire.ProcKV, error) {
	parts, _ := pmixConnectProcs(procs)
	// The master knows dynrt's names: an ADD's namespace is ranks of its
	// job there (pmix_space.go).
	_, fence := pmixConnectProcs(svc.d.pmixDynrt(procs))
	var entries []*wire.FenceReq
	for _, ns := range slices.Sorted(maps.Keys(parts)) {
		svc.mu.Lock()
		j := svc.jobs[ns]
		svc.mu.Unlock()
		if j == nil {
			continue // no process of it here
		}
		local := j.desc.LocalRanks()
		if rs := parts[ns]; rs != nil {
			local = slices.DeleteFunc(local, func(r uint32) bool { _, ok := slices.BinarySearch(rs, r); return !ok })
		}
		if len(local) == 0 {
			continue
		}
		dlocal := make([]uint32, len(local))
		for i, r := range local {
			dlocal[i] = j.base + r
		}
		e := &wire.FenceReq{ID: id, Procs: fence, Collect: collect, Job: j.job, Local: wire.RangesOf(dlocal)}
		if contribute != nil {
			data, err := contribute(j, local)
			if err != nil {
				return nil, fmt.Errorf("dynrt: %s: %w", id, err)
			}
			e.Data = data
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("dynrt: %s without a participant on this node", id)
	}
	reps := make([]wire.FenceReply, len(entries))
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Go(func() { errs[i] = svc.d.master.Call(ctx, wire.KindFence, e, &reps[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("dynrt: %s: %w", id, err)
	}
	return reps[0].Data, nil
}

// connected registers the namespaces of a connect that are not hosted
// here, tied to the local jobs of the connect (whose end here
// deregisters them).
func (svc *pmixService) connected(data []wire.ProcKV) error {
	svc.mu.Lock()
	srv := svc.srv
	var users []string
	for _, pk := range data {
		if svc.jobs[pk.Job] != nil && !slices.Contains(users, pk.Job) {
			users = append(users, pk.Job)
		}
	}
	var regs []*pmix.Job
	x := &svc.dyn
	x.mu.Lock()
	if x.foreign == nil {
		x.foreign = map[string]map[string]bool{}
	}
	var err error
	for _, pk := range data {
		for _, kv := range pk.Data {
			if kv.Key != pmixJobKey || svc.jobs[pk.Job] != nil {
				continue
			}
			if x.foreign[pk.Job] == nil {
				desc := &pmix.Job{}
				if e := json.Unmarshal(kv.Value, desc); e != nil {
					err = errors.Join(err, fmt.Errorf("dynrt: connect: description of job %s: %w", pk.Job, e))
					continue
				}
				desc.Node, desc.Tmpdir = -1, ""
				x.foreign[pk.Job] = map[string]bool{}
				regs = append(regs, desc)
			}
			for _, u := range users {
				x.foreign[pk.Job][u] = true
			}
		}
	}
	x.mu.Unlock()
	svc.mu.Unlock()
	for _, desc := range regs {
		if e := srv.RegisterJob(desc, &pmixForeign{svc: svc, ns: desc.Nspace}); e != nil {
			err = errors.Join(err, e)
		}
	}
	return err
}

// users returns the local jobs that connected to the foreign namespace
// ns (lock order: pmixService.mu before pmixDyn.mu).
func (x *pmixDyn) users(ns string) map[string]bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return maps.Clone(x.foreign[ns])
}

// jobLeft deregisters the namespaces that only the local job ns had
// connected to, once it has ended here.
func (svc *pmixService) jobLeft(ns string) {
	x := &svc.dyn
	x.mu.Lock()
	var drop []string
	for f, users := range x.foreign {
		delete(users, ns)
		if len(users) == 0 {
			drop = append(drop, f)
			delete(x.foreign, f)
		}
	}
	x.mu.Unlock()
	svc.mu.Lock()
	srv := svc.srv
	svc.mu.Unlock()
	for _, f := range drop {
		srv.DeregisterJob(f)
	}
}

// pmixForeign is the Handler of a namespace registered here without local
// processes: no client of it calls, but local clients ask for its
// processes' data.
type pmixForeign struct {
	svc *pmixService
	ns  string
}

func (f *pmixForeign) ClientConnected(_ pmix.Proc, done func(error)) { done(nil) }
func (f *pmixForeign) ClientFinalized(_ pmix.Proc, done func(error)) { done(nil) }

func (f *pmixForeign) Abort(p pmix.Proc, _ int, _ string, _ []pmix.Proc, done func(error)) {
	done(&pmix.StatusError{Status: pmix.CodeNotSupported, Msg: "dynrt: abort from " + p.String() + ", which is not a process of this node"})
}

// Fence: a fence of local processes over several jobs comes here when
// this one is named first (libpmix routes by the first process).
func (f *pmixForeign) Fence(procs []pmix.Proc, _ bool, data []byte, done func([]byte, error)) {
	done(f.svc.fence(f.ctx(), procs, data))
}

// ctx bounds what a foreign namespace's callbacks wait for: the local
// job's context of the first process they name that runs here (the
// foreign namespace stays registered as long as such a job lives here).
func (f *pmixForeign) ctx() context.Context {
	f.svc.mu.Lock()
	defer f.svc.mu.Unlock()
	for ns := range f.svc.dyn.users(f.ns) {
		if j := f.svc.jobs[ns]; j != nil {
			return j.ctx
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no local job connected to it is left
	return ctx
}

func (f *pmixForeign) DirectModex(p pmix.Proc, done func([]byte, error)) {
	done(f.svc.fetchModex(f.ctx(), p))
}

// overrideEnv returns env with the variables of add (KEY=value) set,
// replacing earlier values of the same keys (a copy; env is shared by
// the job's ranks).
func overrideEnv(env, add []string) []string {
	if len(add) == 0 {
		return env
	}
	keys := map[string]bool{}
	for _, kv := range add {
		k, _, _ := strings.Cut(kv, "=")
		keys[k] = true
	}
	out := make([]string, 0, len(env)+len(add))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !keys[k] {
			out = append(out, kv)
		}
	}
	return append(out, add...)
}
