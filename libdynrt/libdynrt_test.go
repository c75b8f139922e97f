// Package libdynrt_test drives libdynrt, the C library of libdynrt/, from
// Go: the library and its C test programs are built with the system
// compiler (make libdynrt) and run as jobs of a real DVM
// (internal/dvmtest).
package libdynrt_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

var progs = &dvmtest.Programs{Race: dvmtest.Race}

func TestMain(m *testing.M) { dvmtest.Main(m, progs) }

// linesByRank splits a job's stdout by rank; stderr lines fail t.
func linesByRank(t *testing.T, raw []wire.OutputLine) map[uint32][]string {
	t.Helper()
	out := map[uint32][]string{}
	for _, l := range raw {
		if l.Stream == wire.StreamStderr {
			t.Errorf("rank %d wrote to stderr: %s", l.Rank, l.Line)
			continue
		}
		out[l.Rank] = append(out[l.Rank], string(l.Line))
	}
	return out
}

// jobDVM is a DVM of nodes x slots with a tool connection and the output
// of its jobs.
type jobDVM struct {
	d   *dvmtest.DVM
	c   *tool.Client
	out *dvmtest.Output
}

func startDVM(t *testing.T, nodes, slots int) *jobDVM {
	d := dvmtest.Start(t, dvmtest.Options{Nodes: nodes, Slots: slots})
	c := d.Attach(t)
	return &jobDVM{d: d, c: c, out: dvmtest.CollectOutput(c)}
}

// launch starts argv as a job of n processes with extra environment env.
func (j *jobDVM) launch(t *testing.T, n int, argv []string, env ...string) wire.JobLaunchReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := j.c.Launch(ctx, wire.JobLaunchReq{
		Argv: argv, N: uint32(n), Env: append(slices.Clone(j.d.Env), env...), Output: wire.OutputFlags{Forward: true},
	})
	if err != nil {
		t.Fatalf("launch %v: %v", argv, err)
	}
	return rep
}

// okSteps lists the steps a rank reported with "ok <step>".
func okSteps(lines []string) []string {
	var steps []string
	for _, l := range lines {
		if rest, found := strings.CutPrefix(l, "ok "); found {
			step, _, _ := strings.Cut(rest, " ")
			steps = append(steps, step)
		}
	}
	return steps
}

// TestUnit runs the C unit test program (libdynrt/test/unit.c) as a job of
// 3 processes on 2 nodes: every call of dynrt.h against the daemon,
// including a growth by one process (rank 3, which confirms) and the
// shrink that removes it again. Each rank reports its steps; the job must
// end with status 0 and nothing on stderr.
func TestUnit(t *testing.T) {
	dir := progs.BuildC(t)
	j := startDVM(t, 2, 2)
	c, out := j.c, j.out
	rep := j.launch(t, 3, []string{filepath.Join(dir, "dynrt-unit")})
	end := dvmtest.WaitJob(t, c, rep.Job, 90*time.Second)
	byRank := linesByRank(t, out.Lines(rep.Job))
	if end.State != wire.JobStateDone || end.Code != 0 {
		t.Fatalf("job ended %s with code %d (%s); output: %v", end.State, end.Code, end.Msg, out.Lines(rep.Job))
	}
	old := []string{"identity", "psets", "kv", "pubsub", "setops", "threads", "add", "grown", "shrunk", "done"}
	root := slices.Insert(slices.Clone(old), len(old)-1, "cancel")
	want := map[uint32][]string{0: root, 1: old, 2: old, 3: {"confirm", "grown", "leave"}}
	for r, steps := range want {
		if got := okSteps(byRank[r]); !slices.Equal(got, steps) {
			t.Errorf("rank %d reported %v, want %v; its output: %q", r, got, steps, byRank[r])
		}
	}
}

// TestNoRuntime: outside dynrun, dynrt_init fails with
// DYNRT_ERR_NO_RUNTIME and a message naming the missing variable.
func TestNoRuntime(t *testing.T) {
	dir := progs.BuildC(t)
	cmd := exec.Command(filepath.Join(dir, "dynrt-unit"))
	cmd.Env = []string{"UNIT_NO_RUNTIME=1", "PATH=" + os.Getenv("PATH")}
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if !strings.Contains(string(b), "DYNRT_DAEMON is not set: the process was not started by dynrun") {
		t.Errorf("output %q does not name the missing variable", b)
	}
}

