package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/internal/simdvm"
	"github.com/dynrt/dynrt/lib/master"
	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/lib/simnode"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

func hostMain(_ context.Context, _ []string, _, stderr io.Writer) int {
	log, closeLog, err := logTo(os.Getenv(envHostLog))
	if err != nil {
		fmt.Fprintln(stderr, "scalebench host:", err)
		return 1
	}
	defer closeLog()
	stop, err := profile(os.Getenv(envHostProf))
	if err != nil {
		fmt.Fprintln(stderr, "scalebench host:", err)
		return 1
	}
	defer stop()
	return simdvm.HostMain(nil, log)
}

// profile writes a CPU profile to path until stop (nothing without a
// path).
func profile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// envHostProf names the nodes host's CPU profile (-cpuprofile, with a
// .nodes suffix).
const envHostProf = "SCALEBENCH_HOST_CPUPROFILE"

// envHostLog names the nodes host's log file (-log).
const envHostLog = "SCALEBENCH_HOST_LOG"

// logTo is an info-level logger writing to path, or a discarding one.
func logTo(path string) (*slog.Logger, func(), error) {
	if path == "" {
		return slog.New(slog.DiscardHandler), func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	return slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo})), func() { f.Close() }, nil
}

// Main runs the benchmark.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scalebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sizes := fs.String("nodes", "16,64,256,1024", "DVM sizes in nodes, comma-separated")
	slots := fs.Int("slots", 64, "slots per node")
	fenceSlots := fs.Int("fence-slots", 0, "processes per node of the fence job (0: -slots)")
	change := fs.Int("k", 1024, "processes of the large ADD and SUB (at most one per node of the DVM)")
	out := fs.String("o", "bench-out/scale", "directory for scale.tsv and the plot")
	cpuProf := fs.String("cpuprofile", "", "write a CPU profile of this process (the master) to this file, and one of the nodes host to the file with .nodes added")
	history := fs.Int("history", 0, "then run this many ADD 1 / SUB 1 pairs on the malleable job and print the master's heap as they go (is it flat once the retention bound is reached?)")
	radix := fs.Int("radix", 0, "the DVM's tree radix (master.Config.TreeRadix): pushes to more daemons than this go down a tree of daemons; 0 = a star")
	announceSamples := fs.Int("announce", 5, "ADD 1s whose median gives the announcement's time and ADD 1 / SUB 1 until FINALIZED (each is one sample of a round to every daemon)")
	logDir := fs.String("log", "", "write the master's and the daemons' logs (info level) to master.log and nodes.log in this directory")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *fenceSlots == 0 {
		*fenceSlots = *slots
	}
	var ns []int
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 {
			fmt.Fprintf(stderr, "scalebench: -nodes: %q is not a size of at least 2 nodes\n", f)
			return 2
		}
		ns = append(ns, n)
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "scalebench:", err)
		return 1
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(stderr, "scalebench:", err)
		return 1
	}
	if *cpuProf != "" {
		os.Setenv(envHostProf, *cpuProf+".nodes")
	}
	stopProf, err := profile(*cpuProf)
	if err != nil {
		fmt.Fprintln(stderr, "scalebench:", err)
		return 1
	}
	defer stopProf()
	log, closeLog, _ := logTo("")
	if *logDir != "" {
		os.Setenv(envHostLog, filepath.Join(*logDir, "nodes.log"))
		log, closeLog, err = logTo(filepath.Join(*logDir, "master.log"))
	}
	if err != nil {
		fmt.Fprintln(stderr, "scalebench:", err)
		return 1
	}
	defer closeLog()
	var rows []row
	fmt.Fprintln(stdout, header())
	for _, n := range ns {
		r, err := measure(ctx, exe, n, *slots, *fenceSlots, min(*change, n), *history, *radix, max(*announceSamples, 1), log, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "scalebench: %d nodes: %v\n", n, err)
			return 1
		}
		rows = append(rows, r)
		fmt.Fprintln(stdout, r.line())
	}
	if err := writeResults(*out, rows, stdout); err != nil {
		fmt.Fprintln(stderr, "scalebench:", err)
		return 1
	}
	return 0
}

