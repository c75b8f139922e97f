//go:build pmix

package pmix

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/leakcheck"
)

// serverDir is the directory of the tests' server, which lives as long
// as the test process (see Start).
var serverDir string

func TestMain(m *testing.M) {
	var err error
	if serverDir, err = os.MkdirTemp("", "pmixtest"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "Finalize:", err)
		code = 1
	}
	if _, err := Start(Config{Dir: serverDir}); err == nil || !strings.Contains(err.Error(), "finalized") {
		fmt.Fprintf(os.Stderr, "Start after Finalize: %v, want the refusal\n", err)
		code = 1
	}
	// libpmix leaves only the shared topology file, which the daemon
	// removes with the directory (cmd/dynrun TestPMIxSharesTopology).
	if left := otherFiles(serverDir); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "left in the server's directory after Finalize: %v\n", left)
		code = 1
	}
	os.RemoveAll(serverDir)
	os.Exit(code)
}

// recorder is a Handler that records the callbacks. Its fence stands
// for a job whose other nodes have no process: it returns the local
// contribution alone.
type recorder struct {
	s         *Server
	mu        sync.Mutex
	connected []Proc
	finalized []Proc
	fences    []string // procs and collect flag of each fence
	modex     []byte   // DirectModexRequest of rank 0 during the fence
	modexErr  error
	files     []string // in the server's directory during the fence
	aborts    []string
	// At the fence: the process's sockets, and those a fork would pass on.
	sockets     int
	inheritable []string
	published   map[string]string // Publisher: the name service
	pubLog      []string
}

