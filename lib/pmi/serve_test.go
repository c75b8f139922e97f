package pmi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// fake is a Handler backed by maps, recording what the session asked.
type fake struct {
	proc    Proc
	mapping string
	dead    string // PMI_dead_processes
	fenceFn func() error
	noWait  bool // GetNodeAttr never blocks (fuzzing)

	mu       sync.Mutex
	started  []int
	kv       map[string]string
	fences   int
	attrs    map[string]string
	attrCh   chan struct{}
	names    map[string]string
	spawns   []*Spawn
	spawnRes *SpawnResult
	aborts   []string
}

func newFake() *fake {
	return &fake{
		proc:    Proc{Rank: 0, Size: 2, KVS: "kvs_test_1", Universe: 16},
		mapping: "(vector,(0,1,2))",
		kv:      map[string]string{}, attrs: map[string]string{}, names: map[string]string{},
		attrCh: make(chan struct{}),
	}
}

func (f *fake) Proc() Proc { return f.proc }
func (f *fake) Started(v int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, v)
}
func (f *fake) Mapping() string { return f.mapping }
func (f *fake) Dead() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dead
}
func (f *fake) Put(k, v string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kv[k] = v
	return nil
}
func (f *fake) Get(k string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.kv[k]
	return v, ok
}
func (f *fake) Fence(context.Context) error {
	f.mu.Lock()
	f.fences++
	f.mu.Unlock()
	if f.fenceFn != nil {
		return f.fenceFn()
	}
	return nil
}
func (f *fake) PutNodeAttr(k, v string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attrs[k] = v
	close(f.attrCh)
	f.attrCh = make(chan struct{})
	return nil
}
func (f *fake) GetNodeAttr(ctx context.Context, k string, wait bool) (string, bool, error) {
	for {
		f.mu.Lock()
		v, ok := f.attrs[k]
		ch := f.attrCh
		f.mu.Unlock()
		if ok || !wait || f.noWait {
			return v, ok, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return "", false, ctx.Err()
		}
	}
}
func (f *fake) Publish(_ context.Context, s, p string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.names[s]; ok {
		return wire.Errorf(wire.ErrExists, "dup")
	}
	f.names[s] = p
	return nil
}
func (f *fake) Lookup(_ context.Context, s string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.names[s]
	if !ok {
		return "", wire.Errorf(wire.ErrNotFound, "no %s", s)
	}
	return p, nil
}
func (f *fake) Unpublish(_ context.Context, s string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.names[s]; !ok {
		return wire.Errorf(wire.ErrNotFound, "no %s", s)
	}
	delete(f.names, s)
	return nil
}
func (f *fake) Spawn(_ context.Context, s *Spawn) (*SpawnResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.spawns = append(f.spawns, s)
	if f.spawnRes != nil {
		return f.spawnRes, nil
	}
	return &SpawnResult{KVS: "kvs_child"}, nil
}
func (f *fake) Abort(_ context.Context, code int, m string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.aborts = append(f.aborts, strings.Join([]string{itoa(code), m}, ":"))
	return nil
}

func itoa(n int) string { return strconv.Itoa(n) }

// session runs Serve on one end of a pipe; the test speaks on the other.
type session struct {
	t    *testing.T
	c    net.Conn
	done chan struct{}
	res  Result
	err  error
}

func serve(t *testing.T, cfg Config) *session {
	t.Helper()
	a, b := net.Pipe()
	s := &session{t: t, c: a, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(s.done)
		s.res, s.err = Serve(ctx, b, cfg)
		b.Close()
	}()
	t.Cleanup(func() {
		cancel()
		a.Close()
		<-s.done
	})
	return s
}

// send writes raw bytes as the client would.
func (s *session) send(raw string) {
	s.t.Helper()
	_ = s.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.c.Write([]byte(raw)); err != nil {
		s.t.Fatalf("write %q: %v", raw, err)
	}
}

// expect reads exactly len(want) bytes and compares.
func (s *session) expect(want string) {
	s.t.Helper()
	_ = s.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(s.c, got); err != nil {
		s.t.Fatalf("read (want %q): got %q, %v", want, got, err)
	}
	if string(got) != want {
		s.t.Fatalf("reply\n got %q\nwant %q", got, want)
	}
}

