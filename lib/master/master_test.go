package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/leakcheck"
	"github.com/dynrt/dynrt/lib/procenv"
	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// TestLaunchAcrossNodes starts 1, 8 and 64 processes on a DVM of 4 virtual
// nodes with 16 slots each and checks ranks, environment and placement
// (stack policy: rank r on node r/16).
func TestLaunchAcrossNodes(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 4, 16)
	id := d.m.Info().ID
	for _, n := range []int{1, 8, 64} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			script := `echo "$DYNRT_RANK|$DYNRT_UID|$DYNRT_NODE|$DYNRT_NODE_INDEX|$DYNRT_JOB|$DYNRT_APP|$DYNRT_DVM|$DYNRT_SIZE|$DYNRT_DAEMON|$DYNRT_TOKEN|$FOO|$1"`
			rep, end := d.run(wire.JobLaunchReq{
				Argv: append(sh(script), "sh", "arg with spaces"), N: uint32(n), Name: "envcheck",
				Env: []string{"FOO=bar", "DYNRT_RANK=bogus"},
			})
			if end.State != wire.JobStateDone || end.Code != 0 || end.Msg != "" {
				t.Fatalf("job ended %s code %d %q", end.State, end.Code, end.Msg)
			}
			if rep.App != "envcheck" && !strings.HasPrefix(rep.App, "envcheck-") {
				t.Errorf("app name %q", rep.App)
			}
			lines := d.output(rep.Job)
			if len(lines) != n {
				t.Fatalf("%d output lines, want %d: %v", len(lines), n, lines)
			}
			seen := map[uint32]bool{}
			for _, l := range lines {
				f := strings.Split(string(l.Line), "|")
				if len(f) != 12 {
					t.Fatalf("bad line %q", l.Line)
				}
				rank, _ := strconv.ParseUint(f[0], 10, 32)
				if uint32(rank) != l.Rank || seen[l.Rank] {
					t.Fatalf("line %q from rank %d (seen before: %v)", l.Line, l.Rank, seen[l.Rank])
				}
				seen[l.Rank] = true
				node := int(rank) / 16
				want := []string{
					f[0], strconv.FormatUint(wire.ProcUID(rep.ID, uint32(rank)), 10), "node" + strconv.Itoa(node), strconv.Itoa(node),
					rep.Job, rep.App, id, strconv.Itoa(n), filepath.Join(d.dir, id, "node"+strconv.Itoa(node)+".sock"),
					d.m.Info().Token, "bar", "arg with spaces",
				}
				if !slices.Equal(f, want) {
					t.Errorf("rank %d environment:\n got %q\nwant %q", rank, f, want)
				}
			}
			if len(seen) != n {
				t.Errorf("ranks %v, want 0..%d", seen, n-1)
			}
			var placed int
			for _, pl := range rep.Placement {
				for r := range pl.Ranks.All() {
					placed++
					if want := "node" + strconv.Itoa(int(r)/16); pl.Node != want {
						t.Errorf("rank %d placed on %s, want %s", r, pl.Node, want)
					}
				}
			}
			if placed != n {
				t.Errorf("placement covers %d ranks, want %d", placed, n)
			}
		})
	}
	st, err := d.c.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range st.Nodes {
		if nd.Used != 0 || nd.Slots != 16 || nd.State != wire.NodeUp {
			t.Errorf("after the jobs: node %+v", nd)
		}
	}
	if len(st.Jobs) != 0 {
		t.Errorf("live jobs after the end: %+v", st.Jobs)
	}
}

