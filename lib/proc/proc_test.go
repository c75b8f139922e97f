package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// The test binary doubles as a helper program, selected by this variable.
const helperEnv = "DYNRT_PROC_HELPER"

// Keep the main goroutine on the main thread, so that no test goroutine runs
// there: Go does not terminate the main thread when a locked goroutine exits,
// which TestThreadExitDoesNotKillChild relies on.
func init() { runtime.LockOSThread() }

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "args": // print argv, one quoted argument a line
		for _, a := range os.Args {
			fmt.Printf("%q\n", a)
		}
		os.Exit(0)
	case "spew": // spew N: N numbered lines on stdout and stderr, interleaved
		n, _ := strconv.Atoi(os.Args[1])
		out, errw := bufio.NewWriter(os.Stdout), bufio.NewWriter(os.Stderr)
		pad := strings.Repeat("x", 90)
		for i := range n {
			fmt.Fprintf(out, "%d %s\n", i, pad)
			fmt.Fprintf(errw, "%d\n", i)
		}
		out.Flush()
		errw.Flush()
		os.Exit(0)
	case "minidaemon": // minidaemon N: start N `sleep 100` concurrently through this package, print their pids, hang
		n, _ := strconv.Atoi(os.Args[1])
		pids := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := Start(context.Background(), Spec{Path: "sleep", Args: []string{"sleep", "100"}, Env: os.Environ()})
				if err != nil {
					fmt.Println("error:", err)
					os.Exit(1)
				}
				pids[i] = strconv.Itoa(p.Pid())
			}()
		}
		wg.Wait()
		fmt.Println(strings.Join(pids, " "))
		select {}
	case "guarded": // guarded: start a guard and a shell with two children under it, print the children's pids, hang
		os.Exit(guardedHelper())
	default:
		fmt.Fprintln(os.Stderr, "unknown helper", os.Getenv(helperEnv))
		os.Exit(2)
	}
}

func helperSpec(t testing.TB, mode string, args ...string) Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// No exit pause when the test binary was built with -race.
	return Spec{Path: exe, Args: append([]string{exe}, args...), Env: []string{helperEnv + "=" + mode, "GORACE=atexit_sleep_ms=0"}}
}

// startHelper starts the test binary as a helper that outlives the call
// and returns its first line of output.
func startHelper(t *testing.T, mode string, args ...string) (*exec.Cmd, string, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "GORACE=atexit_sleep_ms=0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	return cmd, line, err
}

// dead reports whether pid no longer runs: gone, or a zombie nobody reaped
// (orphans go to a pid 1 that may never reap them).
func dead(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

// waitDead polls until pid is dead; the timeout is only a hang guard.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if dead(pid) {
			return
		}
	}
	t.Fatalf("process %d still alive", pid)
}

type output struct {
	mu     sync.Mutex
	stdout []string
	stderr []string
}

func (o *output) handle(stream int, line []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch stream {
	case Stdout:
		o.stdout = append(o.stdout, string(line))
	case Stderr:
		o.stderr = append(o.stderr, string(line))
	default:
		panic("bad stream")
	}
}

// run starts spec, waits, and checks that the process is gone afterwards.
func run(t *testing.T, spec Spec) (ExitStatus, *output) {
	t.Helper()
	out := &output{}
	spec.Output = out.handle
	p, err := Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	st := p.Wait()
	if !dead(p.Pid()) {
		t.Fatalf("pid %d still present after Wait", p.Pid())
	}
	return st, out
}

