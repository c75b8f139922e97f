package slurmhosts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/gobuild"
	"github.com/dynrt/dynrt/internal/leakcheck"
	"github.com/dynrt/dynrt/internal/slurmhosts"
)

// The end-to-end tests of the slurm launcher on a real Slurm: four
// namespace hosts h0..h3 of 4 CPUs, slurmctld on h0, commands typed on h0
// as a user of the cluster would (salloc -N 3, which Slurm gives h0..h2,
// then dynrun inside; h3 is for dvm grow).

const prefix = "dyn-slurme2e"

// bin holds dynrun and testapp, built once by TestMain.
var bin string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if slurmhosts.Unsupported() != "" {
		return m.Run() // every test skips, saying why
	}
	dir, err := os.MkdirTemp("", "dynrt-slurme2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = dir
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "go env GOMOD:", err)
		return 1
	}
	build := exec.Command("go", gobuild.Args("-o", dir+"/", "./cmd/dynrun", "./internal/testapp")...)
	build.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building dynrun:", err)
		return 1
	}
	return m.Run()
}

type cluster struct {
	t    *testing.T
	c    *slurmhosts.Cluster
	mark string
}

func start(t *testing.T) *cluster {
	c := slurmhosts.Start(t, slurmhosts.Config{Prefix: prefix, K: 4})
	return &cluster{t: t, c: c, mark: leakcheck.NewMark(t)}
}

func (c *cluster) on(t *testing.T) *cluster {
	d := *c
	d.t = t
	return &d
}

// run runs argv on host with dynrun on the PATH; it returns stdout,
// stderr and the exit code.
func (c *cluster) run(host string, argv ...string) (string, string, int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := c.c.Command(ctx, host, argv...)
	cmd.Env = append(cmd.Env, leakcheck.EnvMark+"="+c.mark, "PATH="+bin+":/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		c.t.Fatalf("%v: %v", argv, err)
	}
	return out.String(), errb.String(), 0
}

// salloc runs script with sh inside `salloc -N n [args]` on h0 and fails
// the test unless it exits 0.
func (c *cluster) salloc(n int, script string, args ...string) string {
	c.t.Helper()
	argv := append([]string{"salloc", "-N", strconv.Itoa(n)}, args...)
	out, errs, code := c.run("h0", append(argv, "sh", "-c", script)...)
	if code != 0 {
		c.t.Fatalf("salloc -N %d: exit %d\nscript:\n%s\nstdout:\n%s\nstderr:\n%s", n, code, script, out, errs)
	}
	return out
}

// assertNothingLeft checks that the hosts run nothing but Slurm and
// munge, and no process of the test is alive.
func (c *cluster) assertNothingLeft() {
	c.t.Helper()
	daemons := []string{"slurmd", "slurmctld", "munged", ": slurmscriptd", "slurmscriptd"}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var left []string
		for _, h := range c.c.Hosts() {
			pids, err := c.c.Pids(context.Background(), h.Name)
			if err != nil {
				c.t.Fatal(err)
			}
			for _, pid := range pids {
				cl := leakcheck.Cmdline(pid)
				if len(cl) == 0 || slices.Contains(daemons, cl[0]) {
					continue
				}
				left = append(left, fmt.Sprintf("%s: %d %s", h.Name, pid, strings.Join(cl, " ")))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("left on the hosts:\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type status struct {
	ID           string `json:"id"`
	LauncherInfo string `json:"launcher_info"`
	Nodes        []struct {
		Name  string `json:"name"`
		Host  string `json:"host"`
		Slots int    `json:"slots"`
		State string `json:"state"`
	} `json:"nodes"`
}

// lines returns the words after tag of the lines of out that start with it.
func lines(out, tag string) []string {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, tag+" "); ok {
			got = append(got, rest)
		}
	}
	return got
}

func count(words []string) map[string]int {
	m := map[string]int{}
	for _, w := range words {
		m[w]++
	}
	return m
}

// TestSlurm runs the slurm launcher against the real Slurm; the steps
// share the cluster and run in order.
func TestSlurm(t *testing.T) {
	c := start(t)
	steps := []struct {
		name string
		run  func(*cluster)
	}{
		{"salloc then dynrun -n 12", sallocLaunch},
		{"dvm over the allocation", dvmOverAllocation},
		{"mpich allreduce across the allocation", mpichAllreduce},
		{"grow by a new allocation, shrink", growShrink},
		{"killing the master ends the steps and the grow job", killMaster},
		{"master outside its allocation", outside},
		{"a bad allocation is a clear error", badAllocation},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) {
			c := c.on(t)
			s.run(c)
			c.assertNothingLeft()
		}) {
			break
		}
	}
}