// TestSessionQueries runs 8 real clients that ask their daemon for their
// identity and the predefined sets.
func TestSessionQueries(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 4, 2)
	exe, _ := os.Executable()
	rep, end := d.run(wire.JobLaunchReq{Argv: []string{exe, "session"}, N: 8, Env: []string{envRole + "=app"}})
	if end.State != wire.JobStateDone {
		t.Fatalf("job ended %s code %d %q; output %v", end.State, end.Code, end.Msg, d.output(rep.Job))
	}
	lines := d.output(rep.Job)
	if len(lines) != 8 {
		t.Fatalf("%d lines: %v", len(lines), lines)
	}
	for _, l := range lines {
		var r sessionReport
		if err := json.Unmarshal(l.Line, &r); err != nil {
			t.Fatalf("rank %d: %v: %s", l.Rank, err, l.Line)
		}
		if r.Err != "" {
			t.Fatalf("rank %d: %s", l.Rank, r.Err)
		}
		node := l.Rank / 2
		local := wire.Span(node*2, node*2+1)
		want := wire.SessionInfo{
			Job: rep.Job, App: rep.App, Rank: l.Rank, UID: wire.ProcUID(rep.ID, l.Rank), Size: 8,
			Node: "node" + strconv.Itoa(int(node)), LocalRank: l.Rank % 2, LocalPeers: local, DVM: d.m.Info().ID,
		}
		if fmt.Sprint(r.Info) != fmt.Sprint(want) {
			t.Errorf("rank %d session info\n got %+v\nwant %+v", l.Rank, r.Info, want)
		}
		checkSet := func(name string, size uint32, members wire.RankRanges) {
			t.Helper()
			p := r.Sets[name]
			if p.Size != size || !p.Active || p.Version != 0 || p.Members.String() != members.String() || p.Job != rep.Job {
				t.Errorf("rank %d: set %s = %+v, want size %d members %v", l.Rank, name, p, size, members)
			}
		}
		checkSet("mpi://WORLD", 8, wire.Span(0, 7))
		checkSet("mpi://self", 1, wire.Span(l.Rank, l.Rank))
		checkSet("mpi://SHARED", 2, local)
		checkSet("mpi://app/"+rep.App, 8, wire.Span(0, 7))
		if got := r.Sets["mpi://self"].Name; got != pset.NameSelf {
			t.Errorf("SELF named %q", got)
		}
		wantList := []string{"mpi://SELF", "mpi://SHARED", "mpi://WORLD", "mpi://app/" + rep.App}
		if !slices.Equal(r.List, wantList) {
			t.Errorf("rank %d: pset.list = %v, want %v", l.Rank, r.List, wantList)
		}
		if !strings.Contains(r.Impostor, "permission") && !strings.Contains(r.Impostor, "not process") && !strings.Contains(r.Impostor, "no process") {
			t.Errorf("rank %d could connect as another rank: %q", l.Rank, r.Impostor)
		}
		if r.Env[procenv.Rank] != strconv.Itoa(int(l.Rank)) {
			t.Errorf("rank %d: env %v", l.Rank, r.Env)
		}
	}
}

// TestOutputLines checks line splitting, streams and order.
func TestOutputLines(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 2)
	rep, end := d.run(wire.JobLaunchReq{
		Argv: sh(`for i in 1 2 3 4 5; do echo "out $i"; echo "err $i" >&2; done; printf last`), N: 2,
	})
	if end.State != wire.JobStateDone {
		t.Fatalf("job %+v", end)
	}
	got := map[uint32]map[uint8][]string{}
	for _, l := range d.output(rep.Job) {
		if got[l.Rank] == nil {
			got[l.Rank] = map[uint8][]string{}
		}
		got[l.Rank][l.Stream] = append(got[l.Rank][l.Stream], string(l.Line))
	}
	for r := range uint32(2) {
		out := []string{"out 1", "out 2", "out 3", "out 4", "out 5", "last"}
		errs := []string{"err 1", "err 2", "err 3", "err 4", "err 5"}
		if !slices.Equal(got[r][wire.StreamStdout], out) || !slices.Equal(got[r][wire.StreamStderr], errs) {
			t.Errorf("rank %d: stdout %q stderr %q", r, got[r][wire.StreamStdout], got[r][wire.StreamStderr])
		}
	}
}

// TestOutputMergeAndFiles: --output-dir writes one file per rank and
// stream; merged stderr arrives as stdout.
func TestOutputMergeAndFiles(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 1)
	dir := t.TempDir()
	rep, end := d.run(wire.JobLaunchReq{
		Argv: sh(`echo "o$DYNRT_RANK"; echo "e$DYNRT_RANK" >&2`), N: 2,
		Output: wire.OutputFlags{Merge: true, Dir: dir},
	})
	if end.State != wire.JobStateDone {
		t.Fatalf("job %+v", end)
	}
	for _, l := range d.output(rep.Job) {
		if l.Stream != wire.StreamStdout {
			t.Errorf("merged line on stream %d: %q", l.Stream, l.Line)
		}
	}
	for r := range 2 {
		// Two pipes: the order between the streams is not kept.
		b, err := os.ReadFile(filepath.Join(dir, "rank."+strconv.Itoa(r), "stdout"))
		got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		slices.Sort(got)
		if want := []string{fmt.Sprintf("e%d", r), fmt.Sprintf("o%d", r)}; err != nil || !slices.Equal(got, want) {
			t.Errorf("rank %d file: %q %v, want the lines %q", r, b, err, want)
		}
	}
}

