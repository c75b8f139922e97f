package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/wire"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestJobEnv(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/h", "DYNRT_RANK=3", "DYNRT_DVM=x", "DYNRT_DIR=/d", "A=1", "noequals", "=bad", "A=2"}
	got := jobEnv(base, []string{"B=x=y", "HOME=/other", "PATH", "C=", "DYNRT_RANK=7"})
	want := []string{"PATH=/bin", "HOME=/other", "DYNRT_DIR=/d", "A=2", "B=x=y", "C=", "DYNRT_RANK=7"}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestResolveProgram(t *testing.T) {
	dir := t.TempDir()
	bin1, bin2, wd := filepath.Join(dir, "bin1"), filepath.Join(dir, "bin2"), filepath.Join(dir, "wd")
	for _, d := range []string{bin1, bin2, wd, filepath.Join(bin1, "isdir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string, mode os.FileMode) {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(bin1, "noexec"), 0o644)
	write(filepath.Join(bin2, "noexec"), 0o755) // a later PATH entry wins over a non-executable one
	write(filepath.Join(bin2, "prog"), 0o755)
	write(filepath.Join(wd, "local"), 0o755)
	write(filepath.Join(wd, "plain"), 0o644)
	env := []string{"PATH=relative:" + bin1 + "::" + bin2}
	cases := []struct {
		name, wdir string
		env        []string
		want       string
		err        error
	}{
		{name: "prog", want: filepath.Join(bin2, "prog")},
		{name: "noexec", want: filepath.Join(bin2, "noexec")},
		{name: "isdir", err: errNoExec},
		{name: "missing", err: fs.ErrNotExist},
		{name: "./local", wdir: wd, want: "./local"},
		{name: "./local", wdir: dir, err: fs.ErrNotExist},
		{name: "./plain", wdir: wd, err: errNoExec},
		{name: filepath.Join(wd, "local"), want: filepath.Join(wd, "local")},
		{name: "sh", env: []string{"HOME=/"}, want: "/usr/bin/sh"}, // no PATH: the shell's default
		{name: "local", wdir: wd, err: fs.ErrNotExist},             // "." is never searched
	}
	for _, c := range cases {
		e := env
		if c.env != nil {
			e = c.env
		}
		got, err := resolveProgram(c.name, c.wdir, e)
		if c.err != nil {
			if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.name) {
				t.Errorf("%s in %s: %q, %v; want %v", c.name, c.wdir, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s in %s: %q, %v; want %q", c.name, c.wdir, got, err, c.want)
		}
	}
}

func TestSinkFormat(t *testing.T) {
	tm := time.Date(2025, 3, 4, 5, 6, 7, 891234567, time.UTC).UnixNano()
	out := &wire.OutputLine{Job: "abcd2345.12", Rank: 3, Stream: wire.StreamStdout, Line: []byte("hi there"), Time: tm}
	errl := &wire.OutputLine{Job: "odd", Rank: 0, Stream: wire.StreamStderr, Line: []byte(""), Time: tm}
	cases := []struct {
		opts outputOpts
		l    *wire.OutputLine
		want string
	}{
		{outputOpts{}, out, "hi there\n"},
		{outputOpts{Tag: true}, out, "[12,3]<stdout>:hi there\n"},
		{outputOpts{Tag: true}, errl, "[odd,0]<stderr>:\n"},
		{outputOpts{Timestamp: true}, out, "2025-03-04T05:06:07.891234Z hi there\n"},
		{outputOpts{Tag: true, Timestamp: true}, out, "2025-03-04T05:06:07.891234Z [12,3]<stdout>:hi there\n"},
	}
	for _, c := range cases {
		s := newSink(c.opts, nil, nil)
		if got := string(s.format(nil, c.l)); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.opts, got, c.want)
		}
	}
	var o, e bytes.Buffer
	s := newSink(outputOpts{}, &o, &e)
	s.write(*out)
	s.write(*errl)
	if o.String() != "hi there\n" || e.String() != "\n" {
		t.Errorf("streams: %q %q", o.String(), e.String())
	}
}

func TestBar(t *testing.T) {
	cases := []struct {
		used, total uint32
		want        string
	}{
		{0, 28, "[....................]"},
		{1, 28, "[#...................]"}, // busy never looks idle
		{14, 28, "[##########..........]"},
		{28, 28, "[####################]"},
		{30, 28, "[####################]+"},
		{0, 0, "[....................]"},
	}
	for _, c := range cases {
		if got := bar(c.used, c.total); got != c.want {
			t.Errorf("bar(%d, %d) = %q, want %q", c.used, c.total, got, c.want)
		}
	}
}

func sampleState() wire.DVMState {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	return wire.DVMState{
		ID: "abcd2345", PID: 4242, Started: t0, Uptime: int64(95 * time.Second), Version: "v0.3.0", Tree: &wire.TreeState{Radix: 16, Relays: 40, Resends: 2, Fences: 3, Up: 12, UpParts: 96, Events: 7}, LauncherInfo: "slurm: job 12, 3 nodes, slots from SLURM_TASKS_PER_NODE (chosen because SLURM_JOB_ID is set)",
		Nodes: []wire.NodeInfo{
			{Name: "node0", Index: 0, Host: "hostA", Slots: 28, Used: 28, PID: 4242, State: wire.NodeUp},
			{Name: "node1", Index: 1, Host: "hostA", Slots: 28, Used: 3, PID: 4250, State: wire.NodeUp},
			{Name: "node2", Index: 2, Host: "hostB", Slots: 4, Used: 0, PID: 4251, State: wire.NodeDown},
		},
		Jobs: []wire.JobInfo{
			{ID: 1, Job: "abcd2345.1", App: "solver", State: wire.JobStateRunning, Argv: []string{"/opt/solver", "--grid", "512"}, Size: 31, Started: t0 + 1e9, OnFailure: wire.OnFailureShrink,
				Placement: []wire.Placement{{Node: "node0", Ranks: wire.Span(0, 27)}, {Node: "node1", Ranks: wire.Span(28, 30)}}},
			{ID: 2, Job: "abcd2345.2", App: "sleep", State: wire.JobStateFailed, Argv: []string{"/usr/bin/sleep", strings.Repeat("9", 50)}, Code: 7, Started: t0 + 2e9, Ended: t0 + 3e9, OnFailure: wire.OnFailureAbort},
		},
		Launcher: "ssh",
		NodeLog: []wire.Event{
			{Time: t0 + 10e9, Kind: wire.EvNodeAdded, Node: "node3", Msg: "node node3 joined the DVM: 8 slots on host hostC"},
			{Time: t0 + 60e9, Kind: wire.EvNodeLeaving, Node: "node3", Msg: "node node3 is leaving the DVM; moving the processes of 1 jobs out by SUB"},
			{Time: t0 + 62e9, Kind: wire.EvNodeRemoved, Node: "node3", Msg: "node node3 left the DVM (drained by mpi://rte/solver/rc/2)"},
		},
	}
}

func TestStatusGolden(t *testing.T) {
	s := toStatusJSON(sampleState(), "bench")
	var human, js bytes.Buffer
	if err := writeStatus(&human, s); err != nil {
		t.Fatal(err)
	}
	if err := writeStatusJSON(&js, s); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"status.golden": human.Bytes(), "status.json.golden": js.Bytes()} {
		p := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(p, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs (run with -update if intended):\n%s", p, got)
		}
	}
	// The JSON parses back to the same document.
	var back statusJSON
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Slots != 60 || back.Used != 31 || len(back.Jobs) != 2 || back.Jobs[0].Placement[1].Ranks != "28-30" || back.Jobs[1].Ended == nil {
		t.Errorf("round trip: %+v", back)
	}
	// An empty DVM prints empty lists, not null.
	var empty bytes.Buffer
	_ = writeStatusJSON(&empty, toStatusJSON(wire.DVMState{ID: "x"}, ""))
	if !strings.Contains(empty.String(), `"nodes": []`) || !strings.Contains(empty.String(), `"jobs": []`) {
		t.Errorf("empty: %s", empty.String())
	}
}

