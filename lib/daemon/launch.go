package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/lib/proc"
	"github.com/dynrt/dynrt/lib/procenv"
	"github.com/dynrt/dynrt/wire"
)

// handleLaunch starts the ranks of a node.launch request. It is served
// inline, in arrival order with the master's other requests: the job data
// and sets that ride along are cached, and the ranks reserved (a kill that
// follows finds them), before the next request is read, so a set pushed
// after the launch finds the job (issue 11 item 14). The forks then run
// on a goroutine (wire.Later). Processes that cannot start are reported
// as ProcExited with Err set (and left out of the reply). The reply is
// sent once every rank has been forked; exits may reach the master before
// it.
func (d *Daemon) handleLaunch(ctx context.Context, _ *wire.Request, b *wire.LaunchReq) (any, error) {
	if len(b.Argv) == 0 || b.Argv[0] == "" {
		return nil, wire.Errorf(wire.ErrInvalid, "daemon %s: launch of job %s without a program", d.node, b.Job)
	}
	if err := b.Ranks.Check(); err != nil {
		return nil, err
	}
	if b.Mine {
		if err := d.mine(b); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	if d.stopping {
		d.mu.Unlock()
		return nil, wire.Errorf(wire.ErrState, "daemon %s is stopping", d.node)
	}
	jc := d.cacheJob(b.Data, b.Psets)
	if jc == nil {
		jc = d.ensureJob(b.Job, b.ID, b.App)
	}
	size := jc.data.Size
	ranks, entries, dups := d.reserve(b)
	d.mu.Unlock()
	for _, r := range dups {
		d.reportStartFailure(procKey{b.Job, r}, wire.Errorf(wire.ErrExists, "rank %d of job %s already runs on %s", r, b.Job, d.node))
	}
	return wire.Later(func() (any, error) {
		if d.cfg.BeforeFork != nil {
			d.cfg.BeforeFork(b.Job)
		}
		select { // the node index goes into every process's environment
		case <-d.registered:
		case <-ctx.Done():
			err := wire.Errorf(wire.ErrCanceled, "daemon %s: launch of job %s before registration: %w", d.node, b.Job, ctx.Err())
			for i, r := range ranks {
				d.unreserve(procKey{b.Job, r}, entries[i], err)
			}
			return nil, err
		}
		base := d.baseEnv(b, size, d.Index())
		return &wire.LaunchReply{Started: d.startRanks(b, base, ranks, entries)}, nil
	}), nil
}

// mine sets the ranks of a launch that says "the ranks the job data
// places here" (LaunchReq.Mine) from its data.
func (d *Daemon) mine(b *wire.LaunchReq) error {
	switch {
	case b.Data == nil || b.Data.Delta:
		return wire.Errorf(wire.ErrInvalid, "daemon %s: launch of job %s: \"mine\" needs the whole job data", d.node, b.Job)
	case len(b.Ranks) > 0:
		return wire.Errorf(wire.ErrInvalid, "daemon %s: launch of job %s names ranks and \"mine\": want one of them", d.node, b.Job)
	}
	for _, p := range b.Data.Placement {
		if p.Node == d.node {
			b.Ranks = p.Ranks
			return b.Ranks.Check()
		}
	}
	return nil // none here: the job's data and sets are cached all the same
}

// reserve enters a placeholder for each rank of b in d.live (counted in
// d.wg), so that kills and a stop see the ranks before they are forked.
// Ranks already running are returned as dups. d.mu must be held.
func (d *Daemon) reserve(b *wire.LaunchReq) (ranks []uint32, entries []*procEntry, dups []uint32) {
	for r := range b.Ranks.All() {
		key := procKey{b.Job, r}
		if _, dup := d.live[key]; dup {
			dups = append(dups, r)
			continue
		}
		e := &procEntry{out: d.newOutputSink(key, b.Output)}
		d.live[key] = e
		d.wg.Add(1)
		ranks, entries = append(ranks, r), append(entries, e)
	}
	return ranks, entries, dups
}

// unreserve drops the placeholder of a rank that will not start and
// reports why.
func (d *Daemon) unreserve(key procKey, e *procEntry, why error) {
	d.mu.Lock()
	if d.live[key] == e {
		delete(d.live, key)
	}
	d.mu.Unlock()
	e.out.close()
	d.stdin.drop(key)
	d.reportStartFailure(key, why)
	d.fenceProcEnded(key)
	d.wg.Done()
}

// startRanks forks the reserved ranks of a launch from as many goroutines
// as lib/proc has spawner threads: a fork holds its thread until the child
// has exec'd, so forking one rank at a time leaves the other cores idle
// (startRank is safe for concurrent use). It returns the ranks that
// started, in rank order.
func (d *Daemon) startRanks(b *wire.LaunchReq, base []string, ranks []uint32, entries []*procEntry) []wire.ProcStarted {
	type result struct {
		st wire.ProcStarted
		ok bool
	}
	res := make([]result, len(ranks))
	var next atomic.Int64
	work := func() {
		for i := next.Add(1) - 1; i < int64(len(ranks)); i = next.Add(1) - 1 {
			res[i].st, res[i].ok = d.startRank(b, base, ranks[i], entries[i])
		}
	}
	var wg sync.WaitGroup
	for range min(proc.Spawners(), len(ranks)) - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
	started := make([]wire.ProcStarted, 0, len(ranks))
	for _, r := range res {
		if r.ok {
			started = append(started, r.st)
		}
	}
	return started
}

// baseEnv is the environment shared by the ranks of a launch: the
// launcher's environment with the DYNRT_* variables replaced by ours.
func (d *Daemon) baseEnv(b *wire.LaunchReq, size, index uint32) []string {
	ours := []string{
		procenv.Daemon + "=" + d.sock,
		procenv.DVM + "=" + d.dvmRef,
		procenv.Dir + "=" + d.dir,
		procenv.Job + "=" + b.Job,
		procenv.App + "=" + b.App,
		procenv.Node + "=" + d.node,
		procenv.NodeIndex + "=" + strconv.FormatUint(uint64(index), 10),
		procenv.Token + "=" + d.cfg.Token,
		procenv.Size + "=" + strconv.FormatUint(uint64(size), 10),
	}
	env := make([]string, 0, len(b.Env)+len(ours)+2)
	for _, kv := range b.Env {
		if strings.HasPrefix(kv, "DYNRT_") && isOurs(kv) {
			continue
		}
		env = append(env, kv)
	}
	if d.cfg.Prefix != "" {
		env = PrefixEnv(env, d.cfg.Prefix)
	}
	if d.nodeAddr != "" {
		ours = append(ours, procenv.NodeAddr+"="+d.nodeAddr)
	}
	return append(env, ours...)
}

// PrefixEnv puts prefix/bin first in env's PATH and prefix/lib first in
// its LD_LIBRARY_PATH (setting them when absent; PATH then keeps the
// default search path after prefix/bin).
func PrefixEnv(env []string, prefix string) []string {
	out := slices.Clone(env)
	for _, v := range []struct{ key, dir, def string }{
		{"PATH", filepath.Join(prefix, "bin"), proc.DefaultPath},
		{"LD_LIBRARY_PATH", filepath.Join(prefix, "lib"), ""},
	} {
		i := slices.IndexFunc(out, func(kv string) bool { return strings.HasPrefix(kv, v.key+"=") })
		switch {
		case i < 0 && v.def == "":
			out = append(out, v.key+"="+v.dir)
		case i < 0:
			out = append(out, v.key+"="+v.dir+":"+v.def)
		case out[i] == v.key+"=":
			out[i] = v.key + "=" + v.dir
		default:
			out[i] = v.key + "=" + v.dir + ":" + strings.TrimPrefix(out[i], v.key+"=")
		}
	}
	return out
}

func isOurs(kv string) bool {
	k, _, _ := strings.Cut(kv, "=")
	switch k {
	case procenv.Daemon, procenv.DVM, procenv.Job, procenv.App, procenv.Rank, procenv.UID, procenv.Node, procenv.NodeIndex, procenv.Token, procenv.Size, procenv.NodeAddr, procenv.Dir:
		return true
	}
	return false
}

// startRank forks one reserved rank. It reports a failure to start to
// the master itself and returns ok=false.
func (d *Daemon) startRank(b *wire.LaunchReq, base []string, rank uint32, e *procEntry) (wire.ProcStarted, bool) {
	key := procKey{b.Job, rank}
	env := append(base[:len(base):len(base)],
		procenv.Rank+"="+strconv.FormatUint(uint64(rank), 10),
		procenv.UID+"="+strconv.FormatUint(wire.ProcUID(b.ID, rank), 10))

	d.mu.Lock()
	stopping := d.stopping
	d.mu.Unlock()
	if stopping {
		d.unreserve(key, e, wire.Errorf(wire.ErrState, "daemon %s is stopping", d.node))
		return wire.ProcStarted{}, false
	}

	spec := proc.Spec{Path: b.Argv[0], Args: b.Argv, Env: env, Dir: b.Wdir, Guard: d.guard, GuardGroup: b.Job}
	if e.out != nil {
		spec.Output = e.out.write
	}
	if b.Stdin && rank == 0 {
		spec.Stdin = d.stdin.open(key).r // fed by job.stdin (stdin.go)
	}
	// The start is not bound to the request: a process, once forked, is
	// reported whatever happens to the master's call.
	pp, err := d.pmiAttach(b, rank, &spec) // PMI service (pmi.go): PMI_FD etc.
	var xp *pmixProc
	if err == nil {
		xp, err = d.pmixAttach(b, rank, &spec) // PMIx service (pmix.go)
	}
	var p Process
	if err == nil {
		p, err = d.spawn.Start(context.Background(), key.String(), spec, func(p Process, st proc.ExitStatus) { d.onExit(key, p, st) })
		pp.started(p, err)
		xp.started(err)
	}
	if err != nil {
		d.unreserve(key, e, err)
		return wire.ProcStarted{}, false
	}
	now := time.Now()
	d.mu.Lock()
	e.p, e.pid = p, p.Pid()
	sig, grace := e.killSig, e.grace
	d.mu.Unlock()
	if sig != 0 {
		go signalProcs([]Process{p}, sig, grace)
	}
	return wire.ProcStarted{Job: b.Job, Rank: rank, PID: p.Pid(), Node: d.node, Time: now.UnixNano()}, true
}

// startCode maps a start failure to the shell's convention: 127 when the
// program is missing, 126 when it cannot be executed, 1 otherwise.
func startCode(err error) int {
	switch {
	case errors.Is(err, wire.ErrNotFound):
		return 127
	case errors.Is(err, wire.ErrPermission), errors.Is(err, wire.ErrInvalid):
		return 126
	}
	return 1
}

func (d *Daemon) reportStartFailure(key procKey, err error) {
	d.log.Info("daemon: process did not start", "job", key.job, "rank", key.rank, "err", err)
	_ = d.master.Notify(wire.KindProcExited, &wire.ProcExited{
		Job: key.job, Rank: key.rank, Node: d.node, Code: startCode(err), Err: err.Error(), Time: time.Now().UnixNano(),
	})
}

// onExit reports an ended process to the master. It runs after the
// process's output has been delivered, so the master sees every line of a
// process before its exit.
func (d *Daemon) onExit(key procKey, p Process, st proc.ExitStatus) {
	d.pmiExited(key, st)  // settle its PMI session first (pmi.go)
	d.pmixExited(key, st) // and its PMIx client (pmix.go)
	d.stdin.drop(key)
	d.mu.Lock()
	e := d.live[key]
	delete(d.live, key)
	forced := e != nil && e.forced
	d.mu.Unlock()
	if e != nil {
		e.out.close() // set before the start, never changed
	}
	ev := &wire.ProcExited{
		Job: key.job, Rank: key.rank, PID: p.Pid(), Node: d.node, Code: st.Code(), Signal: int(st.Signal),
		Forced: forced, Time: time.Now().UnixNano(),
	}
	if err := d.master.Notify(wire.KindProcExited, ev); err != nil {
		d.log.Debug("daemon: cannot report exit", "proc", key.String(), "err", err)
	}
	d.fenceProcEnded(key) // after the report: the master fails the fences it held up
	if e != nil {
		d.wg.Done()
	}
}

// kill marks the matching processes as killed by the runtime and signals
// them (sig, then SIGKILL after grace) without waiting. A process still
// being forked gets the signal right after its fork. It returns how many
// processes matched.
func (d *Daemon) kill(match func(procKey) bool, sig syscall.Signal, grace time.Duration) int {
	d.mu.Lock()
	var ps []Process
	n := 0
	for k, e := range d.live {
		if !match(k) {
			continue
		}
		n++
		e.forced = true
		if e.p == nil {
			e.killSig, e.grace = sig, grace
			continue
		}
		ps = append(ps, e.p)
	}
	d.mu.Unlock()
	if len(ps) > 0 {
		go signalProcs(ps, sig, grace)
	}
	return n
}

// signalProcs sends sig (and SIGCONT, so stopped groups can act on it) to
// every process group, then SIGKILL to those still running after grace.
func signalProcs(ps []Process, sig syscall.Signal, grace time.Duration) {
	for _, p := range ps {
		_ = p.Signal(sig)
		if sig != syscall.SIGKILL && sig != syscall.SIGCONT {
			_ = p.Signal(syscall.SIGCONT)
		}
	}
	if sig == syscall.SIGKILL {
		return
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	for i, p := range ps {
		select {
		case <-p.Done():
		case <-t.C:
			for _, q := range ps[i:] {
				_ = q.Signal(syscall.SIGKILL)
			}
			return
		}
	}
}

func (d *Daemon) handleKill(_ context.Context, _ *wire.Request, b *wire.KillReq) (any, error) {
	if err := b.Ranks.Check(); err != nil {
		return nil, err
	}
	sig := syscall.Signal(b.Signal)
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	if sig < 0 || sig > 64 {
		return nil, wire.Errorf(wire.ErrInvalid, "daemon %s: bad signal %d", d.node, b.Signal)
	}
	grace := d.grace
	if b.GraceMS > 0 {
		grace = time.Duration(b.GraceMS) * time.Millisecond
	}
	match := func(k procKey) bool {
		return k.job == b.Job && (len(b.Ranks) == 0 || b.Ranks.Contains(k.rank))
	}
	if b.Only {
		return &wire.KillReply{N: uint32(d.signal(match, sig))}, nil
	}
	return &wire.KillReply{N: uint32(d.kill(match, sig, grace))}, nil
}

// signal sends sig alone to the running processes that match (a
// PMIx_Job_control signal): they are not ended by the runtime, and one
// still being forked does not get it.
func (d *Daemon) signal(match func(procKey) bool, sig syscall.Signal) int {
	d.mu.Lock()
	var ps []Process
	for k, e := range d.live {
		if match(k) && e.p != nil {
			ps = append(ps, e.p)
		}
	}
	d.mu.Unlock()
	n := 0
	for _, p := range ps {
		if p.Signal(sig) == nil {
			n++
		}
	}
	return n
}

// handleStop terminates every process, waits until their exits have been
// reported, answers, and lets Run return.
func (d *Daemon) handleStop(_ context.Context, _ *wire.Request, b *wire.NodeStopReq) (any, error) {
	grace := d.grace
	if b.GraceMS > 0 {
		grace = time.Duration(b.GraceMS) * time.Millisecond
	}
	d.shutdown(grace)
	// Run closes the master connection once stopCh is closed: only after
	// the reply has been written, or the master sees the stop fail.
	return wire.ReplyThen{Then: func() { d.stopOnce.Do(func() { close(d.stopCh) }) }}, nil
}

// jobGuard is the guard the daemon's processes were started under; nil
// before registration, when none has been started.
func (d *Daemon) jobGuard() *proc.Guard {
	select {
	case <-d.registered:
		return d.guard
	default:
		return nil
	}
}

func (d *Daemon) handleJobData(_ context.Context, _ *wire.Request, b *wire.JobData) (any, error) {
	if b.Job == "" {
		return nil, wire.Errorf(wire.ErrInvalid, "daemon %s: job data without a job", d.node)
	}
	d.mu.Lock()
	if !b.Gone {
		if b.Delta {
			full, err := d.applyJobDelta(b)
			if err != nil {
				d.mu.Unlock()
				return nil, err
			}
			b = full
		}
		d.cacheJob(b, b.Psets)
		d.mu.Unlock()
		d.upJobChanged(b.Job, b)
		return nil, nil
	}
	delete(d.jobs, b.Job)
	d.mu.Unlock()
	d.upJobChanged(b.Job, nil)
	// Outside d.mu: the session state has its own lock, never nested.
	d.dropSessionJob(b.Job)
	if g := d.jobGuard(); g != nil {
		// The job is over: what its processes started outside their
		// process groups (setsid, daemons) goes with it. Off the reader
		// goroutine: the sweep reads /proc.
		go func() {
			if n := g.EndGroup(b.Job, procenv.Job); n > 0 {
				d.log.Info("daemon: killed processes left behind by an ended job", "job", b.Job, "n", n)
			}
		}()
	}
	return nil, nil
}

func (d *Daemon) handlePsetPush(_ context.Context, _ *wire.Request, b *wire.PsetPush) (any, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cacheJob(nil, b) == nil {
		return nil, wire.Errorf(wire.ErrNotFound, "daemon %s: sets pushed for unknown job %s", d.node, b.Job)
	}
	return nil, nil
}

// outputSink delivers the output lines of one process: forwarded to the
// master and/or written to per-rank files. Calls for one process never
// overlap (lib/proc), and close runs after the last one.
type outputSink struct {
	d       *Daemon
	key     procKey
	forward bool
	merge   bool
	dir     string
	files   [3]*os.File // by stream
	failed  bool
}

func (d *Daemon) newOutputSink(key procKey, f wire.OutputFlags) *outputSink {
	if !f.Forward && f.Dir == "" {
		return nil
	}
	s := &outputSink{d: d, key: key, forward: f.Forward, merge: f.Merge}
	if f.Dir != "" {
		s.dir = filepath.Join(f.Dir, "rank."+strconv.FormatUint(uint64(key.rank), 10))
	}
	return s
}

func (s *outputSink) write(stream int, line []byte) {
	if s.merge {
		stream = proc.Stdout
	}
	if s.forward {
		_ = s.d.master.Notify(wire.KindProcOutput, &wire.OutputLine{
			Job: s.key.job, Rank: s.key.rank, Stream: uint8(stream), Line: line, Time: time.Now().UnixNano(),
		})
	}
	if s.dir != "" && !s.failed {
		f := s.files[stream]
		if f == nil {
			var err error
			f, err = s.open(stream)
			if err != nil {
				s.failed = true
				s.d.log.Warn("daemon: cannot write output file", "proc", s.key.String(), "err", err)
				return
			}
			s.files[stream] = f
		}
		_, _ = f.Write(append(slices.Clip(line), '\n'))
	}
}

func (s *outputSink) open(stream int) (*os.File, error) {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, err
	}
	name := "stdout"
	if stream == proc.Stderr {
		name = "stderr"
	}
	return os.OpenFile(filepath.Join(s.dir, name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
}

func (s *outputSink) close() {
	if s == nil {
		return
	}
	for _, f := range s.files {
		if f != nil {
			_ = f.Close()
		}
	}
}