// TestInstall installs libdynrt under a prefix (make libdynrt-install) and
// builds C and C++ programs against it with pkg-config, on the shared and
// on the static library; they run (and, outside dynrun, report
// DYNRT_ERR_NO_RUNTIME), and their own functions named like the library's
// helpers neither clash with nor replace them.
func TestInstall(t *testing.T) {
	build := progs.BuildC(t)
	if _, err := exec.LookPath("pkg-config"); err != nil {
		t.Skip("needs pkg-config: apt-get install pkg-config")
	}
	prefix := t.TempDir()
	mk := exec.Command("make", "--no-print-directory", "-C", dvmtest.RepoRoot(), "libdynrt-install",
		"PREFIX="+prefix, "LIBDYNRT_BUILD="+build)
	if b, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make libdynrt-install: %v\n%s", err, b)
	}
	for _, f := range []string{"include/dynrt.h", "lib/libdynrt.a", "lib/libdynrt.so", "lib/libdynrt.so.1", "lib/pkgconfig/dynrt.pc"} {
		if _, err := os.Stat(filepath.Join(prefix, f)); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}
	// The program defines names the library uses for its own helpers: they
	// must neither clash (static) nor be called by the library (shared).
	const prog = `#include <dynrt.h>
#include <stdio.h>
#ifdef __cplusplus
extern "C" {
#endif
int seterr(int x) { return x + 1; }
int mp_get(int x) { return x * 2; }
#ifdef __cplusplus
}
#endif
int main(void) {
    dynrt_session *s = 0;
    int rc = dynrt_init(&s);
    printf("%s %s\n", dynrt_code_name(rc), dynrt_errmsg());
    return rc == DYNRT_ERR_NO_RUNTIME && seterr(1) == 2 && mp_get(2) == 4 ? 0 : 1;
}
`
	src := t.TempDir()
	for _, tc := range []struct {
		name, compiler, file, std string
		static                    bool
	}{
		{"c-shared", "cc", "p.c", "-std=c11", false},
		{"c-static", "cc", "s.c", "-std=c11", true},
		{"c++-static", "c++", "p.cc", "-std=c++17", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exec.LookPath(tc.compiler); err != nil {
				t.Skipf("needs %s: %v", tc.compiler, err)
			}
			file := filepath.Join(src, tc.file)
			if err := os.WriteFile(file, []byte(prog), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"--cflags", "--libs", "dynrt"}
			if tc.static {
				args = append([]string{"--static"}, args...)
			}
			pc := exec.Command("pkg-config", args...)
			pc.Env = append(os.Environ(), "PKG_CONFIG_PATH="+filepath.Join(prefix, "lib", "pkgconfig"))
			flags, err := pc.Output()
			if err != nil {
				t.Fatalf("pkg-config %v: %v", args, err)
			}
			exe := filepath.Join(src, tc.name)
			cmdline := fmt.Sprintf("%s %s -Wall -Wextra -Werror %s -o %s %s", tc.compiler, tc.std, file, exe, strings.TrimSpace(string(flags)))
			if tc.static {
				cmdline = fmt.Sprintf("%s %s -Wall -Wextra -Werror %s -o %s -I%s/include %s/lib/libdynrt.a -lmsgpackc -pthread",
					tc.compiler, tc.std, file, exe, prefix, prefix)
			}
			if b, err := exec.Command("sh", "-c", cmdline).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", cmdline, err, b)
			}
			run := exec.Command(exe)
			run.Env = []string{"LD_LIBRARY_PATH=" + filepath.Join(prefix, "lib")}
			b, err := run.CombinedOutput()
			if err != nil || !strings.Contains(string(b), "DYNRT_DAEMON is not set") {
				t.Fatalf("%s: %v: %s", exe, err, b)
			}
		})
	}
}

// TestValgrind runs C programs with each process, new ones included,
// under valgrind's memcheck: TestUnit's program (every call, a grow and a
// shrink) and examples/c-synthetic growing 2 → 3 and shrinking 3 → 2 by
// itself. Every process must end with no memory error and no leak of any
// kind (every heap block freed); valgrind also turns either into a
// non-zero exit (--error-exitcode) that fails the job. --vgdb=no: no
// gdb-server FIFOs in /tmp, which a process killed by the runtime would
// leave behind.
func TestValgrind(t *testing.T) {
	vg, err := exec.LookPath("valgrind")
	if err != nil {
		t.Skip("needs valgrind: apt-get install valgrind (make deps-valgrind)")
	}
	dir := progs.BuildC(t)
	j := startDVM(t, 2, 2)
	synth := []string{filepath.Join(dir, "c-synthetic"), "-i", "6", "-f", "2", "--delta", "1", "--problem-size", "20000"}
	for _, tc := range []struct {
		name  string
		n     int
		argv  []string
		procs int // processes that must report (some may end before valgrind's summary: see below)
	}{
		// 3 processes and the one the ADD started; the canceled ADD's
		// process may not have started.
		{"unit", 3, []string{filepath.Join(dir, "dynrt-unit")}, 4},
		{"c-synthetic-grow", 2, append(slices.Clone(synth), "--limit", "3"), 3},
		{"c-synthetic-shrink", 3, append(slices.Clone(synth), "--limit", "2"), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := t.TempDir()
			rep := j.launch(t, tc.n, append([]string{vg, "--vgdb=no", "--leak-check=full", "--show-leak-kinds=all",
				"--errors-for-leak-kinds=all", "--error-exitcode=99", "--log-file=" + filepath.Join(logs, "vg.%p")}, tc.argv...))
			end := dvmtest.WaitJob(t, j.c, rep.Job, 180*time.Second)
			// A log that does not say both is a process with an error or a
			// leak (or one killed before valgrind's summary).
			clean := []string{"ERROR SUMMARY: 0 errors from 0 contexts", "All heap blocks were freed -- no leaks are possible"}
			var reports strings.Builder
			files, _ := filepath.Glob(filepath.Join(logs, "vg.*"))
			checked := 0
			for _, f := range files {
				b, _ := os.ReadFile(f)
				ok := true
				for _, s := range clean {
					ok = ok && strings.Contains(string(b), s)
				}
				if ok {
					checked++
				} else {
					fmt.Fprintf(&reports, "%s:\n%s\n", f, b)
				}
			}
			if end.State != wire.JobStateDone || end.Code != 0 || reports.Len() > 0 {
				t.Fatalf("job ended %s with code %d (%s); valgrind:\n%s\noutput: %v", end.State, end.Code, end.Msg, reports.String(), linesByRank(t, j.out.Lines(rep.Job)))
			}
			if checked < tc.procs {
				t.Errorf("%d clean valgrind reports, want one from each of the %d processes", checked, tc.procs)
			}
		})
	}
}

