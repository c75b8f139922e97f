package daemon

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/lib/pmi"
	"github.com/dynrt/dynrt/lib/proc"
	"github.com/dynrt/dynrt/wire"
)

// The PMI service (docs/mpi.md): MPI programs built against MPICH find
// their process manager through PMI_FD (one end of a socketpair per
// process, like Hydra) or PMI_PORT + PMI_ID (a TCP listener of this
// daemon), and speak PMI-1 or PMI-2 to it (lib/pmi does the protocol).
// This file ties sessions to processes: it prepares a process's
// environment and descriptors before the fork (pmiAttach), starts serving
// after it (started), and settles the session when the process has
// exited (pmiExited), which is where a process that left PMI without
// finalize fails its job. pmi_job.go holds the per-job data: key-value
// space, barriers, node attributes, process mapping.

// pmiExitWait bounds how long the exit of a process waits for its PMI
// connection to reach EOF (a descendant outside its process group may
// hold the descriptor open).
const pmiExitWait = time.Second

// pmiService is the daemon's PMI state. Lock order: pmiService.mu, then
// pmiJob.mu, then pmiProc.mu; never d.mu while holding any of them.
type pmiService struct {
	d *Daemon

	mu    sync.Mutex
	jobs  map[string]*pmiJob
	procs map[procKey]*pmiProc
	byID  map[int]*pmiProc // PMI_PORT mode: by PMI_ID
	ln    net.Listener     // PMI_PORT mode, open while such a process lives
}

func newPMIService(d *Daemon) *pmiService {
	return &pmiService{d: d, jobs: map[string]*pmiJob{}, procs: map[procKey]*pmiProc{}, byID: map[int]*pmiProc{}}
}

// pmiProc is the PMI side of one process; it is the pmi.Handler of its
// session.
type pmiProc struct {
	job    *pmiJob
	key    procKey
	appnum int
	id     int      // PMI_ID in port mode, else 0
	child  *os.File // fd mode: the child's end until the fork is done
	conn   net.Conn // the session's connection (fd mode: from the start)
	ended  chan struct{}

	mu       sync.Mutex
	p        Process
	bound    bool   // a session runs or ran (fd mode: from the start)
	stop     func() // ends the session (set with bound)
	res      pmi.Result
	err      error
	reported bool // the job was told this process left PMI early
}

// pmiAttach prepares the start of one rank: it removes inherited PMI
// variables from the environment and, for a job with the PMI service,
// sets the rank's program (multi-executable jobs), the PMI variables and
// the socketpair. It returns nil when the job has no PMI service.
func (d *Daemon) pmiAttach(b *wire.LaunchReq, rank uint32, spec *proc.Spec) (*pmiProc, error) {
	spec.Env = withoutPMIEnv(spec.Env)
	if b.PMI == nil || d.pmi == nil || b.PMI.Mode == wire.PMIPMIx {
		return nil, nil
	}
	svc := d.pmi
	job := svc.job(b)
	pp := &pmiProc{job: job, key: procKey{b.Job, rank}, ended: make(chan struct{})}
	pp.appnum = applyBlock(b.PMI, rank, spec)
	local, idx := job.localRanks(rank)
	env := append(spec.Env,
		"PMI_RANK="+strconv.FormatUint(uint64(rank), 10),
		"PMI_SIZE="+strconv.Itoa(job.size),
		"MPI_LOCALNRANKS="+strconv.Itoa(local),
		"MPI_LOCALRANKID="+strconv.Itoa(idx))
	if job.spec.Parent != "" {
		env = append(env, "PMI_SPAWNED=1")
	}
	switch job.spec.Mode {
	case wire.PMIPort:
		addr, id, err := svc.listen(pp)
		if err != nil {
			job.leave(rank)
			return nil, err
		}
		pp.id = id
		env = append(env, "PMI_PORT="+addr, "PMI_ID="+strconv.Itoa(id))
	default:
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			job.leave(rank)
			return nil, wire.Errorf(wire.ErrNoResources, "daemon %s: PMI socketpair for rank %d of %s: %v", d.node, rank, b.Job, err)
		}
		// Our end goes to the runtime poller; the child's end becomes an
		// inherited descriptor (lib/proc dup2s it, which clears CLOEXEC).
		if err := syscall.SetNonblock(fds[0], true); err != nil {
			syscall.Close(fds[0])
			syscall.Close(fds[1])
			job.leave(rank)
			return nil, wire.Errorf(wire.ErrInternal, "daemon %s: PMI socket: %v", d.node, err)
		}
		ours := os.NewFile(uintptr(fds[0]), "pmi")
		conn, err := net.FileConn(ours)
		ours.Close()
		if err != nil {
			syscall.Close(fds[1])
			job.leave(rank)
			return nil, wire.Errorf(wire.ErrInternal, "daemon %s: PMI socket: %v", d.node, err)
		}
		pp.conn, pp.bound = conn, true
		pp.child = os.NewFile(uintptr(fds[1]), "pmi-child")
		env = append(env, "PMI_FD="+strconv.Itoa(3+len(spec.ExtraFiles)))
		spec.ExtraFiles = append(spec.ExtraFiles, pp.child)
	}
	spec.Env = env
	svc.mu.Lock()
	svc.procs[pp.key] = pp
	svc.mu.Unlock()
	return pp, nil
}

