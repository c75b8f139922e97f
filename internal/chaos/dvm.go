package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/internal/leakcheck"
	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// dvm is one DVM of the run, started with `dynrun dvm start --daemonize`
// (the master and every daemon are processes of their own), with a tool
// client attached.
type dvm struct {
	id   string
	info dvmdir.Info
	cl   *tool.Client
}

// env is the environment of every process the harness starts: its own
// without DYNRT_*, the rendezvous directory, and the run's mark.
func (h *harness) env(extra ...string) []string {
	env := []string{dvmdir.EnvDir + "=" + h.dir, leakcheck.EnvMark + "=" + h.cfg.Mark}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DYNRT_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

func (h *harness) getenv(k string) string {
	if k == dvmdir.EnvDir {
		return h.dir
	}
	return ""
}

// startDVM starts a DVM of the configured nodes and attaches to it.
func (h *harness) startDVM(ctx context.Context) error {
	h.dvms++
	args := []string{"dvm", "start", "--daemonize", "--nodes", strconv.Itoa(h.cfg.Nodes), "--slots", strconv.Itoa(h.cfg.Slots), "--name", "chaos" + strconv.Itoa(h.dvms)}
	args = append(args, h.cfg.DVMArgs...)
	cmd := exec.CommandContext(ctx, h.cfg.Dynrun, args...)
	cmd.Env = h.env()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("chaos: dvm start: %w: %s", err, strings.TrimSpace(errb.String()))
	}
	id := strings.TrimSpace(string(out))
	info, err := dvmdir.Resolve(h.dir, id, h.getenv)
	if err != nil {
		return fmt.Errorf("chaos: find DVM %s: %w", id, err)
	}
	cl, err := tool.Dial(ctx, info, tool.Options{Name: "chaos"})
	if err != nil {
		return fmt.Errorf("chaos: attach to DVM %s: %w", id, err)
	}
	h.d = &dvm{id: id, info: info, cl: cl}
	return nil
}