func sh(script string, args ...string) Spec {
	return Spec{Path: "/bin/sh", Args: append([]string{"sh", "-c", script}, args...), Env: []string{"PATH=/usr/bin:/bin"}}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want ExitStatus
	}{
		{"true", Spec{Path: "/bin/true"}, ExitStatus{}},
		{"false", Spec{Path: "/bin/false"}, ExitStatus{ExitCode: 1}},
		{"exit 3", sh("exit 3"), ExitStatus{ExitCode: 3}},
		{"exit 255", sh("exit 255"), ExitStatus{ExitCode: 255}},
		{"kill -9 self", sh("kill -9 $$"), ExitStatus{Signal: syscall.SIGKILL}},
		{"kill -TERM self", sh("kill -TERM $$"), ExitStatus{Signal: syscall.SIGTERM}},
		{"true via PATH", Spec{Path: "true", Env: []string{"PATH=/usr/bin:/bin"}}, ExitStatus{}},
		{"true via default PATH", Spec{Path: "true"}, ExitStatus{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := run(t, tc.spec)
			if st != tc.want {
				t.Fatalf("status %v, want %v", st, tc.want)
			}
		})
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badinterp := filepath.Join(dir, "badinterp")
	if err := os.WriteFile(badinterp, []byte("#!/no/such/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		spec Spec
		want *wire.Error
		msg  string
	}{
		{"unknown in PATH", nil, Spec{Path: "dynrt-no-such-prog", Env: []string{"PATH=/usr/bin:/bin"}}, wire.ErrNotFound, "dynrt-no-such-prog"},
		{"unknown path", nil, Spec{Path: "/no/such/prog"}, wire.ErrNotFound, "/no/such/prog"},
		{"relative to dir", nil, Spec{Path: "./prog", Dir: dir}, wire.ErrNotFound, "./prog"},
		{"PATH relative entry skipped", nil, Spec{Path: "noexec", Env: []string{"PATH=."}, Dir: dir}, wire.ErrNotFound, "noexec"},
		{"not executable", nil, Spec{Path: noexec}, wire.ErrPermission, "noexec"},
		{"not executable in PATH", nil, Spec{Path: "noexec", Env: []string{"PATH=" + dir}}, wire.ErrPermission, "noexec"},
		{"directory", nil, Spec{Path: dir}, wire.ErrPermission, "directory"},
		{"missing interpreter", nil, Spec{Path: badinterp}, wire.ErrNotFound, "badinterp"},
		{"empty path", nil, Spec{}, wire.ErrInvalid, "empty"},
		{"missing wdir", nil, Spec{Path: "/bin/true", Dir: filepath.Join(dir, "nope")}, wire.ErrNotFound, "nope"},
		{"wdir is a file", nil, Spec{Path: "/bin/true", Dir: noexec}, wire.ErrInvalid, "not a directory"},
		{"canceled", canceled, Spec{Path: "/bin/true"}, wire.ErrCanceled, "canceled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			p, err := Start(ctx, tc.spec)
			if err == nil {
				p.Wait()
				t.Fatal("Start succeeded")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v (code %s), want code %s", err, wire.CodeOf(err), tc.want.Code)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err %q does not mention %q", err, tc.msg)
			}
		})
	}
}

func TestArgvUntouched(t *testing.T) {
	spec := helperSpec(t, "args")
	args := []string{"argv0 with space", "", "a b", `"double"`, `'single'`, "$HOME", "*", `back\slash`, "new\nline", "--", "-x", "ünï"}
	spec.Args = args
	st, out := run(t, spec)
	if !st.Success() {
		t.Fatalf("helper %v: %q", st, out.stderr)
	}
	var want []string
	for _, a := range args {
		want = append(want, strconv.Quote(a))
	}
	if strings.Join(out.stdout, "\n") != strings.Join(want, "\n") {
		t.Fatalf("argv\n got %q\nwant %q", out.stdout, want)
	}
}

func TestEnvAndDir(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "myprog")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"myprog $FOO\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		spec Spec
		want []string
	}{
		{"env and wdir", Spec{Path: "/bin/sh", Args: []string{"sh", "-c", `echo "$FOO|$EMPTY|$UNSET"; pwd -P`},
			Env: []string{"FOO=bar baz", "EMPTY="}, Dir: dir}, []string{"bar baz||", real}},
		{"nil env is empty", Spec{Path: "/usr/bin/env"}, nil},
		{"exact env", Spec{Path: "/usr/bin/env", Env: []string{"A=1", "B=two words"}}, []string{"A=1", "B=two words"}},
		{"PATH from spec env", Spec{Path: "myprog", Env: []string{"PATH=/nonexistent:" + dir, "FOO=x"}}, []string{"myprog x"}},
		{"path relative to wdir", Spec{Path: "./myprog", Dir: dir, Env: []string{"FOO=y"}}, []string{"myprog y"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, out := run(t, tc.spec)
			if !st.Success() || strings.Join(out.stdout, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("%v, stdout %q stderr %q, want %q", st, out.stdout, out.stderr, tc.want)
			}
		})
	}
}