// sallocLaunch: `salloc -N 3` then `dynrun -n 12 prog` runs 4 ranks on
// each host (slots from the allocation, no flag naming them), and put,
// fence and get work across the hosts.
func sallocLaunch(c *cluster) {
	out := c.salloc(3, `dynrun -n 12 sh -c 'echo HOST $(hostname)'`)
	if got := count(lines(out, "HOST")); got["h0"] != 4 || got["h1"] != 4 || got["h2"] != 4 {
		c.t.Errorf("ranks per host %v, want 4 on each of h0 h1 h2:\n%s", got, out)
	}
	out = c.salloc(3, `dynrun -n 6 --map-by node testapp exchange`)
	if n := len(lines(out, "exchange")); n != 6 || strings.Contains(out, "ERROR") {
		c.t.Errorf("want 6 exchange lines and no ERROR:\n%s", out)
	}
}

// mpichAllreduce: an MPICH program (Debian's mpich, PMI through the
// daemons) runs its allreduce across the three hosts of the allocation.
func mpichAllreduce(c *cluster) {
	cc, err := exec.LookPath("mpicc.mpich")
	if err != nil {
		c.t.Skip("no mpicc.mpich (make deps-mpi)")
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		c.t.Fatal(err)
	}
	src := filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "testdata", "mpi", "allreduce.c")
	prog := filepath.Join(c.t.TempDir(), "allreduce")
	if b, err := exec.Command(cc, "-O1", "-o", prog, src).CombinedOutput(); err != nil {
		c.t.Fatalf("mpicc: %v\n%s", err, b)
	}
	res := c.salloc(3, `dynrun -n 6 --map-by node --timeout 60s sh -c 'echo "HOST $(hostname)"; exec "$0"' `+prog)
	var sums []string
	for _, l := range strings.Split(res, "\n") {
		if strings.Contains(l, "allreduce") {
			sums = append(sums, l)
			if !strings.Contains(l, "sum=15") || !strings.HasSuffix(l, " ok") {
				c.t.Errorf("%q", l)
			}
		}
	}
	if len(sums) != 6 {
		c.t.Errorf("want 6 allreduce lines:\n%s", res)
	}
	if got := count(lines(res, "HOST")); len(got) != 3 || got["h0"] != 2 || got["h1"] != 2 || got["h2"] != 2 {
		c.t.Errorf("MPI ranks per host %v, want 2 on each of h0 h1 h2", got)
	}
}