// TestFailingRank: rank 3 exits 7, the job fails with that code and a
// report, the others are terminated and the slots freed.
func TestFailingRank(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 4, 2)
	rep, end := d.run(wire.JobLaunchReq{
		Argv: sh(`if [ "$DYNRT_RANK" = 3 ]; then exit 7; fi; exec sleep 30`), N: 8, Name: "failer",
	})
	if end.State != wire.JobStateFailed || end.Code != 7 || end.Reason != wire.JobEndFailed {
		t.Fatalf("job ended %s code %d reason %q", end.State, end.Code, end.Reason)
	}
	if want := "rank 3 on node1 exited with code 7"; !strings.Contains(end.Msg, want) || !strings.Contains(end.Msg, rep.Job) {
		t.Errorf("report %q lacks %q and the job", end.Msg, want)
	}
	for _, p := range d.procs(rep.Job) {
		switch {
		case p.Rank == 3 && (p.State != wire.ProcStateExited || p.Code != 7):
			t.Errorf("rank 3: %+v", p)
		case p.Rank != 3 && (p.State != wire.ProcStateKilled || p.Signal != int(syscall.SIGTERM)):
			t.Errorf("rank %d not terminated: %+v", p.Rank, p)
		}
	}
	st, _ := d.c.State(context.Background())
	for _, n := range st.Nodes {
		if n.Used != 0 {
			t.Errorf("slots still used: %+v", n)
		}
	}
}

// TestKeepGoing: a failing rank does not stop the others.
func TestKeepGoing(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 2)
	rep, end := d.run(wire.JobLaunchReq{
		Argv: sh(`if [ "$DYNRT_RANK" = 1 ]; then exit 3; fi; sleep 0.3; echo done`), N: 4, KeepGoing: true,
	})
	if end.State != wire.JobStateFailed || end.Code != 3 || end.Reason != "" {
		t.Fatalf("job ended %s code %d reason %q", end.State, end.Code, end.Reason)
	}
	for _, p := range d.procs(rep.Job) {
		if p.Rank != 1 && (p.State != wire.ProcStateExited || p.Code != 0) {
			t.Errorf("rank %d: %+v", p.Rank, p)
		}
	}
	if n := len(d.output(rep.Job)); n != 3 {
		t.Errorf("%d ranks finished their work, want 3", n)
	}
}

// TestKillJob kills a job on request; a process that ignores SIGTERM gets
// SIGKILL after the grace period.
func TestKillJob(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 2)
	rep, err := d.launch(wire.JobLaunchReq{
		Argv: sh(`if [ "$DYNRT_RANK" = 0 ]; then trap "" TERM; fi; echo ready; exec sleep 30`), N: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	d.waitLines(rep.Job, 4)
	if err := d.c.KillJob(context.Background(), rep.Job, 0, 0); err != nil {
		t.Fatal(err)
	}
	end := d.wait(rep.Job)
	if end.State != wire.JobStateKilled || end.Reason != wire.JobEndKill || end.Code != 128+int(syscall.SIGTERM) {
		t.Fatalf("job ended %s code %d reason %q", end.State, end.Code, end.Reason)
	}
	for _, p := range d.procs(rep.Job) {
		want := syscall.SIGTERM
		if p.Rank == 0 {
			want = syscall.SIGKILL
		}
		if p.State != wire.ProcStateKilled || p.Signal != int(want) {
			t.Errorf("rank %d: %+v, want killed by %v", p.Rank, p, want)
		}
	}
	if err := d.c.KillJob(context.Background(), rep.Job, 0, 0); !errors.Is(err, wire.ErrState) {
		t.Errorf("kill of an ended job: %v", err)
	}
	if err := d.c.KillJob(context.Background(), "nope", 0, 0); !errors.Is(err, wire.ErrNotFound) {
		t.Errorf("kill of an unknown job: %v", err)
	}
}

// TestTimeout: the job's time limit kills it.
func TestTimeout(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 1)
	_, end := d.run(wire.JobLaunchReq{Argv: []string{"sleep", "30"}, N: 2, TimeoutMS: 200})
	if end.State != wire.JobStateKilled || end.Reason != wire.JobEndTimeout || end.Code != wire.JobCodeTimeout {
		t.Fatalf("job ended %s code %d reason %q", end.State, end.Code, end.Reason)
	}
	if !strings.Contains(end.Msg, "time limit of 200ms") {
		t.Errorf("report %q", end.Msg)
	}
}