// row is what one DVM size measured. Times in ms.
type row struct {
	nodes, procs, k        int
	start, launch          float64
	launchCPU              float64 // master process CPU ms of the launch filling the DVM
	fenceEachCPU           float64 // master process CPU ms per fence without collect: (a job of 23 fences − the job of 3) / 20
	announce               float64 // ADD 1: from the request until the ANNOUNCED event (placed, delta set, job data and record on every daemon)
	rcPush                 float64 // ADD 1: its rc.push round alone, from the job data on every daemon until the ANNOUNCED event (the record on every daemon)
	add1, sub1, addK, subK float64 // request until FINALIZED
	smallAdd, smallSub     float64 // ADD 1 and SUB 1 of a job of one process: a change that touches one or two nodes
	psetop                 float64 // union of the filling job's set with itself (procs members), defined on every daemon
	ping                   float64 // the floor: median round of a ping to every daemon along a push's path (Master.PingRound), from the master to each
	radix                  int     // the DVM's tree radix (0: a star)
	treePing               float64 // the same down the tree of that radix (with 0: measured again as a star)
	fence                  float64 // a fence over a job of nodes × fence-slots processes
	modex                  float64 // the same with a committed value per process and collect (an MPI wire-up)
	fenceCPU, fenceHostCPU float64 // master and nodes host CPU ms of the fence job, launch to end
	modexCPU, modexHostCPU float64 // the same for the job with collect
	fenceProcs             int
	masterB, hostB         float64 // resident bytes per process of the filling job (master) and per node (host)
	masterHeapB            float64 // Go heap of the master per process of the filling job
	cpuPerChange           float64 // master process CPU ms per change (mean of the four)
	hostCPUPerChange       float64 // nodes host CPU ms per change: the work of all daemons and processes
	heapPerChange          float64 // master heap growth per change, bytes (the job back at its size)
}

func header() string {
	return "nodes\tprocs\tstart_ms\tlaunch_ms\tlaunch_us_per_proc\tannounce_ms\trcpush_ms\tadd1_ms\tsub1_ms\tk\taddk_ms\tsubk_ms\tsmall_add1_ms\tsmall_sub1_ms\tpsetop_ms\tfence_procs\tfence_ms\tmaster_B_per_proc\tmaster_heap_B_per_proc\thost_B_per_node\tmaster_cpu_ms_per_change	host_cpu_ms_per_change	master_heap_B_per_change\tping_round_ms\tradix\ttree_ping_round_ms\tmodex_ms\tfence_job_master_cpu_ms\tfence_job_host_cpu_ms\tmodex_job_master_cpu_ms\tmodex_job_host_cpu_ms\tlaunch_master_cpu_ms\tfence_master_cpu_ms"
}