// dvmOverAllocation: `dvm start` inside the allocation has one node per
// host, each daemon in its host (the host it reports), started by one srun
// step named after the DVM on the other hosts; the step is gone once the
// DVM is stopped.
func dvmOverAllocation(c *cluster) {
	script := `set -e
dvm=$(dynrun dvm start --daemonize)
echo "STATUS $(dynrun dvm status --json | tr -d '\n')"
echo "STEP $(squeue -h -s -j "$SLURM_JOB_ID" -o '%j/%N' | tr '\n' ' ')"
dynrun -n 12 sh -c 'echo HOST $(hostname)'
dynrun dvm stop >/dev/null
for i in $(seq 100); do [ -z "$(squeue -h -s -j "$SLURM_JOB_ID")" ] && break; sleep 0.1; done
echo "AFTER $(squeue -h -s -j "$SLURM_JOB_ID" | tr '\n' ' ')"`
	out := c.salloc(3, script)
	var st status
	if s := lines(out, "STATUS"); len(s) != 1 || json.Unmarshal([]byte(s[0]), &st) != nil {
		c.t.Fatalf("no status:\n%s", out)
	}
	if len(st.Nodes) != 3 {
		c.t.Fatalf("%d nodes, want 3: %+v", len(st.Nodes), st.Nodes)
	}
	for i, n := range st.Nodes {
		want := fmt.Sprintf("h%d", i)
		if n.Name != want || n.Host != want || n.Slots != 4 || n.State != "up" {
			c.t.Errorf("node %d: %+v, want %s on host %s with 4 slots, up", i, n, want, want)
		}
	}
	if !strings.HasPrefix(st.LauncherInfo, "slurm: job ") || !strings.Contains(st.LauncherInfo, "SLURM_TASKS_PER_NODE") {
		c.t.Errorf("launcher info %q", st.LauncherInfo)
	}
	if step := lines(out, "STEP"); len(step) != 1 || strings.TrimSpace(step[0]) != "dynrt-"+st.ID+"/h[1-2]" {
		c.t.Errorf("daemon step %q, want one step dynrt-%s on h[1-2]:\n%s", step, st.ID, out)
	}
	if got := count(lines(out, "HOST")); got["h0"] != 4 || got["h1"] != 4 || got["h2"] != 4 {
		c.t.Errorf("ranks per host %v, want 4 on each:\n%s", got, out)
	}
	if after := lines(out, "AFTER"); len(after) != 1 || strings.TrimSpace(after[0]) != "" {
		c.t.Errorf("steps left after dvm stop: %q", after)
	}
}

// killMaster: SIGKILL to a DVM's master ends its daemons' steps and its
// grow job by themselves (the daemons lose their master and exit, srun
// dies with the master, the grow job ends with its last step). The kill
// comes right after the grow, before the grow job's script has likely
// polled the daemons' step: it must end all the same (StartedComment).
func killMaster(c *cluster) {
	script := `set -e
dynrun dvm start --daemonize >/dev/null
pid=$(dynrun dvm status --json | sed -n 's/^  "pid": \([0-9]*\),$/\1/p')
steps() { squeue -h -s -o %i | grep -c -v -e '\.batch$' -e '\.extern$' || true; }
dynrun dvm grow --nodes 1 >/dev/null
before="$(steps) $(squeue -h | wc -l)"
kill -9 "$pid"
echo "BEFORE $before"
for i in $(seq 300); do [ "$(steps)" = 0 ] && [ "$(squeue -h | wc -l)" = 1 ] && break; sleep 0.1; done
echo "AFTER $(steps) $(squeue -h | wc -l)"
dynrun dvm list >/dev/null 2>&1 || true`
	out := c.salloc(3, script)
	if b, a := lines(out, "BEFORE"), lines(out, "AFTER"); len(b) != 1 || b[0] != "2 2" || len(a) != 1 || a[0] != "0 1" {
		c.t.Errorf("daemon steps and jobs before the kill %q, 30 s after %q; want 2 steps, 2 jobs then none but the salloc job:\n%s", b, a, out)
	}
}

