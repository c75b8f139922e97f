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
	d := dvmtest.Start(t, dvmtest.Options{Nodes: 2, Slots: 2})
	c := d.Attach(t)
	out := dvmtest.CollectOutput(c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := c.Launch(ctx, wire.JobLaunchReq{
		Argv: []string{filepath.Join(dir, "dynrt-unit")}, N: 3, Env: d.Env, Output: wire.OutputFlags{Forward: true},
	})
	if err != nil {
		t.Fatal(err)
	}
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
// builds a C and a C++ program against it with pkg-config, one on the
// shared library and one static; both run (and, outside dynrun, report
// DYNRT_ERR_NO_RUNTIME).
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
	const prog = `#include <dynrt.h>
#include <stdio.h>
int main(void) {
    dynrt_session *s = 0;
    int rc = dynrt_init(&s);
    printf("%s %s\n", dynrt_code_name(rc), dynrt_errmsg());
    return rc == DYNRT_ERR_NO_RUNTIME ? 0 : 1;
}
`
	src := t.TempDir()
	for _, tc := range []struct {
		name, compiler, file, std string
		static                    bool
	}{
		{"c-shared", "cc", "p.c", "-std=c11", false},
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