// started is called once the fork is done (err != nil: it failed). It is
// a no-op on nil.
func (pp *pmiProc) started(p Process, err error) {
	if pp == nil {
		return
	}
	fdMode := pp.child != nil
	if pp.child != nil {
		pp.child.Close()
		pp.child = nil
	}
	if err != nil {
		pp.release()
		if pp.conn != nil {
			pp.conn.Close()
		}
		return
	}
	pp.mu.Lock()
	pp.p = p
	c := pp.conn
	if !fdMode {
		// PMI_PORT: servePort runs the session, and a fast process may
		// have connected (setting conn) before we got here.
		c = nil
	}
	var ctx context.Context
	if c != nil {
		ctx, pp.stop = sessionContext(c)
	}
	pp.mu.Unlock()
	if c != nil {
		go func() {
			res, err := pmi.Serve(ctx, c, pmi.Config{Handler: pp, Trace: pp.job.svc.tracer(pp.key.String())})
			pp.finish(res, err)
		}()
	}
}

// sessionContext returns the context of a session on c and the function
// that ends it: it cancels waits (barrier, node attribute) and closes c.
func sessionContext(c net.Conn) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	return ctx, func() {
		cancel()
		c.Close()
	}
}

// finish settles a session that has ended.
func (pp *pmiProc) finish(res pmi.Result, err error) {
	pp.mu.Lock()
	pp.stop()
	pp.res, pp.err = res, err
	p := pp.p
	pp.mu.Unlock()
	close(pp.ended)
	if err != nil {
		pp.job.svc.d.log.Info("daemon: PMI session failed", "proc", pp.key.String(), "err", err)
	}
	if !unfinished(res) {
		return
	}
	if pp.job.spec.KeepGoing {
		// Hydra's -disable-auto-cleanup: the process counts as dead as
		// soon as its PMI connection ends, and its peers are told now.
		pp.reportUnfinished("left PMI without finalize")
		return
	}
	// A process that closed its PMI connection early but lives on would
	// leave its peers waiting in a barrier: after a grace period, fail the
	// job now rather than at its exit.
	if p != nil {
		select {
		case <-p.Done():
			return // pmiExited settles it
		case <-time.After(pmiExitWait):
		}
	}
	pp.reportUnfinished("closed its PMI connection without finalize")
}

// unfinished says whether a session began PMI and ended without
// finalize or abort.
func unfinished(res pmi.Result) bool { return res.Started && !res.Finalized && !res.Aborted }

// pmiExited settles the PMI session of a process that has exited, before
// its exit is reported: a process that ended with status 0 but began PMI
// without finalizing fails its job (like Hydra), and the report reaches
// the master before the exit does.
func (d *Daemon) pmiExited(key procKey, st proc.ExitStatus) {
	if d.pmi == nil {
		return
	}
	svc := d.pmi
	svc.mu.Lock()
	pp := svc.procs[key]
	delete(svc.procs, key)
	svc.mu.Unlock()
	if pp == nil {
		return
	}
	pp.mu.Lock()
	bound, stop := pp.bound, pp.stop
	pp.mu.Unlock()
	if bound {
		select {
		case <-pp.ended:
		case <-time.After(pmiExitWait):
			stop()
			<-pp.ended
		}
	}
	pp.mu.Lock()
	res := pp.res
	pp.mu.Unlock()
	if unfinished(res) && st.Success() {
		pp.reportUnfinished("exited without finalizing PMI (MPI_Finalize was not called, or the PMI connection was closed)")
	}
	pp.release()
}

// reportUnfinished tells the master once that the process left PMI early.
func (pp *pmiProc) reportUnfinished(why string) {
	pp.mu.Lock()
	done := pp.reported
	pp.reported = true
	pp.mu.Unlock()
	if done {
		return
	}
	pp.job.svc.report(pp.key, wire.PMIReportUnfinished, why)
}

// report sends a PMIReport and waits for the master to take it.
func (svc *pmiService) report(key procKey, what, msg string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := svc.d.master.Call(ctx, wire.KindPMIReport, &wire.PMIReport{Job: key.job, Rank: key.rank, What: what, Msg: msg}, nil)
	if err != nil {
		svc.d.log.Warn("daemon: PMI report failed", "proc", key.String(), "what", what, "err", err)
	}
}

