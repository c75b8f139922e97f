package pmi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/dynrt/dynrt/wire"
)

// Proc is what PMI tells a process about itself and its job.
type Proc struct {
	Rank     int
	Size     int
	Appnum   int    // index of the process's executable block (MPI_APPNUM)
	KVS      string // kvsname (PMI-1) and jobid (PMI-2) of the job
	Parent   string // KVS of the job that spawned this one; "" if not spawned
	Universe int    // MPI_UNIVERSE_SIZE; 0 or less: unknown
}

// SpawnResult is the outcome of a spawn.
type SpawnResult struct {
	KVS      string // the new job's KVS (PMI-2 jobid)
	Errcodes []int  // one per new process, 0 = started; nil = all started
}

// Handler is the runtime behind one connection: what Serve cannot answer
// from the protocol alone. Methods that wait (Fence, GetNodeAttr with
// wait, Spawn, the name service) get the context of Serve. Errors matching
// wire.ErrExists and wire.ErrNotFound are reported to the client as
// duplicate and unknown names; any other error as a failure.
type Handler interface {
	Proc() Proc
	// Started is called once, when the client begins a PMI session (init).
	Started(version int)
	// Mapping returns PMI_process_mapping ("" = not known).
	Mapping() string
	// Dead returns PMI_dead_processes: the job's ranks that left PMI
	// without finalize, comma-separated in the order they did ("" = none).
	// MPICH reads it when it gets SIGUSR1 (fault tolerance).
	Dead() string
	Put(key, value string) error
	// Get returns a value of the job's key-value space. It never waits:
	// what another process put is visible after the next Fence.
	Get(key string) (string, bool)
	// Fence is the job-wide barrier (PMI-1 barrier_in, PMI-2 kvs-fence).
	Fence(ctx context.Context) error
	PutNodeAttr(key, value string) error
	GetNodeAttr(ctx context.Context, key string, wait bool) (string, bool, error)
	Publish(ctx context.Context, service, port string) error
	Lookup(ctx context.Context, service string) (string, error)
	Unpublish(ctx context.Context, service string) error
	Spawn(ctx context.Context, s *Spawn) (*SpawnResult, error)
	// Abort kills the job with the exit code; the client waits to be
	// killed and gets no reply.
	Abort(ctx context.Context, code int, msg string) error
}

// Config says how a connection finds its Handler: Handler when the
// connection is tied to one process from the start (PMI_FD), Bind when
// the client names itself (PMI_PORT: PMI-1 `initack pmiid=`, PMI-2
// `fullinit pmirank=`, both carrying $PMI_ID).
type Config struct {
	Handler Handler
	Bind    func(id int) (Handler, error)
	// Trace, when set, sees every request (in) and reply as read or
	// written (debug logging).
	Trace func(in bool, msg []byte)
}

// Result says how far a session got; the daemon fails the job when a
// started session ends without Finalized or Aborted (the process died or
// closed its PMI connection early).
type Result struct {
	Version   int // 1 or 2 after init
	Started   bool
	Finalized bool
	Aborted   bool
	Rank      int // the bound process's rank (valid once Started)
}

// Names of keys PMI answers itself.
const (
	KeyMapping = "PMI_process_mapping"
	KeyDead    = "PMI_dead_processes"
	KeyUniv2   = "universeSize" // PMI-2 job attribute
)