// growShrink: `dvm grow --nodes 1` gets h3 from a new Slurm job and
// starts its daemon there; a job then uses all four hosts. Shrinking h1,
// whose daemon shares one srun step with h2's, leaves h2 up; shrinking
// h3, the last node of the grow job, cancels that job; so does dvm stop
// right after another grow.
func growShrink(c *cluster) {
	script := `set -e
dvm=$(dynrun dvm start --daemonize)
dynrun dvm grow --nodes 1
echo "GROW $(squeue -h -n "dynrt-$dvm-grow" -o '%T/%N')"
dynrun -n 16 sh -c 'echo HOST $(hostname)'
dynrun dvm shrink --node h1 >/dev/null
echo "STATUS $(dynrun dvm status --json | tr -d '\n')"
dynrun -n 12 sh -c 'echo HOST2 $(hostname)'
dynrun dvm shrink --node h3 >/dev/null
for i in $(seq 100); do [ -z "$(squeue -h -n "dynrt-$dvm-grow")" ] && break; sleep 0.1; done
echo "AFTER $(squeue -h -n "dynrt-$dvm-grow" | wc -l)"
dynrun dvm grow --nodes 1 >/dev/null
dynrun dvm stop >/dev/null
for i in $(seq 100); do [ -z "$(squeue -h -n "dynrt-$dvm-grow")" ] && break; sleep 0.1; done
echo "STOPPED $(squeue -h -n "dynrt-$dvm-grow" | wc -l)"`
	out := c.salloc(3, script)
	if !strings.Contains(out, "node h3 joined DVM") {
		c.t.Errorf("grow did not report h3:\n%s", out)
	}
	if g := lines(out, "GROW"); len(g) != 1 || g[0] != "RUNNING/h3" {
		c.t.Errorf("grow job %q, want one RUNNING on h3", g)
	}
	if got := count(lines(out, "HOST")); len(got) != 4 || got["h0"] != 4 || got["h1"] != 4 || got["h2"] != 4 || got["h3"] != 4 {
		c.t.Errorf("ranks per host %v, want 4 on each of h0..h3:\n%s", got, out)
	}
	var st status
	if s := lines(out, "STATUS"); len(s) != 1 || json.Unmarshal([]byte(s[0]), &st) != nil {
		c.t.Fatalf("no status:\n%s", out)
	}
	var up []string
	for _, n := range st.Nodes {
		if n.State == "up" {
			up = append(up, n.Name)
		}
	}
	if strings.Join(up, " ") != "h0 h2 h3" {
		c.t.Errorf("nodes up after shrinking h1: %q, want h0 h2 h3 (%+v)", up, st.Nodes)
	}
	if got := count(lines(out, "HOST2")); len(got) != 3 || got["h0"] != 4 || got["h2"] != 4 || got["h3"] != 4 {
		c.t.Errorf("ranks per host after the shrink %v, want 4 on each of h0 h2 h3:\n%s", got, out)
	}
	if a := lines(out, "AFTER"); len(a) != 1 || a[0] != "0" {
		c.t.Errorf("grow job still queued after its last node left: %q", a)
	}
	// dvm stop right after a grow gives the grow job back (its script may
	// not have seen the daemons' short step).
	if a := lines(out, "STOPPED"); len(a) != 1 || a[0] != "0" {
		c.t.Errorf("grow job still queued 10 s after dvm stop: %q", a)
	}
}

// outside: salloc's shell on a host outside the allocation (a login
// node): the master runs there on a node of no slots, the ranks all go to
// the allocation's nodes, as with mpirun.
func outside(c *cluster) {
	out := c.salloc(2, `dynrun -n 8 sh -c 'echo HOST $(hostname)'`, "-w", "h1,h2")
	if got := count(lines(out, "HOST")); len(got) != 2 || got["h1"] != 4 || got["h2"] != 4 {
		c.t.Errorf("ranks per host %v, want 4 on each of h1 h2 and none on h0:\n%s", got, out)
	}
}

// badAllocation: a broken allocation environment fails at once with a
// message naming the cause.
func badAllocation(c *cluster) {
	cases := []struct {
		name, script, want string
	}{
		{"bad node list", `SLURM_JOB_NODELIST='h[0-' dynrun -n 1 true`,
			`slurm: SLURM_JOB_NODELIST: host list "h[0-": '[' is never closed`},
		{"tasks do not cover the nodes", `SLURM_TASKS_PER_NODE=4 dynrun dvm start`,
			`SLURM_TASKS_PER_NODE="4" gives 1 counts for the 3 hosts`},
	}
	for _, k := range cases {
		argv := []string{"salloc", "-N", "3", "sh", "-c", k.script}
		out, errs, code := c.run("h0", argv...)
		if code != 1 || !strings.Contains(errs, k.want) {
			c.t.Errorf("%s: exit %d, stderr %q; want 1 and %q (stdout %q)", k.name, code, errs, k.want, out)
		}
	}
}