func (r row) line() string {
	return fmt.Sprintf("%d\t%d\t%.1f\t%.1f\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t%d\t%.1f\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%.0f\t%.2f\t%d\t%.2f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.1f",
		r.nodes, r.procs, r.start, r.launch, r.launch*1000/float64(r.procs), r.announce, r.rcPush, r.add1, r.sub1, r.k, r.addK, r.subK, r.smallAdd, r.smallSub,
		r.psetop, r.fenceProcs, r.fence, r.masterB, r.masterHeapB, r.hostB, r.cpuPerChange, r.hostCPUPerChange, r.heapPerChange, r.ping, r.radix, r.treePing, r.modex, r.fenceCPU, r.fenceHostCPU, r.modexCPU, r.modexHostCPU, r.launchCPU, r.fenceEachCPU)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func measure(ctx context.Context, exe string, nodes, slots, fenceSlots, k, history, radix, announceSamples int, log *slog.Logger, stderr io.Writer) (r row, err error) {
	r = row{nodes: nodes, procs: nodes * slots, k: k, radix: radix}
	dir, err := os.MkdirTemp("", "scalebench-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	t0 := time.Now()
	d, err := simdvm.Start(ctx, simdvm.Options{Nodes: nodes, Slots: slots, Dir: filepath.Join(dir, "d"), Host: []string{exe}, Logger: log,
		Master: func(c *master.Config) { c.TreeRadix = radix }})
	if err != nil {
		return r, err
	}
	r.start = ms(time.Since(t0))
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer scancel()
		if serr := d.Stop(sctx); serr != nil && err == nil {
			err = serr
		}
	}()
	c, err := d.Client(ctx)
	if err != nil {
		return r, err
	}
	defer c.Close()
	if r.ping, err = pingFloor(ctx, d.M, nodes, 0); err != nil {
		return r, err
	}
	if r.treePing, err = pingFloor(ctx, d.M, nodes, radix); err != nil {
		return r, err
	}

	// A job filling the DVM: launch, memory, set operation.
	mRSS0, hRSS0, heap0 := rss(os.Getpid()), rss(d.HostPid()), heapInUse()
	t0, lcpu0 := time.Now(), cpuTime()
	idle, err := c.Launch(ctx, wire.JobLaunchReq{Argv: []string{simnode.Idle}, N: uint32(r.procs), PMI: wire.PMINone})
	if err != nil {
		return r, fmt.Errorf("launch: %w", err)
	}
	r.launch, r.launchCPU = ms(time.Since(t0)), ms(cpuTime()-lcpu0)
	fmt.Fprintf(stderr, "scalebench: %d nodes: launch of %d processes: %.0f ms, master CPU %.0f ms\n", nodes, r.procs, r.launch, r.launchCPU)
	r.masterB = float64(rss(os.Getpid())-mRSS0) / float64(r.procs)
	r.masterHeapB = float64(heapInUse()-heap0) / float64(r.procs)
	r.hostB = float64(rss(d.HostPid())-hRSS0) / float64(nodes-1)
	app := session.AppSet(idle.App)
	t0 = time.Now()
	if _, err := c.PsetOp(ctx, wire.PsetOpReq{Job: idle.Job, Op: wire.OpUnion, P1: app, P2: app}); err != nil {
		return r, fmt.Errorf("set operation: %w", err)
	}
	r.psetop = ms(time.Since(t0))
	if err := kill(ctx, c, idle.Job); err != nil {
		return r, err
	}

	// A malleable job of one process per node: ADD and SUB.
	// Its processes print only errors; they go to stderr.
	c.OnOutput(func(l wire.OutputLine) { fmt.Fprintf(stderr, "scalebench: %s rank %d: %s\n", l.Job, l.Rank, l.Line) })
	mal, err := c.Launch(ctx, wire.JobLaunchReq{Argv: []string{simnode.Malleable}, N: uint32(nodes), MapBy: wire.MapByNode, PMI: wire.PMINone, Output: wire.OutputFlags{Forward: true}})
	if err != nil {
		return r, fmt.Errorf("launch the malleable job: %w", err)
	}
	// Heap and CPU over the four changes: the job ends at its size again
	// (ADD 1, SUB 1, ADD k, SUB k), so what the master keeps should not
	// grow beyond the bounded history (docs/limits.md).
	heapC0 := heapInUse()
	// The ANNOUNCED event is published once every daemon has the record.
	var annMu sync.Mutex
	announcedAt := map[string]time.Time{} // nil after the four changes: the history adds nothing
	defer func() {
		annMu.Lock()
		announcedAt = nil
		annMu.Unlock()
	}()
	if _, err := c.Subscribe(ctx, wire.EventSubReq{Kinds: []string{wire.EvRCState}, Job: mal.Job}, func(ev wire.Event) {
		if ev.State == wire.RCAnnounced && ev.RC != nil {
			annMu.Lock()
			if announcedAt != nil {
				announcedAt[ev.RC.Delta] = time.Now()
			}
			annMu.Unlock()
		}
	}); err != nil {
		return r, fmt.Errorf("subscribe: %w", err)
	}
	cpu0, hcpu0 := cpuTime(), procCPU(d.HostPid())
	var ann, push, placed []float64 // ADD 1: request to ANNOUNCED, the announcement's round, request to placed
	sample := func(rc wire.RC) error {
		annMu.Lock()
		at, ok := announcedAt[rc.Delta]
		annMu.Unlock()
		if !ok {
			return fmt.Errorf("no ANNOUNCED event for %s", rc.Delta)
		}
		ann = append(ann, float64(at.UnixNano()-rc.Times.Requested)/1e6)
		push = append(push, float64(at.UnixNano()-rc.Times.JobData)/1e6)
		placed = append(placed, float64(rc.Times.Placed-rc.Times.Requested)/1e6)
		return nil
	}
	for _, st := range []struct {
		typ string
		n   int
		out *float64
	}{{wire.RCAdd, 1, &r.add1}, {wire.RCSub, 1, &r.sub1}, {wire.RCAdd, k, &r.addK}, {wire.RCSub, k, &r.subK}} {
		t0 = time.Now()
		rc, err := c.RequestRC(ctx, wire.RCRequest{Job: mal.Job, Type: st.typ, N: uint32(st.n), Wait: true})
		if err != nil {
			return r, fmt.Errorf("%s %d: %w", st.typ, st.n, err)
		}
		if rc.Status != wire.RCFinalized {
			return r, fmt.Errorf("%s %d: %s (%s)", st.typ, st.n, rc.Status, rc.Reason)
		}
		*st.out = float64(rc.Times.Finalized-rc.Times.Requested) / 1e6
		if st.typ == wire.RCAdd && st.n == 1 {
			if err := sample(rc); err != nil {
				return r, err
			}
		}
		_ = t0
	}
	r.cpuPerChange = ms(cpuTime()-cpu0) / 4
	r.hostCPUPerChange = ms(procCPU(d.HostPid())-hcpu0) / 4
	// The removed processes exit after FINALIZED: let the master take
	// their exits before its heap is weighed.
	if err := settle(ctx, c, mal.Job, nodes); err != nil {
		return r, err
	}
	r.heapPerChange = float64(heapInUse()-heapC0) / 4
	// One announcement is one sample of a round to every daemon, which
	// varies by tens of ms here: the median of announceSamples ADD 1s
	// (-announce), and so of ADD 1 and SUB 1 until FINALIZED.
	add1, sub1 := []float64{r.add1}, []float64{r.sub1}
	for len(ann) < announceSamples {
		for _, typ := range []string{wire.RCAdd, wire.RCSub} {
			rc, err := c.RequestRC(ctx, wire.RCRequest{Job: mal.Job, Type: typ, N: 1, Wait: true})
			if err != nil {
				return r, fmt.Errorf("announcements: %s 1: %w", typ, err)
			}
			if rc.Status != wire.RCFinalized {
				return r, fmt.Errorf("announcements: %s 1: %s (%s)", typ, rc.Status, rc.Reason)
			}
			d := float64(rc.Times.Finalized-rc.Times.Requested) / 1e6
			if typ != wire.RCAdd {
				sub1 = append(sub1, d)
				continue
			}
			add1 = append(add1, d)
			if err := sample(rc); err != nil {
				return r, err
			}
		}
	}
	r.announce, r.rcPush = median(ann), median(push)
	fmt.Fprintf(stderr, "scalebench: %d nodes: ADD 1 announced after %.1f ms (placed after %.1f ms; the announcement's round %.1f ms)\n", nodes, ann, placed, push)
	r.add1, r.sub1 = median(add1), median(sub1)
	annMu.Lock()
	announcedAt = nil
	annMu.Unlock()
	if history > 0 {
		if err := heapHistory(ctx, d.M, c, mal.Job, nodes, history, stderr); err != nil {
			return r, err
		}
	}
	if err := kill(ctx, c, mal.Job); err != nil {
		return r, err
	}

	// A job of one process: what a change that touches one or two nodes
	// costs in a DVM of this size.
	one, err := c.Launch(ctx, wire.JobLaunchReq{Argv: []string{simnode.Malleable}, N: 1, PMI: wire.PMINone, Output: wire.OutputFlags{Forward: true}})
	if err != nil {
		return r, fmt.Errorf("launch the one-process job: %w", err)
	}
	for _, st := range []struct {
		typ string
		out *float64
	}{{wire.RCAdd, &r.smallAdd}, {wire.RCSub, &r.smallSub}} {
		rc, err := c.RequestRC(ctx, wire.RCRequest{Job: one.Job, Type: st.typ, N: 1, Wait: true})
		if err != nil {
			return r, fmt.Errorf("one-process job: %s 1: %w", st.typ, err)
		}
		if rc.Status != wire.RCFinalized {
			return r, fmt.Errorf("one-process job: %s 1: %s (%s)", st.typ, rc.Status, rc.Reason)
		}
		*st.out = float64(rc.Times.Finalized-rc.Times.Requested) / 1e6
	}
	if err := kill(ctx, c, one.Job); err != nil {
		return r, err
	}

	// A fence over a whole job.
	r.fenceProcs = nodes * min(fenceSlots, slots)
	lines := make(chan string, 16)
	c.OnOutput(func(l wire.OutputLine) {
		select {
		case lines <- string(l.Line):
		default:
		}
	})
	// Each fence job's CPU, from its launch to its end, of the master and
	// of the nodes host: the two jobs differ only in the collect.
	cpu0, hcpu0 = cpuTime(), procCPU(d.HostPid())
	if r.fence, err = fenceJob(ctx, c, lines, r.fenceProcs, 3, false); err != nil {
		return r, err
	}
	cpu1, hcpu1 := cpuTime(), procCPU(d.HostPid())
	r.fenceCPU, r.fenceHostCPU = ms(cpu1-cpu0), ms(hcpu1-hcpu0)
	if r.modex, err = fenceJob(ctx, c, lines, r.fenceProcs, 3, true); err != nil {
		return r, err
	}
	cpu2 := cpuTime()
	r.modexCPU, r.modexHostCPU = ms(cpu2-cpu1), ms(procCPU(d.HostPid())-hcpu1)
	// The master's share of one fence: the same job with 20 fences more.
	tree0 := treeState(ctx, c)
	if _, err = fenceJob(ctx, c, lines, r.fenceProcs, 23, false); err != nil {
		return r, err
	}
	r.fenceEachCPU = (ms(cpuTime()-cpu2) - r.fenceCPU) / 20
	if tree1 := treeState(ctx, c); tree1.Up > tree0.Up {
		up, parts := tree1.Up-tree0.Up, tree1.UpParts-tree0.UpParts
		fmt.Fprintf(stderr, "scalebench: %d nodes: 23 fences: %d requests gathered up the tree reached the master, %.1f per fence, %.1f daemons' entries each\n",
			nodes, up, float64(up)/23, float64(parts)/float64(up))
	}
	fmt.Fprintf(stderr, "scalebench: %d nodes done\n", nodes)
	return r, nil
}

// fenceJob runs the simulated fence program of count fences over n
// processes (with collect: commit a value and fence with collect, an MPI
// wire-up) and returns the time of its last fence, as rank 0 measured it,
// in ms.
func fenceJob(ctx context.Context, c *tool.Client, lines <-chan string, n, count int, collect bool) (float64, error) {
	argv := []string{simnode.Fence, strconv.Itoa(count)}
	if collect {
		argv = append(argv, "collect")
	}
	// By node: fence-slots processes on every node (by slot they filled only an eighth of the nodes).
	fj, err := c.Launch(ctx, wire.JobLaunchReq{Argv: argv, N: uint32(n), MapBy: wire.MapByNode, PMI: wire.PMINone, Output: wire.OutputFlags{Forward: true}})
	if err != nil {
		return 0, fmt.Errorf("launch the fence job %v: %w", argv, err)
	}
	var v int64
	select {
	case l := <-lines:
		ns, ok := strings.CutPrefix(l, "FENCE ")
		var perr error
		v, perr = strconv.ParseInt(ns, 10, 64)
		if !ok || perr != nil {
			return 0, fmt.Errorf("fence job %v: %q", argv, l)
		}
	case <-ctx.Done():
		return 0, fmt.Errorf("fence job %v: no result", argv)
	}
	if err := kill(ctx, c, fj.Job); err != nil {
		return 0, err
	}
	return float64(v) / 1e6, nil
}

// median of xs (not empty).
func median(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}

// heapHistory runs pairs ADD 1 / SUB 1 on job (of size processes) and
// prints the master's heap, once settled, eight times along the way.
func heapHistory(ctx context.Context, m *master.Master, c *tool.Client, job string, size, pairs int, out io.Writer) error {
	base := heapInUse()
	fmt.Fprintf(out, "scalebench: %d nodes: master heap %.1f MB before %d more changes\n", size, float64(base)/1e6, 2*pairs)
	step := max(pairs/8, 1)
	for i := 1; i <= pairs; i++ {
		for _, typ := range []string{wire.RCAdd, wire.RCSub} {
			rc, err := c.RequestRC(ctx, wire.RCRequest{Job: job, Type: typ, N: 1, Wait: true})
			if err != nil {
				return fmt.Errorf("history: %s 1: %w", typ, err)
			}
			if rc.Status != wire.RCFinalized {
				return fmt.Errorf("history: %s 1: %s (%s)", typ, rc.Status, rc.Reason)
			}
		}
		if i%step == 0 || i == pairs {
			if err := settle(ctx, c, job, size); err != nil {
				return err
			}
			h := heapInUse()
			kept, err := m.History(ctx)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "scalebench: %d nodes: after %4d more changes: master heap %.1f MB (%+.1f MB); kept %+v\n", size, 2*i, float64(h)/1e6, float64(h-base)/1e6, kept)
		}
	}
	return nil
}

