package master

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pmiClientMain is a PMI client for the tests (DYNRT_TEST_ROLE=pmi): it
// speaks exactly the lines of shared/pmi-wire.md, the way MPICH 4.0.2's
// clients write them (PMI-2 requests with a left-aligned length 6 bytes
// too large, followed by 6 junk bytes), and prints one line
// "pmi <json report>" per process. Scenarios:
//
//	kv        PMI-1: init .. put, barrier, get of the next rank's key, finalize
//	pmi2      PMI-2: fullinit, job attributes, kvs put/fence/get, node attributes with wait
//	spawn1    rank 0 spawns two executable blocks of "child" through PMI-1 mcmd=spawn
//	spawn2    rank 0 spawns "child2" through PMI-2
//	spawnbad  rank 0 spawns a program that does not exist
//	spawnhost N K V [K V] [-- CHILD ARGS]  PMI-1: rank 0 spawns N processes (default
//	          "child") with the info pairs K=V; the reply is reported (with
//	          $PMI_TEST_HOLD set, at once, and the process then sleeps); the
//	          command is this binary, or $PMI_TEST_EXE when set
//	spawnhost2 N K V  the same through PMI-2 (default child "child2")
//	late D    a spawned PMI-1 process that sleeps D before it finalizes
//	fail C    a spawned PMI-1 process that finalizes and exits with code C
//	child     a spawned PMI-1 process: reports what PMI tells it
//	child2    a spawned PMI-2 process
//	abort N   rank 0 aborts with code N after a barrier; the others wait
//	eof       rank 1 exits 0 right after init; the others enter a barrier
//	ft [2]    keep-going (MPICH's fault tolerance, PMI-1 or PMI-2): after a
//	          barrier rank 1 exits 1 without finalize; rank 3 does the same
//	          on its first SIGUSR1; the others read PMI_dead_processes at
//	          each SIGUSR1 until it is "1,3" and report what they read
//	ftorder   keep-going: after a barrier rank 1 closes its PMI connection,
//	          sleeps 1 s and exits 1; the others exit 5 on SIGUSR1
//	garbage   malformed and unknown requests, then a clean finalize
//	badframe  PMI-2 init, then a broken frame header
func pmiClientMain(args []string) int {
	if len(args) == 0 {
		return 2
	}
	c, err := dialPMI()
	if err != nil {
		fmt.Println("pmi-error", err)
		return 1
	}
	defer c.Close()
	rep := map[string]any{"scenario": args[0]}
	out := func() {
		b, _ := json.Marshal(rep)
		fmt.Println("pmi " + string(b))
	}
	rank, _ := strconv.Atoi(os.Getenv("PMI_RANK"))
	size, _ := strconv.Atoi(os.Getenv("PMI_SIZE"))
	rep["rank"], rep["size"] = rank, size
	fail := func(err error) int {
		rep["err"] = err.Error()
		out()
		return 1
	}
	switch args[0] {
	case "kv":
		if err := c.init1(rep); err != nil {
			return fail(err)
		}
		for _, q := range []struct{ key, req string }{
			{"maxes", "cmd=get_maxes"},
			{"appnum", "cmd=get_appnum"},
			{"kvsname", "cmd=get_my_kvsname"},
			{"universe", "cmd=get_universe_size"},
		} {
			r, err := c.ask1(q.req)
			if err != nil {
				return fail(err)
			}
			rep[q.key] = r
		}
		kvs := field(rep["kvsname"].(string), "kvsname")
		steps := []struct{ key, req string }{
			{"mapping", "cmd=get kvsname=" + kvs + " key=PMI_process_mapping"},
			{"put", fmt.Sprintf("cmd=put kvsname=%s key=k-%d value=v-%d=x", kvs, rank, rank)},
			{"barrier", "cmd=barrier_in"},
			{"next", fmt.Sprintf("cmd=get kvsname=%s key=k-%d", kvs, (rank+1)%max(size, 1))},
			{"missing", "cmd=get kvsname=" + kvs + " key=missing"},
			{"barrier2", "cmd=barrier_in"},
			{"finalize", "cmd=finalize"},
		}
		for _, q := range steps {
			r, err := c.ask1(q.req)
			if err != nil {
				return fail(err)
			}
			rep[q.key] = r
		}
	case "pmi2":
		if err := c.fullinit(rep); err != nil {
			return fail(err)
		}
		r, err := c.ask2("cmd=job-getid;")
		if err != nil {
			return fail(err)
		}
		rep["jobid"] = r
		job := field2(r, "jobid")
		steps := []struct{ key, req string }{
			{"mapping", "cmd=info-getjobattr;key=PMI_process_mapping;"},
			{"universe", "cmd=info-getjobattr;key=universeSize;"},
			{"put", fmt.Sprintf("cmd=kvs-put;key=k-%d;value=v;;%d;", rank, rank)},
			{"fence", "cmd=kvs-fence;thrid=0x1234;"},
			{"next", fmt.Sprintf("cmd=kvs-get;jobid=%s;srcid=%d;key=k-%d;", job, (rank+1)%max(size, 1), (rank+1)%max(size, 1))},
		}
		for _, q := range steps {
			r, err := c.ask2(q.req)
			if err != nil {
				return fail(err)
			}
			rep[q.key] = r
		}
		// Node-local broadcast without a fence: the node's first rank
		// puts (late, so that the others really wait), the others get
		// with wait=TRUE.
		node := os.Getenv("DYNRT_NODE")
		if os.Getenv("MPI_LOCALRANKID") == "0" {
			time.Sleep(100 * time.Millisecond)
			r, err = c.ask2("cmd=info-putnodeattr;key=shm;value=seg-of-" + node + ";")
		} else {
			r, err = c.ask2("cmd=info-getnodeattr;key=shm;wait=TRUE;")
		}
		if err != nil {
			return fail(err)
		}
		rep["nodeattr"] = r
		for _, q := range []struct{ key, req string }{{"fence2", "cmd=kvs-fence;"}, {"finalize", "cmd=finalize;"}} {
			r, err := c.ask2(q.req)
			if err != nil {
				return fail(err)
			}
			rep[q.key] = r
		}
	case "spawn1", "spawnbad":
		if err := c.init1(rep); err != nil {
			return fail(err)
		}
		exe, _ := os.Executable()
		wdir := os.Getenv("PMI_TEST_WDIR")
		var segs []string
		if args[0] == "spawn1" {
			segs = []string{
				spawnSeg(2, exe, 1, 2, []string{"child", "a b c", "x=y"}, []string{"wdir", wdir}),
				spawnSeg(1, exe, 2, 2, []string{"child", "second"}, nil),
			}
		} else {
			segs = []string{spawnSeg(2, "/nonexistent/program", 1, 1, nil, nil)}
		}
		for i, seg := range segs {
			// The client writes a segment in pieces (one per argument).
			for _, piece := range strings.SplitAfter(seg, "argcnt=") {
				if err := c.write(piece); err != nil {
					return fail(err)
				}
			}
			if i < len(segs)-1 {
				continue
			}
			r, err := c.readLine()
			if err != nil {
				return fail(err)
			}
			rep["spawn"] = r
		}
		r, err := c.ask1("cmd=finalize")
		if err != nil {
			return fail(err)
		}
		rep["finalize"] = r
	case "spawnhost", "spawnhost2":
		n, _ := strconv.Atoi(args[1])
		kv, child := args[2:], []string{"child"}
		if args[0] == "spawnhost2" {
			child = []string{"child2"}
		}
		if i := slices.Index(kv, "--"); i >= 0 {
			kv, child = kv[:i], kv[i+1:]
		}
		exe, _ := os.Executable()
		if e := os.Getenv("PMI_TEST_EXE"); e != "" {
			exe = e
		}
		if args[0] == "spawnhost" {
			if err := c.init1(rep); err != nil {
				return fail(err)
			}
			r, err := c.ask1(strings.TrimSuffix(spawnSeg(n, exe, 1, 1, child, kv), "\n"))
			if err != nil {
				return fail(err)
			}
			rep["spawn"] = r
			if os.Getenv("PMI_TEST_HOLD") != "" {
				out() // then run until killed
				time.Sleep(time.Hour)
			}
			if rep["finalize"], err = c.ask1("cmd=finalize"); err != nil {
				return fail(err)
			}
			break
		}
		if err := c.fullinit(rep); err != nil {
			return fail(err)
		}
		req := fmt.Sprintf("cmd=spawn;ncmds=1;preputcount=0;subcmd=%s;maxprocs=%d;argc=%d;", exe, n, len(child))
		for i, a := range child {
			req += fmt.Sprintf("argv%d=%s;", i, a)
		}
		req += fmt.Sprintf("infokeycount=%d;", len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			req += fmt.Sprintf("infokey%d=%s;infoval%d=%s;", i/2, kv[i], i/2, kv[i+1])
		}
		r, err := c.ask2(req)
		if err != nil {
			return fail(err)
		}
		rep["spawn"] = r
		if rep["finalize"], err = c.ask2("cmd=finalize;"); err != nil {
			return fail(err)
		}
	case "late", "fail":
		if err := c.init1(rep); err != nil {
			return fail(err)
		}
		code := 0
		if args[0] == "late" {
			d, _ := time.ParseDuration(args[1])
			time.Sleep(d)
		} else {
			code, _ = strconv.Atoi(args[1])
		}
		r, err := c.ask1("cmd=finalize")
		if err != nil {
			return fail(err)
		}
		rep["finalize"] = r
		out()
		return code
	case "spawn2":
		if err := c.fullinit(rep); err != nil {
			return fail(err)
		}
		exe, _ := os.Executable()
		r, err := c.ask2("cmd=spawn;ncmds=1;preputcount=1;ppkey0=PARENT_ROOT_PORT_NAME;ppval0=port;;2;subcmd=" + exe +
			";maxprocs=2;argc=2;argv0=child2;argv1=p q;infokeycount=0;")
		if err != nil {
			return fail(err)
		}
		rep["spawn"] = r
		if r, err = c.ask2("cmd=finalize;"); err != nil {
			return fail(err)
		}
		rep["finalize"] = r
	case "child":
		if err := c.init1(rep); err != nil {
			return fail(err)
		}
		cwd, _ := os.Getwd()
		rep["args"], rep["cwd"], rep["spawned"] = args[1:], cwd, os.Getenv("PMI_SPAWNED")
		for _, q := range []struct{ key, req string }{{"appnum", "cmd=get_appnum"}, {"kvsname", "cmd=get_my_kvsname"}} {
			r, err := c.ask1(q.req)
			if err != nil {
				return fail(err)
			}
			rep[q.key] = r
		}
		kvs := field(rep["kvsname"].(string), "kvsname")
		for _, q := range []struct{ key, req string }{
			{"parent", "cmd=get kvsname=" + kvs + " key=PARENT_ROOT_PORT_NAME"},
			{"barrier", "cmd=barrier_in"},
			{"finalize", "cmd=finalize"},
		} {
			r, err := c.ask1(q.req)
			if err != nil {
				return fail(err)
			}
			rep[q.key] = r
		}
	case "child2":
		if err := c.fullinit(rep); err != nil {
			return fail(err)
		}
		rep["args"] = args[1:]
		for _, q := range []struct{ key, req string }{
			{"parent", "cmd=kvs-get;jobid=;srcid=-1;key=PARENT_ROOT_PORT_NAME;"},
			{"finalize", "cmd=finalize;"},
		} {
			r, err := c.ask2(q.req)
			if err != nil {
				return fail(err)
			}
			rep[q.key] = r
		}
	case "abort":
		if err := c.init1(rep); err != nil {
			return fail(err)
		}
		if _, err := c.ask1("cmd=barrier_in"); err != nil {
			return fail(err)
		}
		if rank == 0 {
			if err := c.write("cmd=abort exitcode=" + args[1] + "\n"); err != nil {
				return fail(err)
			}
		} else {
			_ = c.write("cmd=barrier_in\n")
		}
		_, _ = c.readLine() // killed while waiting
		return 0
	case "eof":
		if err := c.init1(rep); err != nil {
			return fail(err)
		}
		if rank == 1 {
			return 0 // leaves without finalize
		}
		_, _ = c.ask1("cmd=barrier_in") // never answered: the job is killed
		return 0
	case "ft":
		if err := c.ft(rank, len(args) > 1 && args[1] == "2", rep); err != nil {
			return fail(err)
		}
		if rank == 1 || rank == 3 {
			return 1 // the victims leave without finalize
		}
	case "ftorder":
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGUSR1)
		if err := c.init1(rep); err != nil {
			return fail(err)
		}
		if _, err := c.ask1("cmd=barrier_in"); err != nil {
			return fail(err)
		}
		if rank == 1 {
			c.Close()
			time.Sleep(time.Second)
			return 1
		}
		select {
		case <-sig:
			return 5
		case <-time.After(10 * time.Second):
			return 0
		}
	case "garbage":
		if err := c.init1(rep); err != nil {
			return fail(err)
		}
		for _, q := range []struct{ key, req string }{
			{"garbage", "garbage"},
			{"unknown", "cmd=frobnicate now=1"},
			{"badkvs", "cmd=get kvsname=kvs_elsewhere key=a"},
			{"finalize", "cmd=finalize"},
		} {
			r, err := c.ask1(q.req)
			if err != nil {
				return fail(err)
			}
			rep[q.key] = r
		}
	case "badframe":
		if _, err := c.ask1("cmd=init pmi_version=2 pmi_subversion=0"); err != nil {
			return fail(err)
		}
		if err := c.write(frame4("cmd=fullinit;pmirank=" + os.Getenv("PMI_RANK") + ";threaded=FALSE;")); err != nil {
			return fail(err)
		}
		if _, err := c.readFrame(); err != nil {
			return fail(err)
		}
		_ = c.write("xyzzy!")
		_, err := c.readFrame()
		rep["after"] = fmt.Sprint(err) // the daemon hung up
		out()
		return 0
	default:
		return 2
	}
	out()
	return 0
}