// TestOwnSession: a process leads its own session and process group, as
// under mpiexec.hydra (setsid per process), so the kernel's autogroup
// scheduling gives it its own share of the CPU rather than one share for
// all processes of the daemon.
func TestOwnSession(t *testing.T) {
	st, out := run(t, Spec{Path: "/bin/sh", Args: []string{"sh", "-c", `read -r s < /proc/self/stat; set -- ${s##*) }; echo "$$ $3 $4"`}})
	if !st.Success() || len(out.stdout) != 1 {
		t.Fatalf("%v, stdout %q stderr %q", st, out.stdout, out.stderr)
	}
	f := strings.Fields(out.stdout[0])
	if len(f) != 3 || f[1] != f[0] || f[2] != f[0] {
		t.Errorf("pid, process group, session = %q; want all three equal", out.stdout[0])
	}
}

func TestOutputLines(t *testing.T) {
	tests := []struct {
		name           string
		spec           Spec
		stdout, stderr []string
	}{
		{"partial last line", sh(`printf 'a\nb'; printf 'e1\ne2' >&2`), []string{"a", "b"}, []string{"e1", "e2"}},
		{"empty lines", sh(`printf '\n\nx\n'`), []string{"", "", "x"}, nil},
		{"written right before exit", sh(`echo last; exec >&-; exit 4`), []string{"last"}, nil},
		{"long line split", func() Spec {
			s := sh(`head -c 25 /dev/zero | tr '\0' x; echo`)
			s.MaxLine = 10
			return s
		}(), []string{"xxxxxxxxxx", "xxxxxxxxxx", "xxxxx"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, out := run(t, tc.spec)
			if fmt.Sprint(out.stdout) != fmt.Sprint(tc.stdout) || fmt.Sprint(out.stderr) != fmt.Sprint(tc.stderr) {
				t.Fatalf("stdout %q stderr %q, want %q %q", out.stdout, out.stderr, tc.stdout, tc.stderr)
			}
		})
	}
}

func TestLongLineDefaultCap(t *testing.T) {
	const n = 3*DefaultMaxLine + 100
	_, out := run(t, sh(fmt.Sprintf(`head -c %d /dev/zero | tr '\0' y; echo; echo after`, n)))
	if len(out.stdout) != 5 || out.stdout[4] != "after" {
		t.Fatalf("got %d lines, want 4 pieces + 1", len(out.stdout))
	}
	total := 0
	for i, l := range out.stdout[:4] {
		if strings.Trim(l, "y") != "" {
			t.Fatalf("piece %d has foreign bytes", i)
		}
		if i < 3 && len(l) != DefaultMaxLine {
			t.Fatalf("piece %d is %d bytes, want %d", i, len(l), DefaultMaxLine)
		}
		total += len(l)
	}
	if total != n {
		t.Fatalf("pieces hold %d bytes, want %d: output lost", total, n)
	}
}