// Serve runs one PMI connection. It detects the protocol from the first
// bytes (`cmd=`/`mcmd=`: PMI-1 lines, else PMI-2 frames), and returns at
// EOF (error nil), after finalize, or on an error that leaves the stream
// unusable (the caller must then close the connection, which fails the
// client fast instead of letting it wait). Serve never closes rw; to stop
// it early, close rw and cancel ctx.
func Serve(ctx context.Context, rw io.ReadWriter, cfg Config) (Result, error) {
	s := &server{ctx: ctx, r: bufio.NewReaderSize(rw, maxRequest), w: rw, h: cfg.Handler, bind: cfg.Bind, trace: cfg.Trace}
	head, err := s.r.Peek(4)
	if err != nil {
		if len(head) == 0 && errors.Is(err, io.EOF) {
			return s.res, nil
		}
		return s.res, wire.Errorf(wire.ErrMalformed, "pmi: connection ended after %d bytes: %w", len(head), err)
	}
	if Detect(head) == 1 {
		err = s.serve1()
	} else {
		err = s.serve2()
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return s.res, err
}

type server struct {
	ctx   context.Context
	r     *bufio.Reader
	w     io.Writer
	h     Handler
	bind  func(int) (Handler, error)
	res   Result
	out   []byte
	spawn *SpawnCollector
	trace func(in bool, msg []byte)
}

func (s *server) start(version int) {
	s.res.Version = version
	if !s.res.Started {
		s.res.Started = true
		s.res.Rank = s.h.Proc().Rank
		s.h.Started(version)
	}
}

// readLine returns the next line without its newline (valid until the
// next read). A last line without a newline counts as EOF.
func (s *server) readLine() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	switch {
	case err == nil:
		if s.trace != nil {
			s.trace(true, line[:len(line)-1])
		}
		return line[:len(line)-1], nil
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, wire.Errorf(wire.ErrTooLarge, "pmi: request line longer than %d bytes", maxRequest)
	}
	return nil, err
}

func (s *server) write(b []byte) error {
	if s.trace != nil {
		s.trace(false, bytes.TrimSuffix(b, []byte("\n")))
	}
	if _, err := s.w.Write(b); err != nil {
		return wire.Errorf(wire.ErrClosed, "pmi: write: %w", err)
	}
	return nil
}

// send1 writes a PMI-1 reply; a reply that cannot be formatted is an
// internal error (callers that can fall back check fits1 first).
func (s *server) send1(cmd string, kv ...string) error {
	b, err := AppendLine(s.out[:0], cmd, kv...)
	if err != nil {
		return err
	}
	s.out = b
	return s.write(b)
}

func fits1(cmd string, kv ...string) bool {
	_, err := AppendLine(nil, cmd, kv...)
	return err == nil
}

// msg makes an error text fit a PMI-1 msg= token.
func msg(err error) string {
	t := Token(err.Error())
	if len(t) > 200 {
		t = t[:200]
	}
	return t
}

// ---- PMI-1 ----------------------------------------------------------------

func (s *server) serve1() error {
	for {
		line, err := s.readLine()
		if err != nil {
			return err
		}
		if s.spawn != nil && s.spawn.Active() {
			done, err := s.spawn.Feed(line)
			if err != nil {
				return err
			}
			if done {
				sp, perr := s.spawn.Result()
				s.spawn = nil
				if err := s.doSpawn1(sp, perr); err != nil {
					return err
				}
			}
			continue
		}
		l, err := ParseLine(line)
		if err != nil {
			// The client waits for an answer to whatever it meant.
			if err := s.send1("error", "rc", "-1", "msg", msg(err)); err != nil {
				return err
			}
			continue
		}
		if l.Multi {
			if l.Cmd != "spawn" {
				return wire.Errorf(wire.ErrMalformed, "pmi: unknown multi-line command %q", clip([]byte(l.Cmd)))
			}
			if s.h == nil {
				return wire.Errorf(wire.ErrState, "pmi: spawn before the process identified itself")
			}
			if s.spawn == nil {
				s.spawn = &SpawnCollector{}
			}
			s.spawn.Begin()
			continue
		}
		s.spawn = nil // a half-sent spawn is abandoned
		switchTo2, err := s.do1(&l)
		if err != nil {
			return err
		}
		if switchTo2 {
			return s.serve2()
		}
	}
}