// TestThreadSanitizer runs TestUnit's program built with
// -fsanitize=thread (library included): its four threads calling the
// session during a fence, the event callback thread and the threads of the
// non-blocking accept and confirm must show no data race (ThreadSanitizer
// reports on stderr, which fails the test, and exits 66).
func TestThreadSanitizer(t *testing.T) {
	if err := exec.Command("cc", "-fsanitize=thread", "-x", "c", "-o", os.DevNull, "-").Run(); err != nil {
		// An empty program does not link; a compiler without TSan fails
		// earlier with "unrecognized"; tell the two apart by building.
		probe := filepath.Join(t.TempDir(), "p.c")
		if werr := os.WriteFile(probe, []byte("int main(void){return 0;}\n"), 0o644); werr != nil {
			t.Fatal(werr)
		}
		if b, err := exec.Command("cc", "-fsanitize=thread", "-o", probe+".out", probe).CombinedOutput(); err != nil {
			t.Skipf("needs a C compiler with ThreadSanitizer (libtsan): %v: %s", err, b)
		}
	}
	dir := progs.BuildCWith(t, "-fsanitize=thread")
	j := startDVM(t, 2, 2)
	rep := j.launch(t, 3, []string{filepath.Join(dir, "dynrt-unit")}, "TSAN_OPTIONS=exitcode=66 halt_on_error=0")
	end := dvmtest.WaitJob(t, j.c, rep.Job, 120*time.Second)
	byRank := linesByRank(t, j.out.Lines(rep.Job))
	if end.State != wire.JobStateDone || end.Code != 0 {
		t.Fatalf("job ended %s with code %d (%s); output: %v", end.State, end.Code, end.Msg, byRank)
	}
	if got := okSteps(byRank[0]); !slices.Contains(got, "threads") || !slices.Contains(got, "done") {
		t.Errorf("rank 0 reported %v", got)
	}
}

// TestMixed runs dvmtest.MixedJob with libdynrt/test/malleable.c (C,
// libdynrt) in the even ranks and internal/malleable (Go, lib/session) in
// the odd ones, new ranks included (a shell picks the program by
// $DYNRT_RANK and execs it): ADD 2 (a C and a Go process confirm
// together), SUB of ranks 2 and 3 (one of each), REPLACE of the C root 0,
// ADD 1 with a Go root; every member of both kinds accepts each change with
// the other kind, all continue with the same set version, and the job ends
// with status 0.
func TestMixed(t *testing.T) {
	cprog := filepath.Join(progs.BuildC(t), "dynrt-malleable")
	dvmtest.MixedJob(t, progs, "cgo", func(mall string) []string {
		pick := `if [ $((DYNRT_RANK % 2)) -eq 0 ]; then exec "$0" "$@"; else exec '` + mall + `' "$@"; fi`
		return []string{"/bin/sh", "-c", pick, cprog, "-last", "4"}
	})
}

// TestBenchMode: the C twin's -bench mode that scripts/bench-libdynrt.sh
// compares with the Go program's prints one BENCH line per run from rank
// 0, with the calls it made and ordered times.
func TestBenchMode(t *testing.T) {
	dir := progs.BuildC(t)
	j := startDVM(t, 1, 3)
	for _, op := range []string{"query", "psetop", "lookup"} {
		rep := j.launch(t, 3, []string{filepath.Join(dir, "dynrt-malleable"), "-bench", op, "-n", "30"})
		end := dvmtest.WaitJob(t, j.c, rep.Job, 60*time.Second)
		lines := dvmtest.ParseLines(t, j.out.Lines(rep.Job))
		if end.State != wire.JobStateDone || len(lines) != 1 || lines[0].Word != "BENCH" {
			t.Fatalf("%s: job ended %s (%s); lines %v", op, end.State, end.Msg, lines)
		}
		l := lines[0]
		if l.Rank != 0 || l.Str("op") != op || l.Num("n") != 30 || l.Num("median") <= 0 || l.Num("p90") < l.Num("median") {
			t.Errorf("%s: BENCH line %v", op, l.Attrs)
		}
	}
}
