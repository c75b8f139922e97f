package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/dvmdir"
)

func TestHelpAndVersion(t *testing.T) {
	code, out, _ := run("--help")
	if code != 0 || !strings.Contains(out, "dynrun") || !strings.Contains(out, "--oversubscribe") {
		t.Fatalf("--help: exit %d, output %q", code, out)
	}
	code, out, _ = run("--version")
	if code != 0 || !strings.HasPrefix(out, "dynrun version ") {
		t.Fatalf("--version: exit %d, output %q", code, out)
	}
}

func TestUnknownFlagIsUsageError(t *testing.T) {
	if code, _, errOut := run("--no-such-flag"); code != 2 || !strings.Contains(errOut, "no-such-flag") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// Bad command lines exit 2 before anything is started.
func TestUsageErrors(t *testing.T) {
	dynDir(t)
	cases := []struct {
		args []string
		err  string
	}{
		{[]string{"-n", "0", "true"}, "-n 0: need at least 1"},
		{[]string{"-n", "-3", "true"}, "-n -3"},
		{[]string{"true"}, "missing -n N"},
		{[]string{"-n", "2"}, "missing program"},
		{[]string{}, "missing -n N and program"},
		{[]string{"-n", "x", "true"}, "invalid value"},
		{[]string{"--map-by", "core", "-n", "1", "true"}, "--map-by \"core\""},
		{[]string{"--stdin", "all", "-n", "1", "true"}, "--stdin \"all\""},
		{[]string{"--timeout", "-1s", "-n", "1", "true"}, "--timeout"},
		{[]string{"--nodes", "2", "--dvm", "x", "-n", "1", "true"}, "cannot be combined with --dvm"},
		{[]string{"--slots", "0", "-n", "1", "true"}, "--slots 0"},
		{[]string{"-x", "=v", "-n", "1", "true"}, "-x \"=v\""},
		{[]string{"--wdir", "/no/such/dir", "-n", "1", "true"}, "not a directory"},
		{[]string{"dvm", "start", "--host", "a", "--hostfile", "f"}, "exclude each other"},
		{[]string{"dvm", "start", "--host", "a", "--nodes", "2"}, "--nodes"},
		{[]string{"dvm", "start", "--host", "a;b"}, "character ';'"},
		{[]string{"dvm", "start", "--launcher", "pbs"}, "--launcher \"pbs\": want local, ssh, join, slurm"},
		{[]string{"dvm", "start", "--launcher", "slurm", "--host", "a"}, "--launcher slurm takes the nodes and slots from the Slurm allocation; drop --host"},
		{[]string{"dvm", "start", "--launcher", "slurm", "--slots", "2"}, "drop --slots"},
		{[]string{"dvm", "start", "--nodes", "0"}, "--nodes must be at least 1"},
		{[]string{"dvm", "start", "--hostfile", "/no/such/hostfile"}, "/no/such/hostfile"},
		{[]string{"dvm", "start", "extra"}, "unexpected argument"},
		{[]string{"daemon", "--node", "n"}, "--master is required"},
		{[]string{"dvm", "start", "--heartbeat-misses", "0"}, "--heartbeat-misses 0: want at least 1"},
		{[]string{"dvm", "start", "--heartbeat", "0s"}, "--heartbeat 0s: want at least 1ms"},
		{[]string{"--heartbeat", "-1s", "-n", "1", "true"}, "--heartbeat -1s"},
		// Sizes are bounded before anything is allocated or truncated
		// (issue 11 item 1; docs/limits.md).
		{[]string{"-n", "1000000000", "--oversubscribe", "true"}, "limit procs-per-job of 65536"},
		{[]string{"-n", "4294967297", "true"}, "4294967297 exceeds the limit procs-per-job"},
		{[]string{"--nodes", "5000", "-n", "1", "true"}, "limit nodes of 4096"},
		{[]string{"dvm", "start", "--nodes", "1000000000"}, "limit nodes of 4096"},
		{[]string{"dvm", "grow"}, "exactly one of --host, --hostfile and --nodes"},
		{[]string{"dvm", "grow", "--nodes", "1", "--host", "h"}, "exactly one of"},
		{[]string{"dvm", "grow", "--nodes", "0"}, "--nodes must be at least 1"},
		{[]string{"dvm", "grow", "--nodes", "5000"}, "limit nodes of 4096"},
		{[]string{"dvm", "grow", "--host", "a;b"}, "character ';'"},
		{[]string{"dvm", "grow", "--nodes", "1", "--timeout", "-1s"}, "--timeout -1s"},
		{[]string{"dvm", "shrink"}, "give --node NAME"},
		{[]string{"dvm", "shrink", "--node", "x", "--timeout", "1s"}, "give --drain too"},
		// An unknown command is a usage error (exit 2), not urfave's 3.
		{[]string{"dvm", "bogus"}, `unknown command "bogus"`},
	}
	for _, c := range cases {
		code, out, errOut := run(c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.err) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out, errOut, c.err)
		}
	}
}