// TestLargeOutput pushes about 10 MB through stdout (and a line per stdout
// line through stderr) and checks that every line arrives, in order.
func TestLargeOutput(t *testing.T) {
	const n = 110_000 // ~93 bytes a line on stdout
	var mu sync.Mutex
	next := [3]int{}
	bytes := 0
	bad := ""
	spec := helperSpec(t, "spew", strconv.Itoa(n))
	spec.Output = func(stream int, line []byte) {
		mu.Lock()
		defer mu.Unlock()
		num, _, _ := strings.Cut(string(line), " ")
		if num != strconv.Itoa(next[stream]) && bad == "" {
			bad = fmt.Sprintf("stream %d: got line %q, want number %d", stream, line, next[stream])
		}
		next[stream]++
		if stream == Stdout {
			bytes += len(line) + 1
		}
	}
	p, err := Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Wait(); !st.Success() {
		t.Fatalf("spew %v", st)
	}
	if bad != "" {
		t.Fatal(bad)
	}
	if next[Stdout] != n || next[Stderr] != n {
		t.Fatalf("got %d/%d lines, want %d each", next[Stdout], next[Stderr], n)
	}
	if bytes < 10_000_000 {
		t.Fatalf("only %d bytes went through stdout", bytes)
	}
}

func TestStdin(t *testing.T) {
	_, out := run(t, Spec{Path: "/bin/cat", Stdin: strings.NewReader("hello\nworld")})
	if fmt.Sprint(out.stdout) != "[hello world]" {
		t.Fatalf("cat echoed %q", out.stdout)
	}
	// No stdin: /dev/null, so cat ends at once.
	st, out := run(t, Spec{Path: "/bin/cat"})
	if !st.Success() || len(out.stdout) != 0 {
		t.Fatalf("cat </dev/null: %v %q", st, out.stdout)
	}
	// An *os.File is passed through.
	path := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(path, []byte("from\nfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, out = run(t, Spec{Path: "/bin/cat", Stdin: f})
	if fmt.Sprint(out.stdout) != "[from file]" {
		t.Fatalf("cat <file: %q", out.stdout)
	}
}

func TestExtraFiles(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st, _ := run(t, Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "echo via-fd3 >&3; echo via-fd4 >&4"},
		ExtraFiles: []*os.File{w, nil}})
	w.Close()
	got, _ := bufio.NewReader(r).ReadString('\n')
	if got != "via-fd3\n" {
		t.Fatalf("fd 3 carried %q", got)
	}
	if st.Success() {
		t.Fatal("writing to fd 4 (a nil ExtraFiles entry) succeeded; it should be closed")
	}
}

// startAndRead starts spec and waits for its first stdout line (a pid or
// "ready"), so that a test can act once the script has set itself up.
func startAndRead(t *testing.T, spec Spec) (*Proc, string) {
	t.Helper()
	lines := make(chan string, 16)
	spec.Output = func(stream int, line []byte) {
		if stream == Stdout {
			select {
			case lines <- string(line):
			default:
			}
		}
	}
	p, err := Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Terminate(0) })
	select {
	case l := <-lines:
		return p, l
	case <-p.Done():
		t.Fatalf("exited early: %v", p.Wait())
	case <-time.After(10 * time.Second):
		t.Fatal("no output") // hang guard only
	}
	return nil, ""
}

func TestTerminate(t *testing.T) {
	t.Run("TERM suffices", func(t *testing.T) {
		p, _ := startAndRead(t, sh("echo ready; exec sleep 100"))
		if st := p.Terminate(10 * time.Second); st.Signal != syscall.SIGTERM {
			t.Fatalf("status %v, want SIGTERM", st)
		}
	})
	t.Run("escalates to KILL", func(t *testing.T) {
		p, _ := startAndRead(t, sh(`trap "" TERM; echo ready; while :; do sleep 0.05; done`))
		if st := p.Terminate(100 * time.Millisecond); st.Signal != syscall.SIGKILL {
			t.Fatalf("status %v, want SIGKILL after the grace period", st)
		}
		if !dead(p.Pid()) {
			t.Fatal("still alive")
		}
	})
	t.Run("stopped process", func(t *testing.T) {
		p, _ := startAndRead(t, sh(`trap "echo got-term; exit 7" TERM; echo ready; while :; do sleep 0.05; done`))
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if st := p.Terminate(10 * time.Second); st.ExitCode != 7 {
			t.Fatalf("status %v, want exit 7 from the TERM trap", st)
		}
	})
	t.Run("concurrent and repeated", func(t *testing.T) {
		p, _ := startAndRead(t, sh("echo ready; exec sleep 100"))
		var wg sync.WaitGroup
		sts := make([]ExitStatus, 6)
		for i := range sts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					sts[i] = p.Terminate(time.Second)
				} else {
					sts[i] = p.Wait()
				}
			}()
		}
		wg.Wait()
		for i, st := range sts {
			if st.Signal != syscall.SIGTERM {
				t.Fatalf("call %d: %v", i, st)
			}
		}
		if st := p.Terminate(time.Second); st.Signal != syscall.SIGTERM {
			t.Fatalf("after exit: %v", st)
		}
		if err := p.Signal(syscall.SIGTERM); !errors.Is(err, ErrDone) || !errors.Is(err, wire.ErrState) {
			t.Fatalf("Signal after exit: %v", err)
		}
	})
}