// release forgets the process: its rank leaves the job's local set (a
// barrier waiting only for it can then go on and fail at the master), and
// its PMI_ID is freed.
func (pp *pmiProc) release() {
	svc := pp.job.svc
	svc.mu.Lock()
	if svc.procs[pp.key] == pp {
		delete(svc.procs, pp.key)
	}
	if pp.id != 0 {
		delete(svc.byID, pp.id)
		if len(svc.byID) == 0 && svc.ln != nil {
			svc.ln.Close()
			svc.ln = nil
		}
	}
	svc.mu.Unlock()
	pp.job.leave(pp.key.rank)
}

// tracer logs PMI traffic at debug level (DYNRT_LOG=debug), nil otherwise.
func (svc *pmiService) tracer(who string) func(bool, []byte) {
	log := svc.d.log
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		return nil
	}
	return func(in bool, msg []byte) {
		dir := "pmi <-"
		if !in {
			dir = "pmi ->"
		}
		log.Debug(dir, "proc", who, "msg", string(msg))
	}
}

// ---- PMI_PORT mode ---------------------------------------------------------

// listen registers pp under a fresh PMI_ID and returns the address of
// the daemon's PMI listener, opening it if needed. MPICH's client reads
// PMI_ID with atoi and sends it back as an int, so an id has at most 31
// bits: too few to be a secret against a patient local user. The id only
// tells which process a connection is; who may connect at all is decided
// by the uid owning the client's socket (servePort). Ids are random
// (crypto/rand) and bind a single connection.
func (svc *pmiService) listen(pp *pmiProc) (string, int, error) {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if svc.ln == nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", 0, wire.Errorf(wire.ErrNoResources, "daemon %s: PMI listener: %v", svc.d.node, err)
		}
		svc.ln = ln
		go svc.accept(ln)
	}
	id := 0
	for id == 0 || svc.byID[id] != nil {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", 0, wire.Errorf(wire.ErrInternal, "daemon %s: PMI_ID: %v", svc.d.node, err)
		}
		id = int(binary.BigEndian.Uint32(b[:]) & (1<<31 - 1))
	}
	svc.byID[id] = pp
	return svc.ln.Addr().String(), id, nil
}

func (svc *pmiService) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go svc.servePort(c)
	}
}