// do1 answers one PMI-1 request. switchTo2 says the client asked for
// PMI-2 in its init: frames follow.
func (s *server) do1(l *Line) (switchTo2 bool, err error) {
	switch l.Cmd {
	case "init":
		v, _ := l.Int("pmi_version")
		switch {
		case v == 2 && (s.h != nil || s.bind != nil):
			s.res.Version = 2
			return true, s.send1("response_to_init", "pmi_version", "2", "pmi_subversion", "0", "rc", "0")
		case v == 1 && s.h != nil:
			s.start(1)
			return false, s.send1("response_to_init", "pmi_version", "1", "pmi_subversion", "1", "rc", "0")
		case v == 1:
			// PMI_PORT without PMI_ID: we cannot tell who this is.
			return false, s.send1("response_to_init", "pmi_version", "1", "pmi_subversion", "1", "rc", "-1")
		}
		return false, s.send1("response_to_init", "pmi_version", "1", "pmi_subversion", "1", "rc", "-1")
	case "initack":
		id, ok := l.Int("pmiid")
		if !ok {
			return false, wire.Errorf(wire.ErrMalformed, "pmi: initack without a numeric pmiid")
		}
		if s.h == nil {
			if s.bind == nil {
				return false, wire.Errorf(wire.ErrState, "pmi: initack on a connection that cannot bind")
			}
			h, err := s.bind(id)
			if err != nil {
				return false, err
			}
			s.h = h
		}
		p := s.h.Proc()
		return false, s.write([]byte("cmd=initack\ncmd=set size=" + strconv.Itoa(p.Size) +
			"\ncmd=set rank=" + strconv.Itoa(p.Rank) + "\ncmd=set debug=0\n"))
	case "get_maxes":
		return false, s.send1("maxes", "kvsname_max", strconv.Itoa(KVSNameMax), "keylen_max", strconv.Itoa(KeyLenMax), "vallen_max", strconv.Itoa(ValLenMax))
	}
	if s.h == nil {
		return false, wire.Errorf(wire.ErrState, "pmi: %s before the process identified itself", clip([]byte(l.Cmd)))
	}
	p := s.h.Proc()
	switch l.Cmd {
	case "get_appnum":
		return false, s.send1("appnum", "appnum", strconv.Itoa(p.Appnum))
	case "get_my_kvsname":
		return false, s.send1("my_kvsname", "kvsname", p.KVS)
	case "get_universe_size":
		u := p.Universe
		if u <= 0 {
			u = -1
		}
		return false, s.send1("universe_size", "size", strconv.Itoa(u))
	case "put":
		return false, s.put1(l, p)
	case "get":
		return false, s.get1(l, p)
	case "barrier_in":
		if err := s.h.Fence(s.ctx); err != nil {
			// barrier_out has no rc: the only way to fail it is to end
			// the session.
			return false, fmt.Errorf("pmi: barrier of rank %d: %w", p.Rank, err)
		}
		return false, s.send1("barrier_out")
	case "finalize":
		s.res.Finalized = true
		if err := s.send1("finalize_ack"); err != nil {
			return false, err
		}
		return false, io.EOF
	case "abort":
		code, ok := l.Int("exitcode")
		if !ok {
			code = 1
		}
		m, _ := l.Get("message")
		s.res.Aborted = true
		if err := s.h.Abort(s.ctx, code, m); err != nil {
			return false, err
		}
		return false, nil // no reply: the client waits to be killed
	case "publish_name":
		svc, _ := l.Get("service")
		port, _ := l.Get("port")
		err := s.h.Publish(s.ctx, svc, port)
		switch {
		case err == nil:
			return false, s.send1("publish_result", "rc", "0", "msg", "success")
		case errors.Is(err, wire.ErrExists):
			return false, s.send1("publish_result", "rc", "1", "msg", "key_already_present")
		}
		return false, s.send1("publish_result", "rc", "1", "msg", msg(err))
	case "unpublish_name":
		svc, _ := l.Get("service")
		err := s.h.Unpublish(s.ctx, svc)
		switch {
		case err == nil:
			return false, s.send1("unpublish_result", "rc", "0", "msg", "success")
		case errors.Is(err, wire.ErrNotFound):
			return false, s.send1("unpublish_result", "rc", "1", "msg", "service_not_found")
		}
		return false, s.send1("unpublish_result", "rc", "1", "msg", msg(err))
	case "lookup_name":
		svc, _ := l.Get("service")
		port, err := s.h.Lookup(s.ctx, svc)
		switch {
		case err == nil && fits1("lookup_result", "port", port, "rc", "0", "msg", "success"):
			return false, s.send1("lookup_result", "port", port, "rc", "0", "msg", "success")
		case err == nil:
			return false, s.send1("lookup_result", "rc", "1", "msg", "port_cannot_be_sent")
		case errors.Is(err, wire.ErrNotFound):
			return false, s.send1("lookup_result", "rc", "1", "msg", "service_not_found")
		}
		return false, s.send1("lookup_result", "rc", "1", "msg", msg(err))
	}
	return false, s.send1("error", "rc", "-1", "msg", "unknown_command_"+Token(clip([]byte(l.Cmd))))
}