func TestGroupSignalReachesGrandchildren(t *testing.T) {
	p, line := startAndRead(t, sh("sleep 100 & echo $!; wait"))
	grandchild, err := strconv.Atoi(line)
	if err != nil {
		t.Fatal(err)
	}
	if dead(grandchild) {
		t.Fatal("grandchild not running")
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if st := p.Wait(); st.Signal != syscall.SIGKILL {
		t.Fatalf("status %v", st)
	}
	waitDead(t, grandchild)
}

func TestLeaderExitClearsGroup(t *testing.T) {
	// The background sleep keeps stdout open; without the group kill Wait
	// would have to wait for it.
	p, line := startAndRead(t, sh("sleep 100 & echo $!"))
	grandchild, _ := strconv.Atoi(line)
	if st := p.Wait(); !st.Success() {
		t.Fatalf("status %v", st)
	}
	waitDead(t, grandchild)
}

func TestKeepGroupCutsPipesAfterDelay(t *testing.T) {
	spec := sh("sleep 100 & echo $!")
	spec.KeepGroup = true
	spec.WaitDelay = 50 * time.Millisecond
	p, line := startAndRead(t, spec)
	grandchild, _ := strconv.Atoi(line)
	defer func() {
		syscall.Kill(grandchild, syscall.SIGKILL)
		waitDead(t, grandchild)
	}()
	if st := p.Wait(); !st.Success() {
		t.Fatalf("status %v", st)
	}
	if dead(grandchild) {
		t.Fatal("KeepGroup: the grandchild was killed")
	}
}

func TestNoPidfdFallback(t *testing.T) {
	for _, opts := range []startOpts{{noPidfd: true}, {direct: true}} {
		out := &output{}
		p, err := start(context.Background(), Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "echo hi; exit 5"}, Output: out.handle}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if st := p.Wait(); st.ExitCode != 5 || fmt.Sprint(out.stdout) != "[hi]" {
			t.Fatalf("%+v: %v %q", opts, st, out.stdout)
		}
	}
}

// TestThreadExitDoesNotKillChild starts a process from a goroutine that
// locks its OS thread and then exits, which makes Go terminate that thread.
// Had the fork run on that thread, Pdeathsig would kill the child at once.
func TestThreadExitDoesNotKillChild(t *testing.T) {
	started := make(chan *Proc)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with us
		if syscall.Gettid() == os.Getpid() {
			t.Error("test goroutine on the main thread, which Go never terminates")
			started <- nil
			return
		}
		p, err := Start(context.Background(), Spec{Path: "/bin/sleep", Args: []string{"sleep", "100"}})
		if err != nil {
			t.Error(err)
		}
		started <- p
	}()
	p := <-started
	if p == nil {
		return
	}
	defer p.Terminate(0)
	select {
	case <-p.Done():
		t.Fatalf("child died with the thread that asked for it: %v", p.Wait())
	case <-time.After(300 * time.Millisecond):
	}
}

// TestParentDeathKillsChild runs the test binary as a mini daemon that starts
// `sleep 100` through this package (one, or several at once so that more
// than one spawner thread forks), SIGKILLs the daemon, and expects every
// sleep to die too.
func TestParentDeathKillsChild(t *testing.T) {
	for _, n := range []int{1, 8} {
		t.Run(strconv.Itoa(n), func(t *testing.T) { parentDeath(t, n) })
	}
}