// Everything after the program goes to it untouched, flags included.
func TestArgvPassthrough(t *testing.T) {
	dynDir(t)
	script := `for a; do echo "[$a]"; done`
	passed := []string{"-n", "5", "--foo", "--help", "-x", "A=1,2", "--", "--dvm", ""}
	args := append([]string{"-n", "2", "--slots", "2", "--tag-output", "sh", "-c", script, "sh"}, passed...)
	code, out, errOut := run(args...)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for rank := range 2 {
		var got []string
		for _, l := range strings.Split(out, "\n") {
			if rest, ok := strings.CutPrefix(l, fmt.Sprintf("[1,%d]<stdout>:", rank)); ok {
				got = append(got, rest)
			}
		}
		var want []string
		for _, a := range passed {
			want = append(want, "["+a+"]")
		}
		if !slices.Equal(got, want) {
			t.Errorf("rank %d got %q, want %q", rank, got, want)
		}
	}
}

func TestExitCodes(t *testing.T) {
	dir := dynDir(t)
	noexec := filepath.Join(t.TempDir(), "noexec")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		args     []string
		code     int
		stderr   []string // substrings
		stdout   string   // substring
		noOutput bool     // the program must not have run
		env      []string // VAR=VAL set for dynrun
	}{
		{name: "success", args: []string{"-n", "3", "--slots", "3", "true"}, code: 0},
		{name: "failing rank aborts the others", code: 7,
			args:   []string{"-n", "3", "--slots", "3", "sh", "-c", `if [ "$DYNRT_RANK" = 1 ]; then exit 7; fi; exec sleep 60`},
			stderr: []string{"rank 1", "code 7", "the other processes were terminated"}},
		{name: "signal", code: 128 + int(syscall.SIGUSR1),
			args:   []string{"-n", "2", "--slots", "2", "sh", "-c", `[ "$DYNRT_RANK" = 0 ] && kill -USR1 $$; exec sleep 60`},
			stderr: []string{"rank 0", "signal 10"}},
		{name: "keep going", code: 3,
			args:   []string{"-n", "2", "--slots", "2", "--keep-going", "sh", "-c", `if [ "$DYNRT_RANK" = 0 ]; then exit 3; fi; sleep 0.2; echo survived`},
			stdout: "survived", stderr: []string{"rank 0", "code 3"}},
		{name: "on-failure continue is keep going", code: 3,
			args:   []string{"-n", "2", "--slots", "2", "--on-failure", "continue", "sh", "-c", `if [ "$DYNRT_RANK" = 0 ]; then exit 3; fi; sleep 0.2; echo survived`},
			stdout: "survived", stderr: []string{"rank 0", "code 3"}},
		// A program that takes no part in changes ends before the failure
		// change is accepted: the loss fails the job (it was exit 0).
		{name: "on-failure replace, not malleable", code: 3,
			args:   []string{"-n", "2", "--slots", "2", "--on-failure", "replace", "sh", "-c", `if [ "$DYNRT_RANK" = 0 ]; then exit 3; fi; sleep 1`},
			stderr: []string{"lost 0 (rank 0", "code 3"}}, // the new rank 2 may end first: then it is the replacement that failed
		{name: "on-failure shrink, not malleable", code: 3,
			args:   []string{"-n", "2", "--slots", "2", "--on-failure", "shrink", "sh", "-c", `if [ "$DYNRT_RANK" = 0 ]; then exit 3; fi; sleep 1`},
			stderr: []string{"rank 0", "code 3", "ended before a failure change took them over"}},
		{name: "keep-going with on-failure shrink", args: []string{"-n", "1", "--keep-going", "--on-failure", "shrink", "true"}, code: 2,
			stderr: []string{"--keep-going", "--on-failure shrink"}, noOutput: true},
		{name: "unknown on-failure", args: []string{"-n", "1", "--on-failure", "retry", "true"}, code: 2,
			stderr: []string{`--on-failure "retry"`, "abort, continue, shrink or replace"}, noOutput: true},
		{name: "unknown program", args: []string{"-n", "2", "no-such-program-xyz"}, code: 127,
			stderr: []string{`"no-such-program-xyz" not found`}, noOutput: true},
		{name: "missing path", args: []string{"-n", "1", "./nothing-here"}, code: 127, stderr: []string{"./nothing-here"}},
		{name: "not executable", args: []string{"-n", "1", noexec}, code: 126, stderr: []string{noexec, "cannot execute"}},
		{name: "directory", args: []string{"-n", "1", "/"}, code: 126, stderr: []string{"is a directory"}},
		{name: "more than free slots", args: []string{"-n", "3", "--slots", "2", "true"}, code: 1,
			stderr: []string{"2 of 2 slots are free"}},
		{name: "oversubscribe", args: []string{"-n", "3", "--slots", "2", "--oversubscribe", "true"}, code: 0},
		{name: "timeout", args: []string{"-n", "2", "--slots", "2", "--timeout", "200ms", "sleep", "60"}, code: 124,
			stderr: []string{"time limit"}},
		// MPICH's test harness limits each test with Hydra's variable.
		{name: "MPIEXEC_TIMEOUT", env: []string{"MPIEXEC_TIMEOUT=1"}, code: 124,
			args: []string{"-n", "2", "--slots", "2", "sleep", "60"}, stderr: []string{"time limit"}},
		{name: "--timeout wins over MPIEXEC_TIMEOUT", env: []string{"MPIEXEC_TIMEOUT=1"}, code: 0,
			args: []string{"-n", "1", "--slots", "1", "--timeout", "1m", "sleep", "1.5"}},
		{name: "MPIEXEC_TIMEOUT 0 is no limit", env: []string{"MPIEXEC_TIMEOUT=0"}, code: 0,
			args: []string{"-n", "1", "--slots", "1", "true"}},
		{name: "bad MPIEXEC_TIMEOUT", env: []string{"MPIEXEC_TIMEOUT=10s"}, code: 2,
			args: []string{"-n", "1", "true"}, stderr: []string{`MPIEXEC_TIMEOUT="10s"`, "whole number of seconds"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, kv := range c.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			code, out, errOut := run(c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, c.code, errOut)
			}
			for _, s := range c.stderr {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr %q lacks %q", errOut, s)
				}
			}
			if !strings.Contains(out, c.stdout) {
				t.Errorf("stdout %q lacks %q", out, c.stdout)
			}
			if c.code == 0 && errOut != "" {
				t.Errorf("stderr on success: %q", errOut)
			}
			if c.code != 0 && strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Errorf("want a one-line report, got %q", errOut)
			}
			assertClean(t, dir)
		})
	}
}