func (s *server) put1(l *Line, p Proc) error {
	kvs, _ := l.Get("kvsname")
	key, okK := l.Get("key")
	val, okV := l.Get("value")
	var err error
	switch {
	case kvs != p.KVS:
		err = wire.Errorf(wire.ErrNotFound, "pmi: no kvs %s", kvs)
	case okK && okV && key == "" && val == "":
		// MPICH's singleton upgrade replays its cached pair, empty when
		// nothing was cached: accepted, nothing stored.
	case !okK || key == "" || !okV:
		err = wire.Errorf(wire.ErrInvalid, "pmi: put without key or value")
	case len(key) > KeyLenMax || len(val) > ValLenMax:
		err = wire.Errorf(wire.ErrTooLarge, "pmi: put of a key or value over %d/%d bytes", KeyLenMax, ValLenMax)
	default:
		err = s.h.Put(key, val)
	}
	if err != nil {
		return s.send1("put_result", "rc", "-1", "msg", msg(err))
	}
	return s.send1("put_result", "rc", "0", "msg", "success")
}

func (s *server) get1(l *Line, p Proc) error {
	kvs, _ := l.Get("kvsname")
	key, _ := l.Get("key")
	val, found := "", false
	if kvs == p.KVS && key != "" {
		val, found = s.lookupKey(key)
	}
	if found && len(val) <= MaxValue && fits1("get_result", "rc", "0", "msg", "success", "value", val) {
		return s.send1("get_result", "rc", "0", "msg", "success", "value", val)
	}
	// Not found, or a value the client cannot take whole: a truncated
	// mapping would be a fatal parse error, a missing one falls back.
	m := "key_" + Token(key) + "_not_found"
	if !fits1("get_result", "rc", "-1", "msg", m, "value", "unknown") {
		m = "key_not_found"
	}
	return s.send1("get_result", "rc", "-1", "msg", m, "value", "unknown")
}

// lookupKey answers a get: the keys PMI synthesises, else the job's data.
func (s *server) lookupKey(key string) (string, bool) {
	switch key {
	case KeyMapping:
		m := s.h.Mapping()
		return m, m != ""
	case KeyDead:
		return s.h.Dead(), true
	}
	return s.h.Get(key)
}

func (s *server) doSpawn1(sp *Spawn, perr error) error {
	if perr != nil {
		return s.send1("spawn_result", "rc", "-1", "msg", msg(perr))
	}
	res, err := s.h.Spawn(s.ctx, sp)
	if err != nil {
		return s.send1("spawn_result", "rc", "-1", "msg", msg(err))
	}
	codes := errcodes(res.Errcodes, sp.Procs())
	if codes == "" || !fits1("spawn_result", "rc", "0", "errcodes", codes) {
		return s.send1("spawn_result", "rc", "0")
	}
	return s.send1("spawn_result", "rc", "0", "errcodes", codes)
}

// errcodes lists per-process codes, "" when all are zero (the client then
// assumes zeros) or when the count does not match (the client asserts).
func errcodes(codes []int, n int) string {
	if len(codes) != n {
		return ""
	}
	any := false
	parts := make([]string, n)
	for i, c := range codes {
		parts[i] = strconv.Itoa(c)
		any = any || c != 0
	}
	if !any {
		return ""
	}
	return strings.Join(parts, ",")
}

// ---- PMI-2 ----------------------------------------------------------------

func (s *server) serve2() error {
	for {
		p, err := ReadFrame(s.r)
		if err != nil {
			return err
		}
		if s.trace != nil {
			s.trace(true, p)
		}
		c, err := ParseFrame(p)
		if err != nil {
			if err := s.send2(nil, "error", "rc", "-1", "errmsg", err.Error()); err != nil {
				return err
			}
			continue
		}
		if err := s.do2(&c); err != nil {
			return err
		}
	}
}

// send2 writes a PMI-2 reply, echoing the request's thrid.
func (s *server) send2(req *Command, cmd string, kv ...string) error {
	if req != nil {
		if t, ok := req.Get("thrid"); ok {
			kv = append(kv, "thrid", t)
		}
	}
	b, err := AppendFrame(s.out[:0], cmd, kv...)
	if err != nil {
		return err
	}
	s.out = b
	return s.write(b)
}