func parentDeath(t *testing.T, n int) {
	cmd, line, err := startHelper(t, "minidaemon", strconv.Itoa(n))
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("mini daemon: %v", err)
	}
	var children []int
	for _, f := range strings.Fields(line) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("mini daemon said %q", line)
		}
		children = append(children, pid)
	}
	t.Cleanup(func() {
		for _, pid := range children {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if len(children) != n {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("mini daemon started %d processes, want %d", len(children), n)
	}
	for _, pid := range children {
		if dead(pid) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("sleep %d not running before the daemon died", pid)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for _, pid := range children {
		waitDead(t, pid)
	}
}

// TestConcurrentStarts starts processes from many goroutines at once, each
// locked to a thread that Go terminates when the goroutine ends: the pool
// must stay within Spawners() threads, and no child may die with the
// thread that asked for it.
func TestConcurrentStarts(t *testing.T) {
	const n = 24
	var wg sync.WaitGroup
	procs := make([]*Proc, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // never unlocked: the thread dies with us
			procs[i], errs[i] = Start(context.Background(), Spec{Path: "/bin/sleep", Args: []string{"sleep", "100"}})
		}()
	}
	wg.Wait()
	for i, p := range procs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		defer p.Terminate(0)
	}
	if got, limit := spawnThreads(), Spawners(); got < 1 || got > limit {
		t.Fatalf("%d spawner threads, want 1..%d", got, limit)
	}
	time.Sleep(300 * time.Millisecond)
	for _, p := range procs {
		select {
		case <-p.Done():
			t.Fatalf("child died with the thread that asked for it: %v", p.Wait())
		default:
		}
	}
}

func TestGroup(t *testing.T) {
	type key struct {
		job  string
		rank int
	}
	var mu sync.Mutex
	exits := map[key]ExitStatus{}
	g := NewGroup(func(k key, p *Proc, st ExitStatus) {
		mu.Lock()
		exits[k] = st
		mu.Unlock()
	})
	ctx := context.Background()
	var pids []int
	for _, k := range []key{{"a", 0}, {"a", 1}, {"a", 2}, {"b", 0}} {
		p, err := g.Start(ctx, k, Spec{Path: "/bin/sleep", Args: []string{"sleep", "100"}})
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, p.Pid())
	}
	if _, err := g.Start(ctx, key{"a", 1}, Spec{Path: "/bin/true"}); !errors.Is(err, wire.ErrExists) {
		t.Fatalf("duplicate key: %v", err)
	}
	if _, err := g.Start(ctx, key{"c", 0}, Spec{Path: "/no/such"}); !errors.Is(err, wire.ErrNotFound) {
		t.Fatalf("bad program: %v", err)
	}
	if g.Len() != 4 {
		t.Fatalf("Len %d, want 4", g.Len())
	}
	sts := g.Terminate(func(k key) bool { return k.job == "a" }, 5*time.Second)
	if len(sts) != 3 {
		t.Fatalf("terminated %d, want 3", len(sts))
	}
	for k, st := range sts {
		if k.job != "a" || st.Signal != syscall.SIGTERM {
			t.Fatalf("%v: %v", k, st)
		}
	}
	if p, ok := g.Get(key{"b", 0}); !ok || dead(p.Pid()) {
		t.Fatal("job b was hit")
	}
	if n := g.Signal(nil, syscall.SIGKILL); n != 1 {
		t.Fatalf("signalled %d, want 1", n)
	}
	g.Wait()
	if g.Len() != 0 {
		t.Fatalf("Len %d after Wait", g.Len())
	}
	if len(exits) != 4 || exits[key{"b", 0}].Signal != syscall.SIGKILL || exits[key{"a", 2}].Signal != syscall.SIGTERM {
		t.Fatalf("exit callbacks: %v", exits)
	}
	for _, pid := range pids {
		if !dead(pid) {
			t.Fatalf("pid %d alive", pid)
		}
	}
}