// TestStopKillsJobs: dvm.stop kills running jobs, stops the daemons and
// removes everything (checked by the cleanup).
func TestStopKillsJobs(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 3, 2)
	rep, err := d.launch(wire.JobLaunchReq{Argv: sh(`echo up; exec sleep 30`), N: 6})
	if err != nil {
		t.Fatal(err)
	}
	d.waitLines(rep.Job, 6)
	end := d.stopWaiting(rep.Job)
	if end.State != wire.JobStateKilled || end.Reason != wire.JobEndStop {
		t.Errorf("job ended %s reason %q", end.State, end.Reason)
	}
	if _, err := os.Stat(d.m.Info().Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rendezvous file after stop: %v", err)
	}
}

// TestConcurrentJobs runs two jobs of the same program at once.
func TestConcurrentJobs(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 4)
	a, err := d.launch(wire.JobLaunchReq{Argv: sh(`sleep 0.2; echo a$DYNRT_RANK`), N: 4})
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.launch(wire.JobLaunchReq{Argv: sh(`echo b$DYNRT_RANK`), N: 4})
	if err != nil {
		t.Fatal(err)
	}
	if a.Job == b.Job || a.App == b.App || a.ID+1 != b.ID {
		t.Errorf("jobs not distinct: %+v %+v", a, b)
	}
	if b.App != "sh-"+strconv.Itoa(int(b.ID)) {
		t.Errorf("second app name %q", b.App)
	}
	// Stack policy: the second job takes the slots the first left free.
	for _, pl := range b.Placement {
		if pl.Node != "node1" {
			t.Errorf("second job placed on %s", pl.Node)
		}
	}
	for _, j := range []wire.JobLaunchReply{a, b} {
		if end := d.wait(j.Job); end.State != wire.JobStateDone || len(d.output(j.Job)) != 4 {
			t.Errorf("job %s: %+v, output %v", j.Job, end, d.output(j.Job))
		}
	}
}

// TestDaemonLost kills a daemon process: its node goes down, its
// processes count as killed, the job fails, nothing is left behind.
func TestDaemonLost(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 3, 2)
	var mu sync.Mutex
	var events []wire.Event
	if _, err := d.c.Subscribe(context.Background(), wire.EventSubReq{Kinds: []string{"node."}}, func(ev wire.Event) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	rep, err := d.launch(wire.JobLaunchReq{Argv: sh(`echo up; exec sleep 30`), N: 6})
	if err != nil {
		t.Fatal(err)
	}
	d.waitLines(rep.Job, 6)
	st, _ := d.c.State(context.Background())
	if err := syscall.Kill(st.Nodes[2].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	end := d.wait(rep.Job)
	if end.State != wire.JobStateFailed || !strings.Contains(end.Msg, "on node2 was lost") || end.Code != 128+9 {
		t.Fatalf("job ended %s code %d %q", end.State, end.Code, end.Msg)
	}
	st, _ = d.c.State(context.Background())
	if st.Nodes[2].State != wire.NodeDown || st.Nodes[0].State != wire.NodeUp {
		t.Errorf("nodes after the loss: %+v", st.Nodes)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 1 || events[0].Kind != wire.EvNodeDown || events[0].Node != "node2" {
		t.Errorf("node events %+v", events)
	}
	// The orphaned processes of node2 die with their daemon (Pdeathsig).
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range d.procs(rep.Job) {
		if !leakcheck.WaitGone(p.PID, time.Until(deadline)) {
			t.Errorf("rank %d (pid %d) survived", p.Rank, p.PID)
		}
	}
	// New jobs that would need node2 are refused.
	if _, err := d.launch(wire.JobLaunchReq{Argv: []string{"true"}, N: 6}); !errors.Is(err, wire.ErrNoResources) || !strings.Contains(err.Error(), "node2") {
		t.Errorf("launch onto a down node: %v", err)
	}
}

// TestBadLaunch: more processes than slots, no processes, no program.
func TestBadLaunch(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 2)
	if _, err := d.launch(wire.JobLaunchReq{Argv: []string{"sleep", "30"}, N: 3}); err != nil {
		t.Fatal(err)
	}
	_, err := d.launch(wire.JobLaunchReq{Argv: []string{"true"}, N: 5})
	if !errors.Is(err, wire.ErrNoResources) || !strings.Contains(err.Error(), "cannot start 5 processes: only 1 of 4 slots are free") {
		t.Errorf("too many: %v", err)
	}
	if _, err := d.launch(wire.JobLaunchReq{Argv: []string{"true"}, N: 0}); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("n=0: %v", err)
	}
	if _, err := d.launch(wire.JobLaunchReq{N: 1}); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("no program: %v", err)
	}
	st, _ := d.c.State(context.Background())
	if len(st.Jobs) != 1 || st.Nodes[0].Used+st.Nodes[1].Used != 3 {
		t.Errorf("a refused launch changed the DVM: %+v", st)
	}
	// A program that cannot be executed fails each rank with 127.
	rep, end := d.run(wire.JobLaunchReq{Argv: []string{"/nonexistent/prog"}, N: 1})
	if end.State != wire.JobStateFailed || end.Code != 127 || !strings.Contains(end.Msg, "could not start") {
		t.Errorf("missing program: %+v", end)
	}
	_ = rep
}