// A private DVM of several nodes forks daemons (here the test binary);
// every process gets its identity and the launcher's environment.
func TestPrivateDVMEnvironment(t *testing.T) {
	dynDir(t)
	t.Setenv("DYNRUN_TEST_FORWARDED", "yes")
	t.Setenv("DYNRT_RANK", "999") // dynrun's own identity must not leak into the job
	wdir := t.TempDir()
	code, out, errOut := run("-n", "4", "--nodes", "2", "--slots", "2", "--name", "envtest", "-x", "EXTRA=a=b", "--wdir", wdir,
		"sh", "-c", `echo "$DYNRT_RANK $DYNRT_NODE $DYNRT_NODE_INDEX $DYNRT_SIZE $DYNRT_APP $DYNRT_UID $DYNRUN_TEST_FORWARDED $EXTRA $(pwd) $DYNRT_JOB $DYNRT_DVM ${DYNRT_DAEMON:+sock} ${DYNRT_TOKEN:+tok}"`)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	slices.Sort(lines)
	if len(lines) != 4 {
		t.Fatalf("got %q", out)
	}
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) != 13 {
			t.Fatalf("line %q", l)
		}
		node := i / 2 // map-by slot: ranks 0,1 on node0, 2,3 on node1
		uid := uint64(1)<<32 | uint64(i)
		want := []string{strconv.Itoa(i), "node" + strconv.Itoa(node), strconv.Itoa(node), "4", "envtest", strconv.FormatUint(uid, 10), "yes", "a=b", wdir}
		if !slices.Equal(f[:9], want) {
			t.Errorf("line %q, want prefix %q", l, want)
		}
		if !strings.HasPrefix(f[9], f[10]+".") || f[11] != "sock" || f[12] != "tok" {
			t.Errorf("line %q: job %q dvm %q", l, f[9], f[10])
		}
	}
}