func (r *recorder) Publish(p Proc, data map[string]string, persist Persistence, done func(error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.published == nil {
		r.published = map[string]string{}
	}
	for k, v := range data {
		r.published[k] = v
		l := fmt.Sprintf("%s publish %s=%s", p, k, v)
		if persist != PersistDefault {
			l += fmt.Sprintf(" persist=%d", persist)
		}
		r.pubLog = append(r.pubLog, l)
	}
	done(nil)
}

func (r *recorder) Lookup(p Proc, keys []string, wait bool, done func(map[string]string, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	found := map[string]string{}
	for _, k := range keys {
		if v, ok := r.published[k]; ok {
			found[k] = v
		}
	}
	r.pubLog = append(r.pubLog, fmt.Sprintf("%s lookup %v wait=%v", p, keys, wait))
	done(found, nil)
}

// Query answers the process-set keys for two sets of the job, a (ranks 0
// and 1) and b (rank 1).
func (r *recorder) Query(p Proc, queries []Query, done func([]QueryResult, error)) {
	sets := map[string][]Proc{"a": {{p.Nspace, 0}, {p.Nspace, 1}}, "b": {{p.Nspace, 1}}}
	var res []QueryResult
	for _, q := range queries {
		for _, k := range q.Keys {
			switch k {
			case KeyQueryNumPsets:
				res = append(res, QueryResult{k, uint64(len(sets))})
			case KeyQueryPsetNames:
				res = append(res, QueryResult{k, "a,b"})
			case KeyQueryPsetMembership:
				if m, ok := sets[q.Qualifiers[KeyPsetName]]; ok {
					res = append(res, QueryResult{k, m})
				}
			}
		}
	}
	r.mu.Lock()
	r.pubLog = append(r.pubLog, fmt.Sprintf("%s query %v", p, queries))
	r.mu.Unlock()
	done(res, nil)
}

func (r *recorder) Unpublish(p Proc, keys []string, done func(error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		delete(r.published, k)
	}
	r.pubLog = append(r.pubLog, fmt.Sprintf("%s unpublish %v", p, keys))
	done(nil)
}

func (r *recorder) ClientConnected(p Proc, done func(error)) {
	r.mu.Lock()
	r.connected = append(r.connected, p)
	r.mu.Unlock()
	done(nil)
}

func (r *recorder) ClientFinalized(p Proc, done func(error)) {
	r.mu.Lock()
	r.finalized = append(r.finalized, p)
	r.mu.Unlock()
	done(nil)
}

func (r *recorder) Abort(p Proc, status int, msg string, procs []Proc, done func(error)) {
	r.mu.Lock()
	r.aborts = append(r.aborts, fmt.Sprintf("%s %s %d %v", p, msg, status, procs))
	r.mu.Unlock()
	done(nil)
}

func (r *recorder) Fence(procs []Proc, collect bool, data []byte, done func([]byte, error)) {
	// Every local client has committed its data by now.
	modex, err := r.s.DirectModexRequest(context.Background(), Proc{Nspace: procs[0].Nspace, Rank: 0})
	r.mu.Lock()
	r.fences = append(r.fences, fmt.Sprintf("%v %v", procs, collect))
	r.modex, r.modexErr = modex, err
	r.files = append(r.files, otherFiles(serverDir)...)
	r.sockets, r.inheritable = sockets()
	r.mu.Unlock()
	// Completing later, from another goroutine, as a daemon does after
	// the master's round trip.
	time.AfterFunc(10*time.Millisecond, func() { done(data, nil) })
}

func (r *recorder) DirectModex(p Proc, done func([]byte, error)) {
	done(nil, &StatusError{Status: CodeNotFound, Msg: "not found"})
}

// client compiles testdata/pmix/fence_client.c into dir.
func client(t *testing.T, dir string) string {
	t.Helper()
	return program(t, dir, "fence_client")
}

// program compiles testdata/pmix/<name>.c into dir.
func program(t *testing.T, dir, name string) string {
	t.Helper()
	if _, err := exec.LookPath("pkg-config"); err != nil {
		t.Skip("needs pkg-config and libpmix-dev (make deps)")
	}
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "pmix").Output()
	if err != nil {
		t.Skipf("needs libpmix-dev (pkg-config pmix: %v)", err)
	}
	bin := filepath.Join(dir, name)
	args := append([]string{"-Wall", "-Wextra", "-I", filepath.Join("..", "..", "libdynrt", "include"), "-o", bin, filepath.Join("..", "..", "testdata", "pmix", name+".c")}, strings.Fields(string(flags))...)
	if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	return bin
}

// run starts the local processes of job with the server s, waits for
// them and returns their outputs and exit codes by local index.
func run(t *testing.T, s *Server, bin string, job *Job, h Handler, mark string, args ...string) ([]string, []int) {
	t.Helper()
	if err := s.RegisterJob(job, h); err != nil {
		t.Fatal(err)
	}
	defer s.DeregisterJob(job.Nspace)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for _, r := range job.LocalRanks() {
		p := Proc{Nspace: job.Nspace, Rank: r}
		if err := s.RegisterClient(p, os.Getuid(), os.Getgid()); err != nil {
			t.Fatal(err)
		}
		defer s.DeregisterClient(p)
		env, err := s.SetupFork(p)
		if err != nil {
			t.Fatal(err)
		}
		if !hasPrefix(env, "PMIX_NAMESPACE="+job.Nspace) || !hasPrefix(env, "PMIX_RANK=") {
			t.Fatalf("setup fork env lacks PMIX_NAMESPACE/PMIX_RANK: %q", env)
		}
		c := exec.CommandContext(ctx, bin, args...)
		c.Env = append(append(os.Environ(), leakcheck.EnvMark+"="+mark), env...)
		out := &bytes.Buffer{}
		c.Stdout, c.Stderr = out, out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, c), append(outs, out)
	}
	texts, codes := make([]string, len(cmds)), make([]int, len(cmds))
	for i, c := range cmds {
		_ = c.Wait()
		texts[i], codes[i] = outs[i].String(), c.ProcessState.ExitCode()
	}
	return texts, codes
}

// otherFiles lists the files in dir besides the node's topology, which
// the server shares with its clients (hwloc.sm): no job data is kept on
// disk (gds/hash).
func otherFiles(dir string) []string {
	var names []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != "hwloc.sm" {
			names = append(names, e.Name())
		}
	}
	return names
}

// sockets counts the process's sockets and lists those without
// close-on-exec ("fd N: socket:[inode] flags F").
func sockets() (n int, inheritable []string) {
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		link, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || !strings.HasPrefix(link, "socket:") {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		n++
		for _, l := range strings.Split(string(info), "\n") {
			if f, ok := strings.CutPrefix(l, "flags:"); ok {
				if v, err := strconv.ParseUint(strings.TrimSpace(f), 8, 64); err == nil && v&syscall.O_CLOEXEC == 0 {
					inheritable = append(inheritable, fmt.Sprintf("fd %s: %s flags %s", e.Name(), link, strings.TrimSpace(f)))
				}
			}
		}
	}
	return n, inheritable
}