// refuseSpawn2 answers a spawn that failed, or some of whose processes
// could not start, in the only form MPICH 4.0.x's PMI-2 client notices:
// without rc (it ignores rc, errcodes and nerrs of spawn-response and
// would wait for the children in MPI_Comm_accept forever; a reply
// without rc fails PMI2_Job_Spawn, so MPI_Comm_spawn returns an error).
func (s *server) refuseSpawn2(c *Command, err error) error {
	return s.send2(c, "spawn-response", "errmsg", err.Error())
}

// fail2 answers a request with rc=-1.
func (s *server) fail2(c *Command, err error) error {
	return s.send2(c, c.Cmd+"-response", "rc", "-1", "errmsg", err.Error())
}

func (s *server) do2(c *Command) error {
	if c.Cmd == "fullinit" {
		return s.fullinit(c)
	}
	if s.h == nil || !s.res.Started {
		if err := s.fail2(c, wire.Errorf(wire.ErrState, "pmi: %s before fullinit", clip([]byte(c.Cmd)))); err != nil {
			return err
		}
		return wire.Errorf(wire.ErrState, "pmi: %s before fullinit", clip([]byte(c.Cmd)))
	}
	p := s.h.Proc()
	resp := c.Cmd + "-response"
	switch c.Cmd {
	case "job-getid":
		return s.send2(c, resp, "jobid", p.KVS, "rc", "0")
	case "kvs-put":
		key, okK := c.Get("key")
		val, okV := c.Get("value")
		switch {
		case !okK || key == "" || !okV:
			return s.fail2(c, wire.Errorf(wire.ErrInvalid, "pmi: kvs-put without key or value"))
		case len(key) > MaxKey2 || len(val) > MaxValue2:
			return s.fail2(c, wire.Errorf(wire.ErrTooLarge, "pmi: kvs-put of a key or value over %d/%d bytes", MaxKey2, MaxValue2))
		}
		if err := s.h.Put(key, val); err != nil {
			return s.fail2(c, err)
		}
		return s.send2(c, resp, "rc", "0")
	case "kvs-get":
		key, _ := c.Get("key")
		job, _ := c.Get("jobid")
		if key != "" && (job == "" || job == p.KVS) {
			if v, ok := s.lookupKey(key); ok && len(v) <= MaxValue2 {
				return s.send2(c, resp, "found", "TRUE", "value", v, "rc", "0")
			}
		}
		return s.send2(c, resp, "found", "FALSE", "rc", "0")
	case "kvs-fence":
		if err := s.h.Fence(s.ctx); err != nil {
			return s.fail2(c, err)
		}
		return s.send2(c, resp, "rc", "0")
	case "info-putnodeattr":
		key, okK := c.Get("key")
		val, okV := c.Get("value")
		if !okK || key == "" || !okV {
			return s.fail2(c, wire.Errorf(wire.ErrInvalid, "pmi: info-putnodeattr without key or value"))
		}
		if err := s.h.PutNodeAttr(key, val); err != nil {
			return s.fail2(c, err)
		}
		return s.send2(c, resp, "rc", "0")
	case "info-getnodeattr":
		key, _ := c.Get("key")
		wait, _ := c.Bool("wait")
		v, ok, err := s.h.GetNodeAttr(s.ctx, key, wait)
		switch {
		case err != nil:
			return s.fail2(c, err)
		case ok:
			return s.send2(c, resp, "found", "TRUE", "value", v, "rc", "0")
		}
		return s.send2(c, resp, "found", "FALSE", "rc", "0")
	case "info-getjobattr":
		key, _ := c.Get("key")
		v, ok := "", false
		switch key {
		case KeyMapping:
			v = s.h.Mapping()
			ok = v != "" && len(v) < MaxValue2
		case KeyUniv2:
			if p.Universe > 0 {
				v, ok = strconv.Itoa(p.Universe), true
			}
		case KeyDead:
			v, ok = s.h.Dead(), true
		}
		if ok {
			return s.send2(c, resp, "found", "TRUE", "value", v, "rc", "0")
		}
		return s.send2(c, resp, "found", "FALSE", "rc", "0")
	case "name-publish":
		name, _ := c.Get("name")
		port, _ := c.Get("port")
		err := s.h.Publish(s.ctx, name, port)
		switch {
		case err == nil:
			return s.send2(c, resp, "rc", "0")
		case errors.Is(err, wire.ErrExists):
			return s.send2(c, resp, "rc", "1", "errmsg", "duplicate_service_"+name)
		}
		return s.send2(c, resp, "rc", "1", "errmsg", err.Error())
	case "name-unpublish":
		name, _ := c.Get("name")
		err := s.h.Unpublish(s.ctx, name)
		switch {
		case err == nil:
			return s.send2(c, resp, "rc", "0")
		case errors.Is(err, wire.ErrNotFound):
			return s.send2(c, resp, "rc", "1", "errmsg", "service_"+name+"_not_found")
		}
		return s.send2(c, resp, "rc", "1", "errmsg", err.Error())
	case "name-lookup":
		name, _ := c.Get("name")
		port, err := s.h.Lookup(s.ctx, name)
		if err != nil {
			return s.send2(c, resp, "found", "FALSE", "rc", "1")
		}
		return s.send2(c, resp, "port", port, "found", "TRUE", "rc", "0")
	case "spawn":
		sp, err := ParseSpawn2(c)
		if err != nil {
			return s.refuseSpawn2(c, err)
		}
		res, err := s.h.Spawn(s.ctx, sp)
		if err != nil {
			return s.refuseSpawn2(c, err)
		}
		nerrs := 0
		for _, e := range res.Errcodes {
			if e != 0 {
				nerrs++
			}
		}
		if nerrs > 0 {
			return s.refuseSpawn2(c, fmt.Errorf("%d of the %d spawned processes could not start (exit codes %s)", nerrs, sp.Procs(), errcodes(res.Errcodes, sp.Procs())))
		}
		return s.send2(c, "spawn-response", "rc", "0", "jobid", res.KVS, "nerrs", "0")
	case "finalize":
		s.res.Finalized = true
		if err := s.send2(c, resp, "rc", "0"); err != nil {
			return err
		}
		return io.EOF
	case "abort":
		m, _ := c.Get("msg")
		s.res.Aborted = true
		// No code on the wire: 255, the status of the client's own
		// exit(-1) right after, and mpiexec.hydra's (4.0.2 does not know
		// the command and fails). No reply: the client is gone.
		return s.h.Abort(s.ctx, 255, m)
	}
	return s.fail2(c, wire.Errorf(wire.ErrUnsupported, "pmi: unknown command %s", clip([]byte(c.Cmd))))
}