// spawnSeg is one PMI-1 spawn segment as PMI_Spawn_multiple writes it.
func spawnSeg(nprocs int, exe string, sofar, total int, argv, info []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mcmd=spawn\nnprocs=%d\nexecname=%s\ntotspawns=%d\nspawnssofar=%d\n", nprocs, exe, total, sofar)
	for i, a := range argv {
		fmt.Fprintf(&b, "arg%d=%s\n", i+1, a)
	}
	fmt.Fprintf(&b, "argcnt=%d\npreput_num=1\npreput_key_0=PARENT_ROOT_PORT_NAME\npreput_val_0=tag#0$connentry#0200A5B4$\n", len(argv))
	fmt.Fprintf(&b, "info_num=%d\n", len(info)/2)
	for i := 0; i+1 < len(info); i += 2 {
		fmt.Fprintf(&b, "info_key_%d=%s\ninfo_val_%d=%s\n", i/2, info[i], i/2, info[i+1])
	}
	b.WriteString("endcmd\n")
	return b.String()
}

// pmiConn is the client's connection: PMI_FD, or PMI_PORT with PMI_ID.
type pmiConn struct {
	rw   io.ReadWriteCloser
	r    *bufio.Reader
	port bool
}

func dialPMI() (*pmiConn, error) {
	if fd := os.Getenv("PMI_FD"); fd != "" {
		n, err := strconv.Atoi(fd)
		if err != nil {
			return nil, err
		}
		f := os.NewFile(uintptr(n), "pmi")
		return &pmiConn{rw: f, r: bufio.NewReader(f)}, nil
	}
	if addr := os.Getenv("PMI_PORT"); addr != "" {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, err
		}
		return &pmiConn{rw: c, r: bufio.NewReader(c), port: true}, nil
	}
	return nil, fmt.Errorf("neither PMI_FD nor PMI_PORT is set")
}