func exitCodes(cmds []*exec.Cmd) []int {
	var codes []int
	for _, c := range cmds {
		codes = append(codes, c.ProcessState.ExitCode())
	}
	return codes
}

func hasPrefix(env []string, p string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, p) {
			return true
		}
	}
	return false
}

// setup returns the server, the test client and a mark for the
// processes, which must all be gone when the test ends.
func setup(t *testing.T) (*Server, string, string) {
	t.Helper()
	mark := leakcheck.NewMark(t)
	t.Cleanup(func() { leakcheck.AssertClean(t, t.TempDir(), mark, nil) })
	bin := client(t, t.TempDir())
	s, err := Start(Config{Dir: serverDir, Nspace: "dynrt-test-server"})
	if err != nil {
		t.Fatal(err)
	}
	return s, bin, mark
}

// oneNode is a job of n ranks, all on this server's node.
func oneNode(t *testing.T, ns string, n int) *Job {
	return &Job{Nspace: ns, Size: uint32(n), Nodes: []string{"n0"}, RankNode: make([]int, n), Tmpdir: t.TempDir()}
}

// TestFenceLocal runs 3 real PMIx clients of one namespace against the
// server: they connect, put, commit, fence with data collection, read
// every rank's value and the job's sizes, and finalize; then a second
// namespace does the same on the same server. With every process of the
// job on this node, libpmix completes the fence itself: the Handler's
// Fence is not called (a single-node job needs no master round trip).
func TestFenceLocal(t *testing.T) {
	s, bin, mark := setup(t)
	for _, ns := range []string{"local-a", "local-b"} {
		h := &recorder{s: s}
		outs, codes := run(t, s, bin, oneNode(t, ns, 3), h, mark)
		for r := range 3 {
			want := fmt.Sprintf("rank %d of 3 (3 local): got 3 values\n", r)
			if codes[r] != 0 || outs[r] != want {
				t.Errorf("job %s rank %d: exit %d, output %q, want %q", ns, r, codes[r], outs[r], want)
			}
		}
		h.mu.Lock()
		if len(h.connected) != 3 || len(h.finalized) != 3 {
			t.Errorf("job %s: %d connected, %d finalized callbacks, want 3 each", ns, len(h.connected), len(h.finalized))
		}
		if len(h.fences) != 0 {
			t.Errorf("job %s: fences %v reached the host, want none", ns, h.fences)
		}
		h.mu.Unlock()
	}
}