func TestOutputOptions(t *testing.T) {
	dynDir(t)
	code, out, errOut := run("-n", "2", "--slots", "2", "--tag-output", "--timestamp-output", "sh", "-c", "echo out; echo err >&2")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	ts := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z `
	for _, c := range []struct{ text, stream string }{{out, "stdout"}, {errOut, "stderr"}} {
		word := c.stream[3:]
		re := regexp.MustCompile(`^` + ts + `\[1,([01])\]<` + c.stream + `>:` + word + `$`)
		lines := strings.Split(strings.TrimSpace(c.text), "\n")
		var ranks []string
		for _, l := range lines {
			m := re.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("%s line %q does not match %s", c.stream, l, re)
			}
			ranks = append(ranks, m[1])
		}
		slices.Sort(ranks)
		if !slices.Equal(ranks, []string{"0", "1"}) {
			t.Errorf("%s ranks %q", c.stream, ranks)
		}
	}

	outDir := filepath.Join(t.TempDir(), "out")
	code, out, errOut = run("-n", "2", "--slots", "2", "--output-dir", outDir, "sh", "-c", `echo "hello $DYNRT_RANK"; echo oops >&2`)
	if code != 0 || out != "" || errOut != "" {
		t.Fatalf("--output-dir: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for rank := range 2 {
		for stream, want := range map[string]string{"stdout": fmt.Sprintf("hello %d\n", rank), "stderr": "oops\n"} {
			b, err := os.ReadFile(filepath.Join(outDir, fmt.Sprintf("rank.%d", rank), stream))
			if err != nil || string(b) != want {
				t.Errorf("rank %d %s: %q, %v; want %q", rank, stream, b, err, want)
			}
		}
	}
}

// dvm start --daemonize, a job on it, status --json, list, stop.
func TestDVMLifecycle(t *testing.T) {
	dir := dynDir(t)
	report := filepath.Join(t.TempDir(), "uri")
	id := startDVM(t, "--nodes", "4", "--slots", "4", "--name", "life", "--report-uri", report)
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	rep := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(rep) != 3 || rep[0] != id || !strings.HasPrefix(rep[1], "uri:unix:///") || !strings.HasPrefix(rep[2], "uri:tcp://127.0.0.1:") {
		t.Fatalf("report %q", b)
	}
	// The unix uri is a working --dvm selection.
	if code, out, errOut := runBin(t, "--dvm", rep[1], "-n", "1", "echo", "via-uri"); code != 0 || out != "via-uri\n" {
		t.Fatalf("--dvm %s: exit %d, %q %q", rep[1], code, out, errOut)
	}

	// So is the TCP one, with the token.
	info, err := dvmdir.Read(filepath.Join(dir, id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DYNRT_TOKEN", info.Token)
	if code, out, errOut := runBin(t, "--dvm", rep[2], "-n", "1", "echo", "via-tcp"); code != 0 || out != "via-tcp\n" {
		t.Fatalf("--dvm %s: exit %d, %q %q", rep[2], code, out, errOut)
	}
	t.Setenv("DYNRT_TOKEN", "")

	code, out, errOut := runBin(t, "--dvm", id, "-n", "8", "sh", "-c", `echo "$DYNRT_NODE"`)
	if code != 0 {
		t.Fatalf("launch: exit %d, stderr %q", code, errOut)
	}
	nodes := strings.Fields(out)
	slices.Sort(nodes)
	if want := strings.Fields("node0 node0 node0 node0 node1 node1 node1 node1"); !slices.Equal(nodes, want) {
		t.Errorf("placement %q, want %q", nodes, want)
	}

	// A running job shows up in the status.
	job := exec.Command(bin, "--dvm", "life", "-n", "6", "--map-by", "node", "--name", "sleeper", "sleep", "60")
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "6 sleep processes", func() bool { return countMarked("sleep") == 6 })
	// The processes run before the job is "running": the master marks it
	// so once every daemon has answered the launch.
	var st statusJSON
	waitFor(t, "the job running", func() bool {
		code, out, errOut = runBin(t, "dvm", "status", "--dvm", id, "--json")
		if code != 0 {
			t.Fatalf("status: exit %d, stderr %q", code, errOut)
		}
		st = statusJSON{}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		return len(st.Jobs) == 1 && st.Jobs[0].State != "launching"
	})
	if st.ID != id || st.Name != "life" || len(st.Nodes) != 4 || st.Slots != 16 || st.Used != 6 {
		t.Errorf("status: %+v", st)
	}
	for i, n := range st.Nodes {
		wantUsed := uint32(2)
		if i >= 2 {
			wantUsed = 1
		}
		if n.Name != "node"+strconv.Itoa(i) || n.Slots != 4 || n.Used != wantUsed || n.State != "up" || n.PID <= 0 {
			t.Errorf("node %d: %+v", i, n)
		}
	}
	if len(st.Jobs) != 1 || st.Jobs[0].App != "sleeper" || st.Jobs[0].State != "running" || st.Jobs[0].Size != 6 {
		t.Errorf("jobs: %+v", st.Jobs)
	}
	code, out, _ = runBin(t, "dvm", "status")
	if code != 0 || !strings.Contains(out, "6/16 slots used") || !strings.Contains(out, "sleeper") || !strings.Contains(out, "[##########..........]") {
		t.Errorf("status: exit %d\n%s", code, out)
	}
	code, out, _ = runBin(t, "dvm", "list")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "life") {
		t.Errorf("list: exit %d\n%s", code, out)
	}

	// dvm stop kills the running job; its dynrun reports it.
	var jobErr strings.Builder
	job.Stderr = &jobErr
	code, out, errOut = runBin(t, "dvm", "stop", "--dvm", id)
	if code != 0 || !strings.Contains(out, id) {
		t.Fatalf("stop: exit %d, %q %q", code, out, errOut)
	}
	err = job.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Errorf("job on the stopped DVM: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, id+".json")); !os.IsNotExist(err) {
		t.Errorf("rendezvous file after stop: %v", err)
	}
	if code, _, errOut := runBin(t, "dvm", "status"); code != 1 || !strings.Contains(errOut, "no running DVM") {
		t.Errorf("status after stop: exit %d, %q", code, errOut)
	}
}

// Signals to dynrun kill the job and give 128+n.
func TestSignalPropagation(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dynDir(t)
			cmd := exec.Command(bin, "-n", "4", "--nodes", "2", "--slots", "2", "sleep", "60")
			var errb strings.Builder
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "4 sleep processes", func() bool { return countMarked("sleep") == 4 })
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 128+int(sig) {
				t.Fatalf("exit: %v, want %d; stderr %q", err, 128+int(sig), errb.String())
			}
			if !strings.Contains(errb.String(), "interrupted") {
				t.Errorf("stderr %q", errb.String())
			}
			if n := countMarked("sleep"); n != 0 {
				t.Errorf("%d sleep processes left right after dynrun exited", n)
			}
		})
	}
}

// Several jobs run on one DVM at once, each with its own namespace: every
// process waits until the processes of all jobs exist.
func TestConcurrentJobs(t *testing.T) {
	dynDir(t)
	id := startDVM(t, "--nodes", "2", "--slots", "4")
	t.Setenv("MARKDIR", t.TempDir())
	const jobs = 3
	script := `touch "$MARKDIR/$DYNRT_JOB.$DYNRT_RANK"; i=0
while [ "$(ls "$MARKDIR" | wc -l)" -lt 6 ]; do i=$((i+1)); [ $i -gt 1000 ] && exit 9; sleep 0.01; done
echo "$DYNRT_JOB"`
	outs := make([]strings.Builder, jobs)
	cmds := make([]*exec.Cmd, jobs)
	for i := range cmds {
		cmds[i] = exec.Command(bin, "-n", "2", "sh", "-c", script)
		cmds[i].Env = append(os.Environ(), "DYNRT_DVM="+id)
		cmds[i].Stdout = &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		f := strings.Fields(outs[i].String())
		if len(f) != 2 || f[0] != f[1] || !strings.HasPrefix(f[0], id+".") {
			t.Fatalf("job %d output %q", i, outs[i].String())
		}
		seen[f[0]] = true
	}
	if len(seen) != jobs {
		t.Errorf("namespaces %v, want %d different", seen, jobs)
	}
}

// A rendezvous file whose master is gone is reported and removed.
func TestStaleRendezvousFile(t *testing.T) {
	dir := dynDir(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	write := func(id string) string {
		p := filepath.Join(dir, id+".json")
		body := fmt.Sprintf(`{"id":%q,"pid":%d,"nodes":1,"version":"x","start_time":%q}`, id, dead.Process.Pid, time.Now().Format(time.RFC3339))
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := write("aaaaaaaa")
	code, _, errOut := run("dvm", "list")
	if code != 0 || !strings.Contains(errOut, "removed stale DVM file "+p) || !strings.Contains(errOut, "is gone") {
		t.Errorf("dvm list: exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("stale file still there: %v", err)
	}
	// A launch reports it too, and runs on a private DVM.
	p = write("bbbbbbbb")
	code, out, errOut := run("-n", "1", "echo", "ran")
	if code != 0 || out != "ran\n" || !strings.Contains(errOut, "removed stale DVM file "+p) {
		t.Errorf("launch: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// --dvm naming no live DVM lists the live ones; several live DVMs and no
// selection is an error that lists them.
func TestDVMSelection(t *testing.T) {
	dynDir(t)
	code, _, errOut := run("dvm", "status")
	if code != 1 || !strings.Contains(errOut, "no running DVM") || !strings.Contains(errOut, "dynrun dvm start") {
		t.Errorf("no DVM: exit %d, %q", code, errOut)
	}
	a := startDVM(t, "--nodes", "1", "--slots", "1", "--name", "alpha")
	for _, args := range [][]string{{"--dvm", "nosuch", "-n", "1", "true"}, {"dvm", "status", "--dvm", "nosuch"}, {"dvm", "stop", "--dvm", "nosuch"}} {
		code, _, errOut := run(args...)
		if code != 1 || !strings.Contains(errOut, `"nosuch" names no running DVM`) || !strings.Contains(errOut, a) {
			t.Errorf("%q: exit %d, %q", args, code, errOut)
		}
	}
	// The only live DVM is used without --dvm, and private DVMs of other
	// dynruns do not count.
	priv := exec.Command(bin, "-n", "1", "--slots", "1", "sleep", "60")
	if err := priv.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the private DVM's job", func() bool { return countMarked("sleep") == 1 })
	// It writes its rendezvous file once its job has run a little.
	waitFor(t, "the private DVM's rendezvous file", func() bool {
		files, _ := filepath.Glob(filepath.Join(os.Getenv("DYNRT_DIR"), "*.json"))
		return len(files) == 2
	})
	if code, out, errOut := run("-n", "1", "sh", "-c", `echo $DYNRT_DVM`); code != 0 || strings.TrimSpace(out) != a {
		t.Errorf("only live DVM: exit %d, %q %q", code, out, errOut)
	}
	_ = priv.Process.Signal(syscall.SIGTERM)
	if err := priv.Wait(); err == nil {
		t.Errorf("private job after SIGTERM: exit 0")
	}
	t.Setenv("DYNRT_DVM", "nosuch")
	if code, _, errOut := run("-n", "1", "true"); code != 1 || !strings.Contains(errOut, "$DYNRT_DVM") || !strings.Contains(errOut, a) {
		t.Errorf("$DYNRT_DVM: exit %d, %q", code, errOut)
	}
	t.Setenv("DYNRT_DVM", "alpha") // by name
	if code, out, errOut := run("-n", "1", "sh", "-c", `echo $DYNRT_DVM`); code != 0 || strings.TrimSpace(out) != a {
		t.Errorf("DYNRT_DVM=alpha: exit %d, %q %q", code, out, errOut)
	}
	t.Setenv("DYNRT_DVM", "")
	b := startDVM(t, "--nodes", "1", "--slots", "1")
	code, _, errOut = run("-n", "1", "true")
	if code != 1 || !strings.Contains(errOut, "2 DVMs are running") || !strings.Contains(errOut, a) || !strings.Contains(errOut, b) {
		t.Errorf("two DVMs: exit %d, %q", code, errOut)
	}
	// --slots asks for a private DVM whatever runs.
	if code, out, errOut := run("-n", "1", "--slots", "1", "sh", "-c", `echo $DYNRT_DVM`); code != 0 || strings.TrimSpace(out) == a || strings.TrimSpace(out) == b {
		t.Errorf("private with live DVMs: exit %d, %q %q", code, out, errOut)
	}
}

// --launcher join: dvm start prints how to start the daemons by hand and
// is ready once they have joined.
func TestJoinLauncher(t *testing.T) {
	dynDir(t)
	start := exec.Command(bin, "dvm", "start", "--daemonize", "--launcher", "join", "--nodes", "2", "--slots", "1", "--name", "joined")
	var out strings.Builder
	start.Stdout = &out
	stderr, err := start.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := start.Start(); err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	joinCmd := readJoinCommand(t, io.TeeReader(stderr, &seen))
	// DYNRT_TOKEN=<tok> dynrun daemon ...: run it with the test's binary.
	f := strings.Fields(joinCmd)
	if f[1] != "dynrun" || f[2] != "daemon" || !slices.Contains(f, "--node") || !slices.Contains(f, "node1") {
		t.Fatalf("join command %q", joinCmd)
	}
	daemon := exec.Command(bin, f[2:]...)
	daemon.Env = append(os.Environ(), f[0])
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	if err := start.Wait(); err != nil {
		t.Fatalf("dvm start: %v; stderr %q", err, seen.String())
	}
	id := strings.TrimSpace(out.String())
	code, got, errOut := runBin(t, "--dvm", id, "-n", "2", "sh", "-c", `echo "$DYNRT_NODE"`)
	if nodes := strings.Fields(got); code != 0 || len(nodes) != 2 || !slices.Contains(nodes, "node1") {
		t.Fatalf("job: exit %d, %q, %q", code, got, errOut)
	}
	if code, _, errOut := runBin(t, "dvm", "stop", "--dvm", id); code != 0 {
		t.Fatalf("stop: %d %q", code, errOut)
	}
	if err := daemon.Wait(); err != nil {
		t.Errorf("joined daemon after stop: %v", err)
	}
}

// readJoinCommand reads r until a line holds a join command
// (DYNRT_TOKEN=... dynrun daemon ... --join) and returns it.
func readJoinCommand(t *testing.T, r io.Reader) string {
	t.Helper()
	buf := make([]byte, 4096)
	var seen strings.Builder
	for {
		n, err := r.Read(buf)
		seen.Write(buf[:n])
		for _, l := range strings.Split(seen.String(), "\n") {
			if l = strings.TrimSpace(l); strings.HasPrefix(l, "DYNRT_TOKEN=") && strings.Contains(l, "--join") {
				return l
			}
		}
		if err != nil {
			t.Fatalf("no join command in %q: %v", seen.String(), err)
		}
	}
}

// A foreground DVM reports its URI when ready and stops cleanly on SIGINT,
// killing its jobs.
func TestForegroundDVM(t *testing.T) {
	dynDir(t)
	report := filepath.Join(t.TempDir(), "uri")
	dvm := exec.Command(bin, "dvm", "start", "--nodes", "2", "--slots", "2", "--report-uri", report)
	var errb strings.Builder
	dvm.Stderr = &errb
	if err := dvm.Start(); err != nil {
		t.Fatal(err)
	}
	var id string
	waitFor(t, "the report file", func() bool {
		b, err := os.ReadFile(report)
		if f := strings.Fields(string(b)); err == nil && len(f) == 3 {
			id = f[0]
			return true
		}
		return false
	})
	job := exec.Command(bin, "--dvm", id, "-n", "3", "sleep", "60")
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "3 sleep processes", func() bool { return countMarked("sleep") == 3 })
	if err := dvm.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := dvm.Wait(); err != nil {
		t.Fatalf("dvm start after SIGINT: %v; stderr %q", err, errb.String())
	}
	if !strings.Contains(errb.String(), "ready") || !strings.Contains(errb.String(), "stopping DVM "+id) {
		t.Errorf("stderr %q", errb.String())
	}
	var ee *exec.ExitError
	if err := job.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 143 {
		t.Errorf("job: %v", err)
	}
}

// A DVM that cannot start under --daemonize: the parent shows why, exits
// 1 and leaves nothing behind.
func TestDaemonizeFailure(t *testing.T) {
	dynDir(t)
	code, out, errOut := runBin(t, "dvm", "start", "--daemonize", "--bind", "256.0.0.1:0")
	if code != 1 || out != "" || !strings.Contains(errOut, "256.0.0.1") || !strings.Contains(errOut, "exited before it was ready") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