// roundtrip sends a request line and expects a reply line (newlines added).
func (s *session) roundtrip(req, reply string) {
	s.t.Helper()
	s.send(req + "\n")
	s.expect(reply + "\n")
}

// end closes the client side and returns what Serve returned.
func (s *session) end() (Result, error) {
	s.t.Helper()
	s.c.Close()
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		s.t.Fatal("Serve did not return after the client closed")
	}
	return s.res, s.err
}

// finished waits for Serve to return by itself.
func (s *session) finished() (Result, error) {
	s.t.Helper()
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		s.t.Fatal("Serve did not return")
	}
	return s.res, s.err
}

// TestPMI1Session replays rank 0's side of a real 2-rank MPICH 4.0.2
// start (pmi-wire.md §2.3), then name service, abort-free finalize.
func TestPMI1Session(t *testing.T) {
	f := newFake()
	s := serve(t, Config{Handler: f})
	s.roundtrip("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
	s.roundtrip("cmd=get_maxes", "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024")
	s.roundtrip("cmd=get_appnum", "cmd=appnum appnum=0")
	s.roundtrip("cmd=get_my_kvsname", "cmd=my_kvsname kvsname=kvs_test_1")
	s.roundtrip("cmd=get kvsname=kvs_test_1 key=PMI_process_mapping", "cmd=get_result rc=0 msg=success value=(vector,(0,1,2))")
	s.roundtrip("cmd=barrier_in", "cmd=barrier_out")
	s.roundtrip("cmd=put kvsname=kvs_test_1 key=-bcast-1-0 value=2F6465762F73686D", "cmd=put_result rc=0 msg=success")
	s.roundtrip("cmd=barrier_in", "cmd=barrier_out")
	s.roundtrip("cmd=put kvsname=kvs_test_1 key=-allgather-shm-1-0 value=segments=2", "cmd=put_result rc=0 msg=success")
	s.roundtrip("cmd=barrier_in", "cmd=barrier_out")
	s.roundtrip("cmd=get kvsname=kvs_test_1 key=-allgather-shm-1-0", "cmd=get_result rc=0 msg=success value=segments=2")
	s.roundtrip("cmd=get kvsname=kvs_test_1 key=-allgather-shm-1-1", "cmd=get_result rc=-1 msg=key_-allgather-shm-1-1_not_found value=unknown")
	s.roundtrip("cmd=get kvsname=kvs_test_1 key=PMI_dead_processes", "cmd=get_result rc=0 msg=success value=")
	f.mu.Lock()
	f.dead = "1,3" // ranks 1 then 3 died (keep-going)
	f.mu.Unlock()
	s.roundtrip("cmd=get kvsname=kvs_test_1 key=PMI_dead_processes", "cmd=get_result rc=0 msg=success value=1,3")
	s.roundtrip("cmd=get_universe_size", "cmd=universe_size size=16")
	s.roundtrip("cmd=put kvsname=kvs_test_1 key=empty value=", "cmd=put_result rc=0 msg=success")
	s.roundtrip("cmd=get kvsname=kvs_test_1 key=empty", "cmd=get_result rc=0 msg=success value=")
	// the singleton upgrade's replay of an empty cached pair: accepted, nothing stored
	s.roundtrip("cmd=put kvsname=kvs_test_1 key= value=", "cmd=put_result rc=0 msg=success")
	s.roundtrip("cmd=put kvsname=kvs_test_1 key= value=x", "cmd=put_result rc=-1 msg=pmi:_put_without_key_or_value")
	// another job's kvs is not ours
	s.roundtrip("cmd=put kvsname=kvs_other key=a value=1", "cmd=put_result rc=-1 msg=pmi:_no_kvs_kvs_other")
	s.roundtrip("cmd=get kvsname=kvs_other key=-bcast-1-0", "cmd=get_result rc=-1 msg=key_-bcast-1-0_not_found value=unknown")
	// name service (pmi-wire.md §2.2)
	s.roundtrip("cmd=publish_name service=svc port=tag#0$connentry#0200A5B4$", "cmd=publish_result rc=0 msg=success")
	s.roundtrip("cmd=publish_name service=svc port=x", "cmd=publish_result rc=1 msg=key_already_present")
	s.roundtrip("cmd=lookup_name service=svc", "cmd=lookup_result port=tag#0$connentry#0200A5B4$ rc=0 msg=success")
	s.roundtrip("cmd=unpublish_name service=svc", "cmd=unpublish_result rc=0 msg=success")
	s.roundtrip("cmd=unpublish_name service=svc", "cmd=unpublish_result rc=1 msg=service_not_found")
	s.roundtrip("cmd=lookup_name service=svc", "cmd=lookup_result rc=1 msg=service_not_found")
	// malformed and unknown requests get an error line; the session goes on
	s.roundtrip("garbage", "cmd=error rc=-1 msg=pmi:_token_\"garbage\"_is_not_key=value")
	s.roundtrip("cmd=frobnicate", "cmd=error rc=-1 msg=unknown_command_frobnicate")
	s.roundtrip("cmd=finalize", "cmd=finalize_ack")
	res, err := s.finished()
	if err != nil || !res.Started || !res.Finalized || res.Version != 1 || res.Aborted {
		t.Errorf("Serve = %+v, %v", res, err)
	}
	if f.fences != 3 || !reflect.DeepEqual(f.started, []int{1}) {
		t.Errorf("fences %d, started %v", f.fences, f.started)
	}
}

// TestPMI1Limits: a value the client cannot take whole is "not found",
// never a truncated or over-long line.
func TestPMI1Limits(t *testing.T) {
	f := newFake()
	f.mapping = "(vector" + strings.Repeat(",(0,1,1)", 100) + ")" // > MaxValue
	f.kv["big"] = strings.Repeat("A", MaxValue+1)
	f.kv["fits"] = strings.Repeat("A", MaxValue)
	s := serve(t, Config{Handler: f})
	s.roundtrip("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
	s.roundtrip("cmd=get kvsname=kvs_test_1 key=PMI_process_mapping", "cmd=get_result rc=-1 msg=key_PMI_process_mapping_not_found value=unknown")
	s.roundtrip("cmd=get kvsname=kvs_test_1 key=big", "cmd=get_result rc=-1 msg=key_big_not_found value=unknown")
	s.roundtrip("cmd=get kvsname=kvs_test_1 key=fits", "cmd=get_result rc=0 msg=success value="+f.kv["fits"])
	long := strings.Repeat("k", 2000)
	s.roundtrip("cmd=get kvsname=kvs_test_1 key="+long, "cmd=get_result rc=-1 msg=key_not_found value=unknown")
	s.roundtrip("cmd=put kvsname=kvs_test_1 key="+strings.Repeat("k", KeyLenMax+1)+" value=1",
		"cmd=put_result rc=-1 msg=pmi:_put_of_a_key_or_value_over_64/1024_bytes")
	// A line longer than anything MPICH sends ends the session.
	_, _ = s.c.Write([]byte("cmd=put " + strings.Repeat("x", maxRequest) + "\n")) // Serve gives up mid-line
	res, err := s.finished()
	if !errors.Is(err, wire.ErrTooLarge) || !res.Started || res.Finalized {
		t.Errorf("Serve = %+v, %v; want ErrTooLarge", res, err)
	}
}

func TestPMI1Abort(t *testing.T) {
	f := newFake()
	s := serve(t, Config{Handler: f})
	s.roundtrip("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
	s.send("cmd=abort exitcode=7\n")
	res, err := s.end()
	if err != nil || !res.Aborted || res.Finalized {
		t.Errorf("Serve = %+v, %v", res, err)
	}
	if !reflect.DeepEqual(f.aborts, []string{"7:"}) {
		t.Errorf("aborts = %v", f.aborts)
	}
}

func TestPMI1EOFBeforeFinalize(t *testing.T) {
	s := serve(t, Config{Handler: newFake()})
	s.roundtrip("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
	s.send("cmd=barr") // half a line, then the process dies
	res, err := s.end()
	if err != nil || !res.Started || res.Finalized {
		t.Errorf("Serve = %+v, %v; want started, not finalized, no error", res, err)
	}
	// A connection that never spoke is not a PMI session at all.
	s = serve(t, Config{Handler: newFake()})
	res, err = s.end()
	if err != nil || res.Started {
		t.Errorf("silent connection: %+v, %v", res, err)
	}
}

func TestPMI1BarrierFailure(t *testing.T) {
	f := newFake()
	f.fenceFn = func() error { return wire.Errorf(wire.ErrAborted, "rank 1 exited") }
	s := serve(t, Config{Handler: f})
	s.roundtrip("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
	s.send("cmd=barrier_in\n")
	res, err := s.finished()
	if !errors.Is(err, wire.ErrAborted) || res.Finalized {
		t.Errorf("Serve = %+v, %v; want the barrier's error", res, err)
	}
}

func TestPMI1Versions(t *testing.T) {
	s := serve(t, Config{Handler: newFake()})
	s.roundtrip("cmd=init pmi_version=3 pmi_subversion=0", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1")
	// Port mode without PMI_ID: the process cannot be identified.
	s = serve(t, Config{Bind: func(int) (Handler, error) { return newFake(), nil }})
	s.roundtrip("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1")
	s.send("cmd=get_appnum\n")
	if _, err := s.finished(); !errors.Is(err, wire.ErrState) {
		t.Errorf("get_appnum before identification: %v", err)
	}
}

// TestPMI1Initack: PMI_PORT + PMI_ID, the handshake of pmi-wire.md §2.2.
func TestPMI1Initack(t *testing.T) {
	var asked []int
	f := newFake()
	f.proc.Rank, f.proc.Size = 3, 4
	s := serve(t, Config{Bind: func(id int) (Handler, error) {
		asked = append(asked, id)
		if id != 4711 {
			return nil, wire.Errorf(wire.ErrNotFound, "no id %d", id)
		}
		return f, nil
	}})
	s.send("cmd=initack pmiid=4711\n")
	s.expect("cmd=initack\ncmd=set size=4\ncmd=set rank=3\ncmd=set debug=0\n")
	s.roundtrip("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
	s.roundtrip("cmd=get_my_kvsname", "cmd=my_kvsname kvsname=kvs_test_1")
	if res, _ := s.end(); res.Rank != 3 || !reflect.DeepEqual(asked, []int{4711}) {
		t.Errorf("rank %d, asked %v", res.Rank, asked)
	}
	s = serve(t, Config{Bind: func(id int) (Handler, error) { return nil, wire.Errorf(wire.ErrNotFound, "no id %d", id) }})
	s.send("cmd=initack pmiid=1\n")
	if _, err := s.finished(); !errors.Is(err, wire.ErrNotFound) {
		t.Errorf("unknown pmiid: %v", err)
	}
}

// TestPMI1Spawn: the client's multi-line spawn, written in pieces.
func TestPMI1Spawn(t *testing.T) {
	f := newFake()
	s := serve(t, Config{Handler: f})
	s.roundtrip("cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
	for _, piece := range strings.SplitAfter(spawn1Example, "argcnt=2\n") {
		for _, p := range strings.SplitAfter(piece, "b c\n") {
			s.send(p)
		}
	}
	s.expect("cmd=spawn_result rc=0\n")
	if len(f.spawns) != 1 || !reflect.DeepEqual(f.spawns[0], spawn1Want) {
		t.Fatalf("spawns = %+v", f.spawns)
	}
	// errcodes are listed when some process failed, one per process.
	f.spawnRes = &SpawnResult{KVS: "k", Errcodes: []int{0, 127, 0}}
	s.send(spawn1Example)
	s.expect("cmd=spawn_result rc=0 errcodes=0,127,0\n")
	// a broken request gets rc=-1 once it is complete
	s.send("mcmd=spawn\nnprocs=0\nexecname=x\ntotspawns=1\nspawnssofar=1\nendcmd\n")
	s.expect("cmd=spawn_result rc=-1 msg=pmi:_spawn_segment_with_nprocs_\"0\"\n")
	s.roundtrip("cmd=finalize", "cmd=finalize_ack")
}

// frame2 builds a request the way the MPICH 4.0.x client does: length
// left-aligned and 6 too large, 6 junk bytes after the payload.
func frame2(payload, junk string) string {
	n := itoa(len(payload) + 6)
	return n + strings.Repeat(" ", HeaderLen-len(n)) + payload + junk
}

// reply2 is a response as Serve frames it.
func reply2(payload string) string {
	n := itoa(len(payload))
	return strings.Repeat(" ", HeaderLen-len(n)) + n + payload
}

const nul6 = "\x00\x00\x00\x00\x00\x00"

// TestPMI2Session: the PMI-2 handshake and commands of pmi-wire.md §3.
func TestPMI2Session(t *testing.T) {
	f := newFake()
	f.proc.Parent = "kvs_parent"
	f.proc.Appnum = 1
	s := serve(t, Config{Handler: f})
	s.roundtrip("cmd=init pmi_version=2 pmi_subversion=0", "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0")
	x := func(req, junk, resp string) {
		t.Helper()
		s.send(frame2(req, junk))
		s.expect(reply2(resp))
	}
	x("cmd=fullinit;pmirank=0;threaded=FALSE;", nul6,
		"cmd=fullinit-response;pmi-version=2;pmi-subversion=0;rank=0;size=2;appnum=1;spawner-jobid=kvs_parent;debugged=FALSE;pmiverbose=FALSE;rc=0;")
	x("cmd=job-getid;", "d;\x1c\xfd\x7f\x00", "cmd=job-getid-response;jobid=kvs_test_1;rc=0;")
	x("cmd=info-getjobattr;key=PMI_process_mapping;", nul6, "cmd=info-getjobattr-response;found=TRUE;value=(vector,(0,1,2));rc=0;")
	x("cmd=info-getjobattr;key=universeSize;", nul6, "cmd=info-getjobattr-response;found=TRUE;value=16;rc=0;")
	x("cmd=info-getjobattr;key=nothing;", nul6, "cmd=info-getjobattr-response;found=FALSE;rc=0;")
	x("cmd=kvs-put;key=k1;value=v;;1;", nul6, "cmd=kvs-put-response;rc=0;")
	if f.kv["k1"] != "v;1" {
		t.Errorf("kvs-put stored %q, want the unescaped v;1", f.kv["k1"])
	}
	x("cmd=kvs-fence;", nul6, "cmd=kvs-fence-response;rc=0;")
	x("cmd=kvs-get;jobid=kvs_test_1;srcid=-1;key=k1;", nul6, "cmd=kvs-get-response;found=TRUE;value=v;;1;rc=0;")
	x("cmd=kvs-get;jobid=kvs_test_1;srcid=1;key=k2;", nul6, "cmd=kvs-get-response;found=FALSE;rc=0;")
	// the 4.0.x client's garbage may begin with ';' (left over from a
	// longer request): it must not turn the payload's last ';' into ';;'
	x("cmd=kvs-get;jobid=kvs_test_1;srcid=-1;key=k1;", ";\x7f\x00\x00\x18\x00", "cmd=kvs-get-response;found=TRUE;value=v;;1;rc=0;")
	x("cmd=kvs-get;jobid=kvs_else;srcid=1;key=k1;", nul6, "cmd=kvs-get-response;found=FALSE;rc=0;")
	// PMI_dead_processes: Hydra answers it in info-getjobattr; MPICH's
	// ch3 asks kvs-get (answered too, so its fault tolerance works)
	x("cmd=info-getjobattr;key=PMI_dead_processes;", nul6, "cmd=info-getjobattr-response;found=TRUE;value=;rc=0;")
	f.mu.Lock()
	f.dead = "1"
	f.mu.Unlock()
	x("cmd=info-getjobattr;key=PMI_dead_processes;", nul6, "cmd=info-getjobattr-response;found=TRUE;value=1;rc=0;")
	x("cmd=kvs-get;jobid=kvs_test_1;srcid=-1;key=PMI_dead_processes;", nul6, "cmd=kvs-get-response;found=TRUE;value=1;rc=0;")
	// thrid is echoed
	x("cmd=kvs-fence;thrid=0x7f00aa;", nul6, "cmd=kvs-fence-response;rc=0;thrid=0x7f00aa;")
	// node attributes: a get with wait=TRUE is answered once another
	// process of the node puts the key, with no fence in between
	x("cmd=info-getnodeattr;key=shm;wait=FALSE;", nul6, "cmd=info-getnodeattr-response;found=FALSE;rc=0;")
	s.send(frame2("cmd=info-getnodeattr;key=shm;wait=TRUE;", nul6))
	time.Sleep(20 * time.Millisecond)
	if err := f.PutNodeAttr("shm", "/dev/shm/x"); err != nil {
		t.Fatal(err)
	}
	s.expect(reply2("cmd=info-getnodeattr-response;found=TRUE;value=/dev/shm/x;rc=0;"))
	x("cmd=info-putnodeattr;key=a;value=b;", nul6, "cmd=info-putnodeattr-response;rc=0;")
	// names
	x("cmd=name-publish;name=svc;port=p;infokeycount=0;", nul6, "cmd=name-publish-response;rc=0;")
	x("cmd=name-publish;name=svc;port=q;infokeycount=0;", nul6, "cmd=name-publish-response;rc=1;errmsg=duplicate_service_svc;")
	x("cmd=name-lookup;name=svc;infokeycount=0;", nul6, "cmd=name-lookup-response;port=p;found=TRUE;rc=0;")
	x("cmd=name-unpublish;name=svc;infokeycount=0;", nul6, "cmd=name-unpublish-response;rc=0;")
	x("cmd=name-unpublish;name=svc;infokeycount=0;", nul6, "cmd=name-unpublish-response;rc=1;errmsg=service_svc_not_found;")
	x("cmd=name-lookup;name=svc;infokeycount=0;", nul6, "cmd=name-lookup-response;found=FALSE;rc=1;")
	// spawn (§3.4)
	x("cmd=spawn;ncmds=1;preputcount=1;ppkey0=PARENT_ROOT_PORT_NAME;ppval0=fakeport;subcmd=./drv2;maxprocs=2;argc=0;infokeycount=0;", "d;\x1c\xfd\x7f\x00",
		"cmd=spawn-response;rc=0;jobid=kvs_child;nerrs=0;")
	// Junk that begins with ';' (left from an earlier request) must not
	// turn the last value's ';' into an escaped ";;" (spaconacc's second
	// spawn got path ".;").
	x("cmd=spawn;ncmds=1;preputcount=0;subcmd=spaconacc;maxprocs=1;argc=0;infokeycount=1;infokey0=path;infoval0=.;", ";\x00\xa2lG\x95",
		"cmd=spawn-response;rc=0;jobid=kvs_child;nerrs=0;")
	f.mu.Lock()
	if last := f.spawns[len(f.spawns)-1]; len(last.Apps) != 1 || !reflect.DeepEqual(last.Apps[0].Info, []Pair{{"path", "."}}) {
		t.Errorf("spawn info after junk = %+v, want path=.", last.Apps)
	}
	f.mu.Unlock()
	// A failed spawn, or one some of whose processes could not start,
	// is answered without rc: the only reply MPICH 4.0.x's client does
	// not take for success (it ignores rc, nerrs and errcodes).
	x("cmd=spawn;ncmds=1;subcmd=./drv2;maxprocs=0;", nul6,
		"cmd=spawn-response;errmsg=pmi: spawn maxprocs=\"0\";")
	f.mu.Lock()
	f.spawnRes = &SpawnResult{KVS: "kvs_child", Errcodes: []int{0, 127}}
	f.mu.Unlock()
	x("cmd=spawn;ncmds=1;subcmd=./drv2;maxprocs=2;argc=0;infokeycount=0;", nul6,
		"cmd=spawn-response;errmsg=1 of the 2 spawned processes could not start (exit codes 0,127);")
	f.mu.Lock()
	f.spawnRes = nil
	f.mu.Unlock()
	// unknown commands and malformed frames get an rc=-1 reply
	x("cmd=job-connect;jobid=x;", nul6, "cmd=job-connect-response;rc=-1;errmsg=pmi: unknown command job-connect;")
	x("key=nocmd;", nul6, "cmd=error;rc=-1;errmsg=pmi: frame starts with \"key\", not cmd=;")
	x("cmd=finalize;", nul6, "cmd=finalize-response;rc=0;")
	res, err := s.finished()
	if err != nil || !res.Finalized || res.Version != 2 || !reflect.DeepEqual(f.started, []int{2}) {
		t.Errorf("Serve = %+v, %v; started %v", res, err, f.started)
	}
}

func TestPMI2Bind(t *testing.T) {
	// PMI_PORT mode: pmirank carries $PMI_ID.
	f := newFake()
	f.proc.Rank = 5
	s := serve(t, Config{Bind: func(id int) (Handler, error) {
		if id != 99 {
			return nil, wire.Errorf(wire.ErrNotFound, "no id %d", id)
		}
		return f, nil
	}})
	s.roundtrip("cmd=init pmi_version=2 pmi_subversion=0", "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0")
	s.send(frame2("cmd=fullinit;pmirank=99;threaded=FALSE;", nul6))
	s.expect(reply2("cmd=fullinit-response;pmi-version=2;pmi-subversion=0;rank=5;size=2;appnum=0;debugged=FALSE;pmiverbose=FALSE;rc=0;"))
	// fd mode: a fullinit for another rank is refused and ends the session
	s = serve(t, Config{Handler: newFake()})
	s.roundtrip("cmd=init pmi_version=2 pmi_subversion=0", "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0")
	s.send(frame2("cmd=fullinit;pmirank=1;threaded=FALSE;", nul6))
	s.expect(reply2("cmd=fullinit-response;rc=-1;errmsg=pmi: fullinit for rank 1 on the connection of rank 0;"))
	if _, err := s.finished(); !errors.Is(err, wire.ErrPermission) {
		t.Errorf("wrong rank: %v", err)
	}
	// a command before fullinit
	s = serve(t, Config{Handler: newFake()})
	s.send(frame2("cmd=job-getid;", nul6))
	s.expect(reply2("cmd=job-getid-response;rc=-1;errmsg=pmi: job-getid before fullinit;"))
	if _, err := s.finished(); !errors.Is(err, wire.ErrState) {
		t.Errorf("before fullinit: %v", err)
	}
}

// TestPMI2Direct: a client that skips the PMI-1 init line and starts with
// a frame is detected as PMI-2; a broken header ends the session.
func TestPMI2Direct(t *testing.T) {
	f := newFake()
	s := serve(t, Config{Handler: f})
	s.send(frame2("cmd=fullinit;pmirank=0;threaded=FALSE;", nul6))
	s.expect(reply2("cmd=fullinit-response;pmi-version=2;pmi-subversion=0;rank=0;size=2;appnum=0;debugged=FALSE;pmiverbose=FALSE;rc=0;"))
	s.send(frame2("cmd=abort;isworld=TRUE;msg=bad things\nhappened;", nul6))
	s.send("xyzzy!")
	res, err := s.finished()
	if !errors.Is(err, wire.ErrMalformed) || !res.Aborted || !reflect.DeepEqual(f.aborts, []string{"255:bad things\nhappened"}) {
		t.Errorf("Serve = %+v, %v; aborts %v", res, err, f.aborts)
	}
}

func TestDetect(t *testing.T) {
	for in, want := range map[string]int{"cmd=init": 1, "mcmd=spawn": 1, "44    cmd=": 2, "cmd": 0, "xxxx": 2} {
		if got := Detect([]byte(in)); got != want {
			t.Errorf("Detect(%q) = %d, want %d", in, got, want)
		}
	}
}

// rw is a connection made of a fixed input and a sink.
type rw struct {
	in  io.Reader
	out bytes.Buffer
}

func (r *rw) Read(p []byte) (int, error)  { return r.in.Read(p) }
func (r *rw) Write(p []byte) (int, error) { return r.out.Write(p) }

// FuzzServe: whatever a client sends, Serve returns (the input ends) and
// never panics; every reply it wrote fits the client's limits.
func FuzzServe(f *testing.F) {
	for _, s := range []string{
		"cmd=init pmi_version=1 pmi_subversion=1\ncmd=get_maxes\ncmd=barrier_in\ncmd=finalize\n",
		"cmd=initack pmiid=1\ncmd=init pmi_version=1 pmi_subversion=1\n",
		spawn1Example,
		"cmd=init pmi_version=2 pmi_subversion=0\n" + frame2("cmd=fullinit;pmirank=0;threaded=FALSE;", nul6) + frame2("cmd=kvs-get;key=a;", nul6),
		frame2("cmd=info-getnodeattr;key=x;wait=TRUE;", nul6),
		"mcmd=spawn\nnprocs=1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		h := newFake()
		h.noWait = true
		h.kv["a"] = "b"
		conn := &rw{in: bytes.NewReader(in)}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = Serve(ctx, conn, Config{Handler: h, Bind: func(int) (Handler, error) { return h, nil }})
		out := conn.out.Bytes()
		if len(out) > 0 && out[0] == 'c' {
			for _, line := range bytes.SplitAfter(out, []byte("\n")) {
				if len(line) > MaxReply {
					t.Fatalf("reply line of %d bytes", len(line))
				}
			}
		}
	})
}