// stopDVM runs `dynrun dvm stop` and waits for every process of the DVM
// to be gone.
func (h *harness) stopDVM(ctx context.Context) error {
	if h.d == nil {
		return nil
	}
	d := h.d
	h.d = nil
	defer d.cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.cfg.Dynrun, "dvm", "stop", "--dvm", d.id)
	cmd.Env = h.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("chaos: dvm stop %s: %w: %s", d.id, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// rejoin starts a daemon for node by hand (`dynrun daemon --join`), as
// an operator brings a node back, and waits until the master has it up.
func (h *harness) rejoin(ctx context.Context, node string) error {
	d := h.d
	cmd := exec.Command(h.cfg.Dynrun, "daemon", "--master", d.info.TCP, "--join", "--node", node,
		"--slots", strconv.Itoa(h.cfg.Slots), "--dvm", d.id, "--dir", h.dir)
	cmd.Env = h.env(launcher.EnvToken + "=" + d.info.Token)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := h.reap(cmd)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		st, err := d.cl.State(ctx)
		if err != nil {
			return err
		}
		for _, n := range st.Nodes {
			if n.Name == node && n.State == wire.NodeUp && n.PID == cmd.Process.Pid {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("chaos: rejoin of %s: daemon exited: %s", node, strings.TrimSpace(out.String()))
		default:
		}
		if !leakcheck.Alive(cmd.Process.Pid) {
			return fmt.Errorf("chaos: rejoin of %s: daemon exited: %s", node, strings.TrimSpace(out.String()))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("chaos: rejoin of %s: not up after 20s: %s", node, strings.TrimSpace(out.String()))
}

// reap waits for cmd in the background so that it does not stay a zombie;
// the channel is closed once it has exited. Only that goroutine may touch
// cmd.ProcessState (reading it elsewhere is a data race with Wait).
func (h *harness) reap(cmd *exec.Cmd) <-chan struct{} {
	done := make(chan struct{})
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer close(done)
		_ = cmd.Wait()
	}()
	return done
}

// osProcs lists the live processes carrying the run's mark.
func osProcs(mark string) map[int]OSProc {
	out := map[int]OSProc{}
	for _, pid := range leakcheck.MarkedProcs(mark) {
		p := OSProc{PID: pid}
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(st, ')')
		if j := bytes.IndexByte(st, '('); j >= 0 && i > j {
			p.Cmd = string(st[j+1 : i])
		}
		if f := strings.Fields(string(st[i+1:])); len(f) >= 2 {
			p.State = f[0][0]
			p.PPID, _ = strconv.Atoi(f[1])
		}
		out[pid] = p
	}
	return out
}

// observe takes a snapshot of the DVM and of the OS.
func (h *harness) observe(ctx context.Context) (*Snapshot, error) {
	s := &Snapshot{Launchers: map[int]bool{}}
	for _, j := range h.jobs {
		if !j.exited() {
			s.Launchers[j.cmd.Process.Pid] = true
		}
	}
	if h.d == nil {
		s.Stopped = true
		s.OS = osProcs(h.cfg.Mark)
		return s, nil
	}
	cl := h.d.cl
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	t0 := time.Now()
	st, err := cl.StateOf(ctx, wire.DVMStateReq{})
	s.StatusLatency = time.Since(t0)
	if err != nil {
		return nil, fmt.Errorf("chaos: dvm status: %w", err)
	}
	s.MasterPID = st.PID
	for _, n := range st.Nodes {
		s.Nodes = append(s.Nodes, Node{Name: n.Name, Slots: int(n.Slots), Used: int(n.Used), State: n.State, PID: n.PID})
	}
	for _, ji := range st.Jobs {
		if ji.State != wire.JobStateRunning && ji.State != wire.JobStateLaunching {
			s.Jobs = append(s.Jobs, Job{Job: ji.Job, App: ji.App, State: ji.State, NextRank: ji.NextRank})
			continue
		}
		j, err := h.observeJob(ctx, ji.Job)
		if errors.Is(err, wire.ErrNotFound) {
			continue // ended meanwhile
		}
		if err != nil {
			return nil, err
		}
		s.Jobs = append(s.Jobs, j)
	}
	// Every change, settled ones too (dvm.state does not list them).
	var rcs wire.RCList
	if err := cl.Conn().Call(ctx, wire.KindRCList, &wire.RCListReq{All: true}, &rcs); err != nil {
		return nil, fmt.Errorf("chaos: rc.list: %w", err)
	}
	for _, rc := range rcs.RCs {
		s.Changes = append(s.Changes, Change{
			Delta: rc.Delta, Job: rc.Job, Type: rc.Type, Status: rc.Status, Settled: rc.Settled,
			Requested: time.Unix(0, rc.Times.Requested), Limit: h.limitOf(rc),
			Ranks: rc.Ranks.Ranks(), Failure: rc.Cause != nil && rc.Cause.Kind == wire.CauseFailure,
		})
		if c := &s.Changes[len(s.Changes)-1]; c.Failure {
			c.Lost = rc.Cause.Ranks.Ranks()
		}
	}
	s.OS = osProcs(h.cfg.Mark)
	return s, nil
}

func (h *harness) observeJob(ctx context.Context, ns string) (Job, error) {
	cl := h.d.cl
	ji, err := cl.Job(ctx, wire.JobStateReq{Job: ns, Procs: true})
	if err != nil {
		return Job{}, err
	}
	j := Job{Job: ji.Job, App: ji.App, State: ji.State, NextRank: ji.NextRank}
	for _, p := range ji.Procs {
		j.Procs = append(j.Procs, Proc{Rank: p.Rank, Node: p.Node, PID: p.PID, State: p.State})
	}
	var sets wire.PsetList
	if err := cl.Conn().Call(ctx, wire.KindPsetList, &wire.PsetListReq{Job: ns, Members: true}, &sets); err != nil {
		return Job{}, err
	}
	for _, ps := range sets.Sets {
		j.Sets = append(j.Sets, Set{Name: ps.Name, Version: ps.Version, Active: ps.Active, Members: ps.Members.Ranks()})
	}
	return j, nil
}

// syncBuffer is a bytes.Buffer safe for a process's output goroutines,
// keeping only the last tailMax bytes.
type syncBuffer struct {
	mu sync.Mutex
	b  []byte
}

const tailMax = 8 << 10

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b = append(b.b, p...)
	if len(b.b) > tailMax {
		b.b = append([]byte(nil), b.b[len(b.b)-tailMax:]...)
	}
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.b)
}

// signal sends sig to pid, ignoring a process already gone.
func signal(pid int, sig syscall.Signal) bool {
	return pid > 0 && syscall.Kill(pid, sig) == nil
}