// settle waits until job has size processes and no change in flight,
// and then a moment more.
func settle(ctx context.Context, c *tool.Client, job string, size int) error {
	for {
		info, err := c.Job(ctx, wire.JobStateReq{Job: job})
		if err != nil {
			return err
		}
		if int(info.Size) == size && info.Delta == "" {
			time.Sleep(500 * time.Millisecond)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %s did not settle at %d processes: %w", job, size, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func kill(ctx context.Context, c *tool.Client, job string) error {
	if err := c.KillJob(ctx, job, 0, time.Second); err != nil {
		return fmt.Errorf("kill %s: %w", job, err)
	}
	_, err := c.WaitJob(ctx, job)
	return err
}

// rss is the resident set of pid in bytes (0 if unknown).
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// procCPU is the user and system time of pid (/proc/<pid>/stat).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

func heapInUse() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pingFloor is the median of 15 ping rounds to every daemon (after 3 to
// warm up): the least any round to every daemon costs on this machine,
// which a change's rounds (set, job data, record) are measured against.
// With radix > 0 the pings go down the tree a push takes.
func pingFloor(ctx context.Context, m *master.Master, nodes, radix int) (float64, error) {
	var took []time.Duration
	for i := range 18 {
		d, n, err := m.PingRound(ctx, radix)
		if err != nil {
			return 0, fmt.Errorf("ping round: %w", err)
		}
		if n != nodes {
			return 0, fmt.Errorf("ping round: %d daemons answered, want %d", n, nodes)
		}
		if i >= 3 {
			took = append(took, d)
		}
	}
	slices.Sort(took)
	return ms(took[len(took)/2]), nil
}

// treeState is the DVM's tree statistics (zero if it has none).
func treeState(ctx context.Context, c *tool.Client) wire.TreeState {
	st, err := c.State(ctx)
	if err != nil || st.Tree == nil {
		return wire.TreeState{}
	}
	return *st.Tree
}