// TestEventOrder: a subscriber sees launched, exits, ended in order.
func TestEventOrder(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 2)
	ch := make(chan wire.Event, 64)
	if _, err := d.c.Subscribe(context.Background(), wire.EventSubReq{Kinds: []string{"job.", "proc.", "pset."}}, func(ev wire.Event) {
		ch <- ev
	}); err != nil {
		t.Fatal(err)
	}
	rep, end := d.run(wire.JobLaunchReq{Argv: []string{"/bin/true"}, N: 4})
	if end.State != wire.JobStateDone {
		t.Fatalf("%+v", end)
	}
	// 2 × set defined, job running, 2 × procs running (one per node),
	// 4 × exited, job done
	var evs []wire.Event
	for len(evs) < 10 {
		select {
		case ev := <-ch:
			evs = append(evs, ev)
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d events: %+v", len(evs), evs)
		}
	}
	var got []string
	var last uint64
	ranks := map[string]bool{}
	for _, ev := range evs {
		if ev.Job != rep.Job {
			continue
		}
		if ev.Seq <= last {
			t.Errorf("sequence numbers not increasing: %d after %d", ev.Seq, last)
		}
		last = ev.Seq
		got = append(got, ev.Kind+":"+ev.State)
		if ev.Kind == wire.EvProcState && ev.State == wire.ProcStateExited {
			ranks[ev.Ranks.String()] = true
		}
		if ev.Kind == wire.EvPsetDef && (ev.Pset == nil || ev.Pset.Size != 4 || (ev.Pset.Name != pset.NameWorld && ev.Pset.Name != "mpi://app/"+rep.App)) {
			t.Errorf("set event %+v", ev.Pset)
		}
		if ev.Kind == wire.EvProcState && ev.State == wire.ProcStateRunning && ev.Ranks.String() != map[string]string{"node0": "0-1", "node1": "2-3"}[ev.Node] {
			t.Errorf("running event %+v", ev)
		}
	}
	want := []string{"pset.def:", "pset.def:", "job.state:running", "proc.state:running", "proc.state:running",
		"proc.state:exited", "proc.state:exited", "proc.state:exited", "proc.state:exited", "job.state:done"}
	if !slices.Equal(got, want) || len(ranks) != 4 {
		t.Errorf("events %v (ranks %v), want %v", got, ranks, want)
	}
	// A late subscriber can replay what it missed.
	late := d.attach()
	defer late.Close()
	replayed := make(chan wire.Event, 64)
	if _, err := late.Subscribe(context.Background(), wire.EventSubReq{Kinds: []string{"node.up"}, Since: 1}, func(ev wire.Event) { replayed <- ev }); err != nil {
		t.Fatal(err)
	}
	for i := range 1 { // node.up of node0 has Seq 1 and is not replayed; node1's is
		select {
		case ev := <-replayed:
			if ev.Kind != wire.EvNodeUp {
				t.Errorf("replayed %+v", ev)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("replay %d missing", i)
		}
	}
}

// TestLauncherLost: closing the launching tool kills its jobs.
func TestLauncherLost(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 2)
	other := d.attach()
	env := append([]string(nil), d.env...)
	rep, err := other.Launch(context.Background(), wire.JobLaunchReq{Argv: []string{"sleep", "30"}, N: 2, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
	end := d.wait(rep.Job)
	if end.State != wire.JobStateKilled || end.Reason != wire.JobEndLost {
		t.Errorf("job ended %s reason %q", end.State, end.Reason)
	}
}

// TestAbort: a process's session.abort, relayed by its daemon, kills its
// job with the given status.
func TestAbort(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 2)
	exe, _ := os.Executable()
	_, end := d.run(wire.JobLaunchReq{Argv: []string{exe, "abort", "5"}, N: 4, Env: []string{envRole + "=app"}})
	if end.State != wire.JobStateKilled || end.Reason != wire.JobEndAbort || end.Code != 5 || !strings.Contains(end.Msg, "rank 0 called abort: test abort") {
		t.Errorf("job ended %s code %d reason %q %q", end.State, end.Code, end.Reason, end.Msg)
	}
}