func (s *server) fullinit(c *Command) error {
	rank, okR := c.Int("pmirank")
	if s.h == nil {
		if s.bind == nil || !okR {
			err := wire.Errorf(wire.ErrState, "pmi: fullinit cannot identify the process")
			_ = s.fail2(c, err)
			return err
		}
		h, err := s.bind(rank)
		if err != nil {
			_ = s.fail2(c, err)
			return err
		}
		s.h = h
	} else if okR && rank != s.h.Proc().Rank {
		err := wire.Errorf(wire.ErrPermission, "pmi: fullinit for rank %d on the connection of rank %d", rank, s.h.Proc().Rank)
		_ = s.fail2(c, err)
		return err
	}
	s.start(2)
	p := s.h.Proc()
	kv := []string{
		"pmi-version", "2", "pmi-subversion", "0", "rank", strconv.Itoa(p.Rank), "size", strconv.Itoa(p.Size),
		"appnum", strconv.Itoa(p.Appnum),
	}
	if p.Parent != "" {
		kv = append(kv, "spawner-jobid", p.Parent)
	}
	kv = append(kv, "debugged", "FALSE", "pmiverbose", "FALSE", "rc", "0")
	return s.send2(c, "fullinit-response", kv...)
}

// Detect tells which protocol a connection speaks from its first bytes:
// 1 for PMI-1 lines (`cmd=` or `mcmd=`), 2 for PMI-2 frames, 0 when fewer
// than 4 bytes are given.
func Detect(head []byte) int {
	if len(head) < 4 {
		return 0
	}
	if bytes.HasPrefix(head, []byte("cmd=")) || bytes.HasPrefix(head, []byte("mcmd")) {
		return 1
	}
	return 2
}