// TestFenceRemote: a job of 4 ranks with rank 3 on another node (which
// the Handler stands for): the fence of the 3 local clients reaches the
// Handler once, over the whole namespace, collecting, with their data;
// DirectModexRequest returns rank 0's committed data meanwhile; the
// clients complete with the data the Handler returned. The server keeps
// nothing on disk meanwhile (gds/hash, no shared-memory files).
func TestFenceRemote(t *testing.T) {
	s, bin, mark := setup(t)
	h := &recorder{s: s}
	job := &Job{Nspace: "remote-a", Size: 4, Nodes: []string{"n0", "n1"}, RankNode: []int{0, 0, 0, 1}}
	outs, codes := run(t, s, bin, job, h, mark, "3")
	for r := range 3 {
		want := fmt.Sprintf("rank %d of 4 (3 local): got 3 values\n", r)
		if codes[r] != 0 || outs[r] != want {
			t.Errorf("rank %d: exit %d, output %q, want %q", r, codes[r], outs[r], want)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if want := "[remote-a:*] true"; len(h.fences) != 1 || h.fences[0] != want {
		t.Errorf("fences %q, want one: %q", h.fences, want)
	}
	if len(h.files) > 0 {
		t.Errorf("files in the server's directory during the job: %q", h.files)
	}
	// The clients' connections (3 at least) were taken close-on-exec
	// (cloexec.c): a process forked meanwhile inherits none of them.
	if h.sockets < 3 || len(h.inheritable) > 0 {
		t.Errorf("at the fence: %d sockets, inheritable: %q; want >= 3 sockets, none inheritable", h.sockets, h.inheritable)
	}
	if h.modexErr != nil || !bytes.Contains(h.modex, []byte("hello from 0")) {
		t.Errorf("direct modex of rank 0: %v, %q; want its value", h.modexErr, h.modex)
	}
}

// TestAbort: PMIx_Abort(7, "test abort") of a client reaches the Handler
// with its status and message.
func TestAbort(t *testing.T) {
	s, bin, mark := setup(t)
	h := &recorder{s: s}
	_, codes := run(t, s, bin, oneNode(t, "abort-a", 1), h, mark, "abort")
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.aborts) != 1 || h.aborts[0] != "abort-a:0 test abort 7 []" {
		t.Errorf("aborts %q, want one from abort-a:0 with status 7", h.aborts)
	}
	// The handler let it live: PMIx_Abort returned and it exited 3.
	if codes[0] != 3 {
		t.Errorf("exit code %d, want 3", codes[0])
	}
}

// TestPublish: PMIx_Publish, PMIx_Lookup and PMIx_Unpublish of real
// clients reach the Handler's Publisher (string values, directives left
// out), and its answers reach the clients: the value, then not found.
func TestPublish(t *testing.T) {
	s, bin, mark := setup(t)
	h := &recorder{s: s}
	outs, codes := run(t, s, bin, oneNode(t, "pub-a", 2), h, mark, "pubsub")
	want := []string{"rank 0 published svc\n", "rank 1 found svc=port-0\nrank 1 after unpublish: NOT-FOUND\n"}
	for r := range 2 {
		if codes[r] != 0 || outs[r] != want[r] {
			t.Errorf("rank %d: exit %d, output %q, want %q", r, codes[r], outs[r], want[r])
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	wantLog := []string{"pub-a:0 publish svc=port-0", "pub-a:1 lookup [svc] wait=false", "pub-a:0 unpublish [svc]", "pub-a:1 lookup [svc] wait=false"}
	if !slices.Equal(h.pubLog, wantLog) {
		t.Errorf("Publisher calls %q, want %q", h.pubLog, wantLog)
	}
}

// TestQuery: PMIx_Query_info of the process-set keys reaches the
// Handler's Querier, with the set name as qualifier, and the answers
// (size, string, array of procs) reach the client (testdata/pmix/psets.c);
// each process reads the sets it was registered in (PMIX_PSET_NAMES). With
// another job registered too, the unqualified queries still reach the
// asking client's own job's Handler, in that client's name (rank
// included): libpmix hands the host the query in the server's name, and
// requestor.c adds the client's connection, which names it. Without
// requestor.c the server cannot tell the jobs apart and the client gets
// PMIX_ERR_NOT_SUPPORTED.
func TestQuery(t *testing.T) {
	for _, withOther := range []bool{false, true} {
		t.Run(fmt.Sprintf("another job: %v", withOther), func(t *testing.T) {
			s, _, mark := setup(t)
			bin := program(t, t.TempDir(), "psets")
			other := &recorder{s: s}
			if withOther {
				if err := s.RegisterJob(oneNode(t, "query-other", 1), other); err != nil {
					t.Fatal(err)
				}
				defer s.DeregisterJob("query-other")
			}
			h := &recorder{s: s}
			job := oneNode(t, "query-a", 2)
			job.Psets = map[string][]uint32{"b": {1}, "a": {0, 1}}
			outs, codes := run(t, s, bin, job, h, mark)
			want := []string{
				"psets rank=0 size=2\nnum_psets=2\npset_names=a,b\npset a members=job:0,job:1\npset b members=job:1\nrank 0 in psets: a\nrank 0 done\n",
				"psets rank=1 size=2\nrank 1 in psets: a,b\nrank 1 done\n",
			}
			for r := range 2 {
				if codes[r] != 0 || outs[r] != want[r] {
					t.Errorf("rank %d: exit %d, output\n%s\nwant\n%s", r, codes[r], outs[r], want[r])
				}
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			asker := "query-a:0 query "
			if !withOther {
				asker = "query-a:" // the only job: its rank is not needed
			}
			if len(h.pubLog) != 4 {
				t.Errorf("the job's Handler saw %d queries, want 4: %q", len(h.pubLog), h.pubLog)
			}
			for _, l := range h.pubLog {
				if !strings.HasPrefix(l, asker) {
					t.Errorf("query %q, want it asked by %s", l, asker)
				}
			}
			other.mu.Lock()
			defer other.mu.Unlock()
			if len(other.pubLog) != 0 {
				t.Errorf("the other job's Handler was asked: %q", other.pubLog)
			}
		})
	}
}

// TestCompletionsOnLibpmixThread: the answers to queries and lookups
// reach libpmix on its own progress thread, although the Handler answers
// on a goroutine: libpmix 4.2 queues those replies on the client's
// connection without moving to its thread first, which races with that
// thread when called from another (shift.c). Without shift.c every one of
// them runs elsewhere.
func TestCompletionsOnLibpmixThread(t *testing.T) {
	s, bin, mark := setup(t)
	all0, else0 := completions()
	outs, codes := run(t, s, bin, oneNode(t, "shift-pub", 2), &recorder{s: s}, mark, "pubsub")
	for r := range 2 {
		if codes[r] != 0 {
			t.Errorf("pubsub rank %d: exit %d, output %q", r, codes[r], outs[r])
		}
	}
	job := oneNode(t, "shift-query", 1)
	job.Psets = map[string][]uint32{"a": {0}}
	outs, codes = run(t, s, program(t, t.TempDir(), "psets"), job, &recorder{s: s}, mark)
	if codes[0] != 0 {
		t.Errorf("psets: exit %d, output %q", codes[0], outs[0])
	}
	all, elsewhere := completions()
	// 2 lookups and at least 3 queries (count, names, a membership).
	if all-all0 < 5 || elsewhere != else0 {
		t.Errorf("%d completions, %d of them on another thread than libpmix's; want at least 5, none elsewhere", all-all0, elsewhere-else0)
	}
}

// blocker is a Handler whose fence waits for release.
type blocker struct {
	recorder
	entered, release chan struct{}
	order            chan string
}

func (b *blocker) Fence(procs []Proc, collect bool, data []byte, done func([]byte, error)) {
	close(b.entered)
	<-b.release
	done(data, nil)
	b.order <- "fence done"
}

// TestDeregisterWaits: DeregisterJob waits for the job's host operations
// under way (here a fence held by the Handler) before libpmix forgets the
// namespace: completing an operation of a deregistered job crashes
// libpmix (seen at PMIx_server_finalize).
func TestDeregisterWaits(t *testing.T) {
	s, bin, mark := setup(t)
	h := &blocker{entered: make(chan struct{}), release: make(chan struct{}), order: make(chan string, 2)}
	job := &Job{Nspace: "dereg-a", Size: 3, Nodes: []string{"n0", "n1"}, RankNode: []int{0, 0, 1}}
	if err := s.RegisterJob(job, h); err != nil {
		t.Fatal(err)
	}
	// Without the wait, the clients never leave their fence: they are
	// killed then.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var cmds []*exec.Cmd
	for _, r := range job.LocalRanks() {
		p := Proc{Nspace: job.Nspace, Rank: r}
		if err := s.RegisterClient(p, os.Getuid(), os.Getgid()); err != nil {
			t.Fatal(err)
		}
		env, err := s.SetupFork(p)
		if err != nil {
			t.Fatal(err)
		}
		c := exec.CommandContext(ctx, bin, "2")
		c.Env = append(append(os.Environ(), leakcheck.EnvMark+"="+mark), env...)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	select {
	case <-h.entered:
	case <-ctx.Done():
		// The clients are killed at the deadline: their fence never came.
		for _, c := range cmds {
			_ = c.Wait()
		}
		t.Fatalf("the clients' fence never reached the host (exits %v)", exitCodes(cmds))
	}
	go func() {
		s.DeregisterJob(job.Nspace)
		h.order <- "deregistered"
	}()
	// Release the fence once DeregisterJob has returned, or after a while
	// if it waits (as it must).
	select {
	case first := <-h.order:
		close(h.release)
		t.Errorf("%s before the fence was done", first)
		<-h.order
	case <-time.After(500 * time.Millisecond):
		close(h.release)
		if a, b := <-h.order, <-h.order; a != "fence done" || b != "deregistered" {
			t.Errorf("order %s, %s", a, b)
		}
	}
	for _, c := range cmds {
		_ = c.Wait()
	}
}

// TestDeregisterConnected: a client deregistered while still connected
// (a daemon deregisters a process once it has exited, often before
// libpmix has read the end of its connection) leaves nothing watching its
// socket's descriptor: the next client, whose connection gets the same
// descriptor number, is served (closesock.c). Without closesock.c that
// client hangs in PMIx_Init (libpmix 4.2 closes the socket but leaves
// its events in libevent, which then never watches the number again), as
// every later client on that number would.
func TestDeregisterConnected(t *testing.T) {
	s, bin, mark := setup(t)
	h := &recorder{s: s}
	held, next := oneNode(t, "dereg-held", 1), oneNode(t, "dereg-next", 1)
	for _, j := range []*Job{held, next} {
		if err := s.RegisterJob(j, h); err != nil {
			t.Fatal(err)
		}
		defer s.DeregisterJob(j.Nspace)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := func(p Proc, mode string, out io.Writer) (*exec.Cmd, io.WriteCloser) {
		t.Helper()
		if err := s.RegisterClient(p, os.Getuid(), os.Getgid()); err != nil {
			t.Fatal(err)
		}
		env, err := s.SetupFork(p)
		if err != nil {
			t.Fatal(err)
		}
		c := exec.CommandContext(ctx, bin, mode)
		c.Env = append(append(os.Environ(), leakcheck.EnvMark+"="+mark), env...)
		c.Stdout, c.Stderr = out, out
		in, err := c.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		return c, in
	}
	pa, pb := Proc{Nspace: held.Nspace}, Proc{Nspace: next.Nspace}
	outA, outAW := io.Pipe()
	a, inA := start(pa, "hold", outAW)
	defer func() {
		inA.Close()
		_ = a.Wait()
		outAW.Close()
	}()
	var outB bytes.Buffer
	b, inB := start(pb, "gated", &outB)
	defer s.DeregisterClient(pb)
	// The held client is connected: deregister it, as a daemon does when
	// it sees a process end before libpmix sees its connection end.
	line, err := bufio.NewReader(outA).ReadString('\n')
	if line != "connected\n" {
		inB.Close()
		_ = b.Wait()
		t.Fatalf("held client: %q, %v", line, err)
	}
	go io.Copy(io.Discard, outA)
	s.DeregisterClient(pa)
	// The next connection takes the lowest free descriptor: the one
	// libpmix just closed.
	if _, err := io.WriteString(inB, "go\n"); err != nil {
		t.Fatal(err)
	}
	inB.Close()
	err = b.Wait()
	if want := "rank 0 of 1 (1 local): got 1 values\n"; err != nil || outB.String() != want {
		t.Errorf("next client: %v, output %q, want %q (killed at the deadline: it was never served)", err, outB.String(), want)
	}
}

// TestJobValidate: a bad job description is refused with a message
// naming what is wrong, before anything reaches libpmix.
func TestJobValidate(t *testing.T) {
	for _, tc := range []struct {
		job  Job
		want string
	}{
		{Job{Size: 1, Nodes: []string{"n0"}, RankNode: []int{0}}, "without a namespace"},
		{Job{Nspace: "x", Nodes: []string{"n0"}}, "no processes"},
		{Job{Nspace: "x", Size: 2, Nodes: []string{"n0"}, RankNode: []int{0}}, "1 ranks placed, size 2"},
		{Job{Nspace: "x", Size: 1, Nodes: []string{"n0"}, RankNode: []int{1}}, "rank 0 on node index 1"},
		{Job{Nspace: "x", Size: 1, Nodes: []string{"n0"}, RankNode: []int{0}, Node: 2}, "node index 2 out of 1"},
	} {
		err := tc.job.validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.job, err, tc.want)
		}
	}
}

// TestSIGPIPEBlocked: the threads libpmix makes (its progress thread and
// listener) have SIGPIPE blocked, so that a send to a client that has
// gone fails with EPIPE instead of raising SIGPIPE on a thread Go did not
// make, which the Go runtime answers by ending the process (CI: the
// lib/master test binary died with "signal: broken pipe").
func TestSIGPIPEBlocked(t *testing.T) {
	setup(t)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	blocked := 0
	for _, task := range tasks {
		st, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // the thread ended
		}
		for _, l := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(l, "SigBlk:"); ok {
				if m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && m&(1<<(uint(syscall.SIGPIPE)-1)) != 0 {
					blocked++
				}
			}
		}
	}
	// libpmix 4.2 runs a progress thread and a listener thread.
	if blocked < 2 {
		t.Errorf("%d of %d threads block SIGPIPE, want libpmix's (2 or more)", blocked, len(tasks))
	}
}