func TestReportText(t *testing.T) {
	got := reportText(dvmdir.Info{ID: "abcd2345", Socket: "/run/d/abcd2345/master.sock", TCP: "127.0.0.1:4000"})
	want := "abcd2345\nuri:unix:///run/d/abcd2345/master.sock\nuri:tcp://127.0.0.1:4000\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestJobNote: a job that succeeded with a remark from the master (a
// removed process that exited non-zero) gets it said, still exiting 0; a
// failure is reported through the exit error instead.
func TestJobNote(t *testing.T) {
	const removed = "job a (x.1) done; 1 removed process(es) did not leave cleanly (not a failure of the job): rank 2 on node0 exited with code 5 after mpi://rte/a/rc/1 removed it"
	cases := []struct {
		name string
		end  wire.JobInfo
		note string
		code int // jobExit's status, 0 = nil
	}{
		{"clean", wire.JobInfo{State: wire.JobStateDone}, "", 0},
		{"removed exit 5", wire.JobInfo{State: wire.JobStateDone, Msg: removed}, "dynrun: " + removed, 0},
		{"failed", wire.JobInfo{State: wire.JobStateFailed, Code: 3, Msg: "job a (x.1): rank 1 exited with code 3"}, "", 3},
	}
	for _, c := range cases {
		if got := jobNote(c.end); got != c.note {
			t.Errorf("%s: note %q, want %q", c.name, got, c.note)
		}
		err := jobExit(c.end, wire.JobLaunchReply{App: "a", Job: "x.1"})
		code := 0
		var ee *cliutil.ExitError
		if errors.As(err, &ee) {
			code = ee.Code
		}
		if code != c.code || (err == nil) != (c.code == 0) {
			t.Errorf("%s: exit %d (%v), want %d", c.name, code, err, c.code)
		}
	}
}

// TestParseUsize: --usize takes Hydra's -usize words in any case, or a
// positive number; anything else is a usage error naming the flag.
func TestParseUsize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int32
		bad  bool
	}{
		{"", 0, false}, {"INFINITE", 0, false}, {"infinite", 0, false}, {"SYSTEM", wire.UniverseSlots, false},
		{"System", wire.UniverseSlots, false}, {"12", 12, false}, {"0", 0, true}, {"-3", 0, true}, {"lots", 0, true},
	} {
		got, err := parseUsize(tc.in)
		if tc.bad {
			if err == nil || !strings.Contains(err.Error(), "--usize") {
				t.Errorf("parseUsize(%q) = %d, %v; want an error naming --usize", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseUsize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

// Running dynrun as /DIR/bin/dynrun implies --prefix DIR (as mpirun);
// any other path implies nothing.
func TestImpliedPrefix(t *testing.T) {
	cases := map[string]string{
		"/opt/dynrt/bin/dynrun":    "/opt/dynrt",
		"/opt/dynrt/bin/../bin/dy": "/opt/dynrt",
		"/usr/bin/dynrun":          "/usr",
		"dynrun":                   "",
		"./bin/dynrun":             "",
		"/tmp/go-build1/exe/dyn":   "",
		"/dynrun":                  "",
	}
	for argv0, want := range cases {
		if got := impliedPrefix(argv0); got != want {
			t.Errorf("impliedPrefix(%q) = %q, want %q", argv0, got, want)
		}
	}
}

// TestReadyLine: the count words agree with the counts ("1 nodes" before).
func TestReadyLine(t *testing.T) {
	cases := []struct {
		nodes []alloc.Node
		want  string
	}{
		{[]alloc.Node{{Name: "h0", Slots: 1}}, "dynrun: DVM x ready: 1 node, 1 slot (stop it with 'dynrun dvm stop --dvm x')"},
		{[]alloc.Node{{Name: "h0", Slots: 0}, {Name: "h1", Slots: 4}}, "dynrun: DVM x ready: 2 nodes, 4 slots (stop it with 'dynrun dvm stop --dvm x')"},
		{[]alloc.Node{{Name: "h0", Slots: 0}}, "dynrun: DVM x ready: 1 node, 0 slots (stop it with 'dynrun dvm stop --dvm x')"},
	}
	for _, c := range cases {
		if got := readyLine("x", c.nodes); got != c.want {
			t.Errorf("readyLine(%v) = %q, want %q", c.nodes, got, c.want)
		}
	}
}

// awaitReadyLine returns once the ready line of the DVM is in the log
// (written a little after the rendezvous file, as the daemonized child
// does), or at once when the child has exited, keeping its status for
// the caller. Without it, a master killed right after `dvm start
// --daemonize` returned could leave an empty log, not kept as its crash
// log (TestCrashKeepsDVMLog failed so in CI).
func TestAwaitReadyLine(t *testing.T) {
	logf, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	go func() {
		time.Sleep(150 * time.Millisecond)
		fmt.Fprintln(logf, readyLine("abc", []alloc.Node{{Name: "n", Slots: 1}}))
	}()
	awaitReadyLine(logf, "abc", make(chan error, 1))
	if b, _ := os.ReadFile(logf.Name()); !strings.Contains(string(b), "DVM abc ready") {
		t.Errorf("returned before the ready line: log %q", b)
	}

	exited := make(chan error, 1)
	exited <- errors.New("exit status 1")
	start := time.Now()
	awaitReadyLine(logf, "other", exited)
	if took := time.Since(start); took > readyLineWait/2 {
		t.Errorf("waited %v for a child that had exited", took)
	}
	select {
	case err := <-exited:
		if err == nil || err.Error() != "exit status 1" {
			t.Errorf("exit status %v, want it kept", err)
		}
	default:
		t.Error("the child's exit status was taken")
	}
}

// TestDaemonizeForwardsEveryFlag: every flag of dvm start reaches the
// DVM that --daemonize starts in the background. --tree-radix was once
// dropped there: the background DVM ran without the tree it was asked for.
func TestDaemonizeForwardsEveryFlag(t *testing.T) {
	own := []string{"daemonize", "report-uri", "id", "prefix", "launcher"} // decided or kept by the parent
	var start *cli.Command
	for _, c := range dvmCommand(&env{}).Subcommands {
		if c.Name == "start" {
			start = c
		}
	}
	if start == nil {
		t.Fatal("no dvm start command")
	}
	for _, f := range start.Flags {
		name := f.Names()[0]
		if !slices.Contains(daemonizeForwards, name) && !slices.Contains(own, name) {
			t.Errorf("dvm start --%s is not passed on by --daemonize (daemonizeForwards)", name)
		}
	}
}