func (c *pmiConn) Close() error { return c.rw.Close() }

func (c *pmiConn) write(s string) error {
	_, err := io.WriteString(c.rw, s)
	return err
}

func (c *pmiConn) readLine() (string, error) {
	l, err := c.r.ReadString('\n')
	return strings.TrimSuffix(l, "\n"), err
}

// ask1 sends one PMI-1 request line and returns the reply line.
func (c *pmiConn) ask1(req string) (string, error) {
	if err := c.write(req + "\n"); err != nil {
		return "", err
	}
	return c.readLine()
}

// init1 runs the PMI-1 start: initack first in port mode, then init.
func (c *pmiConn) init1(rep map[string]any) error {
	if c.port {
		if err := c.write("cmd=initack pmiid=" + os.Getenv("PMI_ID") + "\n"); err != nil {
			return err
		}
		var lines []string
		for range 4 {
			l, err := c.readLine()
			if err != nil {
				return err
			}
			lines = append(lines, l)
		}
		rep["initack"] = strings.Join(lines, "|")
	}
	r, err := c.ask1("cmd=init pmi_version=1 pmi_subversion=1")
	rep["init"] = r
	if err == nil && r != "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0" {
		err = fmt.Errorf("init answered %q", r)
	}
	return err
}

// frame4 frames a request like the MPICH 4.0.x PMI-2 client: the length
// left-aligned and 6 too large, then 6 bytes of junk.
func frame4(payload string) string {
	n := strconv.Itoa(len(payload) + 6)
	return n + strings.Repeat(" ", 6-len(n)) + payload + "d;\x1c\xfd\x7f\x00"
}