// servePort runs a connection that names its process by PMI_ID (PMI-1
// initack, PMI-2 fullinit); from then on the session is that process's.
// Only connections from sockets owned by the daemon's own uid are served:
// another local user could otherwise try ids until one binds and then
// spawn processes as the DVM's owner.
func (svc *pmiService) servePort(c net.Conn) {
	if uid, err := loopbackPeerUID(c); err != nil || uid != os.Getuid() {
		why := fmt.Sprintf("its socket belongs to uid %d, not to the DVM's owner (uid %d)", uid, os.Getuid())
		if err != nil {
			why = "cannot tell who owns its socket: " + err.Error()
		}
		svc.d.log.Warn("daemon: PMI_PORT connection refused: "+why, "node", svc.d.node, "peer", c.RemoteAddr().String())
		c.Close()
		return
	}
	ctx, stop := sessionContext(c)
	var pp *pmiProc
	bind := func(id int) (pmi.Handler, error) {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		q := svc.byID[id]
		if q == nil {
			return nil, wire.Errorf(wire.ErrNotFound, "daemon %s: no process has PMI_ID %d", svc.d.node, id)
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.bound {
			return nil, wire.Errorf(wire.ErrExists, "daemon %s: PMI_ID %d is already connected", svc.d.node, id)
		}
		q.bound, q.conn, q.stop = true, c, stop
		pp = q
		return q, nil
	}
	res, err := pmi.Serve(ctx, c, pmi.Config{Bind: bind, Trace: svc.tracer("PMI_PORT " + c.RemoteAddr().String())})
	svc.mu.Lock()
	q := pp
	svc.mu.Unlock()
	if q == nil {
		stop()
		if err != nil {
			svc.d.log.Info("daemon: PMI connection without a valid PMI_ID", "err", err)
		}
		return
	}
	q.finish(res, err)
}

// Proc, Started, ... : pmiProc implements pmi.Handler.

func (pp *pmiProc) Proc() pmi.Proc {
	j := pp.job
	return pmi.Proc{
		Rank: int(pp.key.rank), Size: j.size, Appnum: pp.appnum, KVS: j.spec.KVS, Parent: j.spec.Parent,
		Universe: j.spec.Universe,
	}
}

func (pp *pmiProc) Started(int) { pp.job.started() }

func (pp *pmiProc) Mapping() string { return pp.job.mapping() }

func (pp *pmiProc) Dead() string { return pp.job.deadList() }

func (pp *pmiProc) Put(key, value string) error {
	pp.job.put(pp.key.rank, key, value)
	return nil
}

func (pp *pmiProc) Get(key string) (string, bool) { return pp.job.get(key) }

func (pp *pmiProc) Fence(ctx context.Context) error { return pp.job.fence(ctx, pp.key.rank) }

func (pp *pmiProc) PutNodeAttr(key, value string) error {
	pp.job.putAttr(key, value)
	return nil
}

func (pp *pmiProc) GetNodeAttr(ctx context.Context, key string, wait bool) (string, bool, error) {
	return pp.job.getAttr(ctx, key, wait)
}

func (pp *pmiProc) Publish(ctx context.Context, service, port string) error {
	if service == "" {
		return wire.Errorf(wire.ErrInvalid, "daemon: publish of an empty service name")
	}
	err := pp.job.svc.d.master.Call(ctx, wire.KindPublish, &wire.PublishReq{
		Job: pp.key.job, Rank: pp.key.rank, Range: wire.RangeDVM, Data: []wire.KV{{Key: service, Value: []byte(port)}},
	}, nil)
	if err == nil {
		pp.job.addPublished(service, pp.key.rank)
	}
	return err
}

func (pp *pmiProc) Lookup(ctx context.Context, service string) (string, error) {
	if service == "" {
		return "", wire.Errorf(wire.ErrNotFound, "daemon: lookup of an empty service name")
	}
	var rep wire.LookupReply
	err := pp.job.svc.d.master.Call(ctx, wire.KindLookup, &wire.LookupReq{
		Job: pp.key.job, Rank: pp.key.rank, Range: wire.RangeDVM, Keys: []string{service},
	}, &rep)
	if err != nil {
		return "", err
	}
	for _, kv := range rep.Data {
		if kv.Key == service {
			return string(kv.Value), nil
		}
	}
	return "", wire.Errorf(wire.ErrNotFound, "daemon: service %q not published", service)
}

func (pp *pmiProc) Unpublish(ctx context.Context, service string) error {
	if service == "" {
		return wire.Errorf(wire.ErrNotFound, "daemon: unpublish of an empty service name")
	}
	owner := pp.job.publisher(service, pp.key.rank)
	err := pp.job.svc.d.master.Call(ctx, wire.KindUnpublish, &wire.UnpublishReq{
		Job: pp.key.job, Rank: owner, Range: wire.RangeDVM, Keys: []string{service},
	}, nil)
	if err == nil {
		pp.job.unpublished(service)
	}
	return err
}

func (pp *pmiProc) Spawn(ctx context.Context, s *pmi.Spawn) (*pmi.SpawnResult, error) {
	req := &wire.PMISpawnReq{Job: pp.key.job, Rank: pp.key.rank}
	for _, a := range s.Apps {
		app := wire.PMISpawnApp{Argv: append([]string{a.Cmd}, a.Args...), N: uint32(a.MaxProcs)}
		for _, kv := range a.Info {
			app.Info = append(app.Info, wire.KV{Key: kv.Key, Value: []byte(kv.Value)})
		}
		req.Apps = append(req.Apps, app)
	}
	for _, kv := range s.Preput {
		req.Preput = append(req.Preput, wire.KV{Key: kv.Key, Value: []byte(kv.Value)})
	}
	var rep wire.PMISpawnReply
	if err := pp.job.svc.d.master.Call(ctx, wire.KindPMISpawn, req, &rep); err != nil {
		return nil, err
	}
	return &pmi.SpawnResult{KVS: rep.KVS, Errcodes: rep.Codes}, nil
}

func (pp *pmiProc) Abort(ctx context.Context, code int, msg string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := pp.job.svc.d.master.Call(ctx, wire.KindSessionAbort, &wire.AbortReq{
		Job: pp.key.job, Rank: pp.key.rank, Status: code, Msg: strings.TrimSpace(msg),
	}, nil)
	if err != nil && !errors.Is(err, wire.ErrState) {
		return err
	}
	return nil
}

// withoutPMIEnv drops inherited PMI variables (dynrun may itself run
// under a process manager; its descriptors do not reach our processes).
func withoutPMIEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, "PMI_") || strings.HasPrefix(kv, "MPI_LOCAL") {
			k, _, _ := strings.Cut(kv, "=")
			if isPMIVar(k) {
				continue
			}
		}
		out = append(out, kv)
	}
	return out
}

func isPMIVar(k string) bool {
	for _, v := range pmiEnvVars {
		if k == v {
			return true
		}
	}
	return false
}