func (c *pmiConn) readFrame() (string, error) {
	var hdr [6]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return "", err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(hdr[:])))
	if err != nil {
		return "", fmt.Errorf("bad header %q", hdr)
	}
	p := make([]byte, n)
	_, err = io.ReadFull(c.r, p)
	return string(p), err
}

func (c *pmiConn) ask2(req string) (string, error) {
	if err := c.write(frame4(req)); err != nil {
		return "", err
	}
	return c.readFrame()
}

// fullinit runs the PMI-2 start: the PMI-1 style init line, then fullinit
// with $PMI_ID (port mode) or $PMI_RANK.
func (c *pmiConn) fullinit(rep map[string]any) error {
	r, err := c.ask1("cmd=init pmi_version=2 pmi_subversion=0")
	if err != nil {
		return err
	}
	rep["init"] = r
	id := os.Getenv("PMI_ID")
	if id == "" {
		id = os.Getenv("PMI_RANK")
	}
	r, err = c.ask2("cmd=fullinit;pmirank=" + id + ";threaded=FALSE;")
	rep["fullinit"] = r
	return err
}

// field returns the value of key in a PMI-1 line.
func field(line, key string) string {
	for _, tok := range strings.Fields(line) {
		if k, v, ok := strings.Cut(tok, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// field2 returns the value of key in a PMI-2 payload (no escapes in the
// values the tests look at).
func field2(payload, key string) string {
	for _, p := range strings.Split(payload, ";") {
		if k, v, ok := strings.Cut(p, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// ft runs the "ft" scenario up to where a victim leaves or a survivor has
// finalized (see pmiClientMain).
func (c *pmiConn) ft(rank int, v2 bool, rep map[string]any) error {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGUSR1) // before init, like MPICH's handler in MPI_Init
	ask, dead := c.ask1, ""
	if v2 {
		if err := c.fullinit(rep); err != nil {
			return err
		}
		ask = c.ask2
		dead = "cmd=kvs-get;jobid=;srcid=-1;key=PMI_dead_processes;" // what ch3 asks
	} else {
		if err := c.init1(rep); err != nil {
			return err
		}
		kvs, err := c.ask1("cmd=get_my_kvsname")
		if err != nil {
			return err
		}
		dead = "cmd=get kvsname=" + field(kvs, "kvsname") + " key=PMI_dead_processes"
	}
	fence := map[bool]string{false: "cmd=barrier_in", true: "cmd=kvs-fence;"}[v2]
	if _, err := ask(fence); err != nil {
		return err
	}
	if rank == 1 {
		return nil
	}
	// The key is read at once on each signal, as MPICH's progress engine
	// does after its handler ran: the daemon must have the list first.
	var seen []string
	for len(seen) == 0 || seen[len(seen)-1] != "1,3" {
		select {
		case <-sig:
		case <-time.After(10 * time.Second): // within the test's wait for the job
			rep["seen"], rep["timeout"] = seen, true
			return nil
		}
		r, err := ask(dead)
		if err != nil {
			return err
		}
		v := field(r, "value")
		if v2 {
			v = field2(r, "value")
		}
		seen = append(seen, v)
		if rank == 3 {
			return nil
		}
	}
	rep["seen"] = seen
	if v2 {
		r, err := c.ask2("cmd=info-getjobattr;key=PMI_dead_processes;")
		if err != nil {
			return err
		}
		rep["jobattr"] = r
	}
	fin := map[bool]string{false: "cmd=finalize", true: "cmd=finalize;"}[v2]
	r, err := ask(fin)
	rep["finalize"] = r
	return err
}
