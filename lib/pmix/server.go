//go:build pmix

package pmix

// #cgo pkg-config: pmix
// #cgo CFLAGS: -Wall -Wextra
// #include "glue.h"
// #include "shift.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/cgo"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// Available reports whether this build hosts a PMIx server.
func Available() bool { return true }

// Version is the PMIx library's version string.
func Version() string { return C.GoString(C.PMIx_Get_version()) }

// Server is the process's PMIx server (see the package comment).
type Server struct {
	mu       sync.Mutex
	jobs     map[string]Handler // by namespace
	inflight map[string]int     // host operations under way, by namespace
	idle     *sync.Cond         // signalled when an operation ends (on mu)
	self     Proc               // the server's own name, the source of its events
}

// the is the process's one server: libpmix keeps its server state in
// globals and allows one server per process. It cannot start again after
// PMIx_server_finalize either (4.2.2's listener thread then works on the
// closed socket and aborts the process), so the server lives until
// Finalize, at the end of the process.
var the struct {
	mu        sync.Mutex
	srv       *Server
	finalized bool
}

// Start initialises the process's PMIx server with cfg, or returns the
// running one (cfg is then ignored).
func Start(cfg Config) (*Server, error) {
	the.mu.Lock()
	defer the.mu.Unlock()
	if the.finalized {
		return nil, errors.New("pmix: the PMIx server of this process was finalized, and libpmix cannot start another one in the same process")
	}
	if the.srv != nil {
		return the.srv, nil
	}
	if cfg.Dir == "" {
		return nil, errors.New("pmix: no server directory")
	}
	if cfg.Nspace == "" {
		cfg.Nspace = "dynrt-server"
	}
	dir, ns := C.CString(cfg.Dir), C.CString(cfg.Nspace)
	defer C.free(unsafe.Pointer(dir))
	defer C.free(unsafe.Pointer(ns))
	if rc := C.dyn_server_init(dir, ns, C.uint32_t(cfg.Rank)); rc != C.PMIX_SUCCESS {
		return nil, fmt.Errorf("pmix: PMIx_server_init (directory %s): %w", cfg.Dir, status(rc))
	}
	the.srv = &Server{jobs: map[string]Handler{}, inflight: map[string]int{}, self: Proc{Nspace: cfg.Nspace, Rank: cfg.Rank}}
	the.srv.idle = sync.NewCond(&the.srv.mu)
	return the.srv, nil
}

// Finalize stops the process's PMIx server, if it runs, and removes its
// files: once, at the end of the process (no Start succeeds afterwards).
func Finalize() error {
	the.mu.Lock()
	defer the.mu.Unlock()
	if the.finalized {
		return nil
	}
	if the.srv == nil {
		the.finalized = true // never started: nothing to stop, and none later
		return nil
	}
	s := the.srv
	s.mu.Lock()
	busy := len(s.jobs) + len(s.inflight)
	s.mu.Unlock()
	if busy > 0 {
		// libpmix would still call back into jobs or complete their
		// operations: finalizing under them crashes it. The process is
		// ending; its daemon removed the server's directory.
		return fmt.Errorf("pmix: server not finalized: %d jobs or host operations remain", busy)
	}
	the.srv, the.finalized = nil, true
	if rc := C.PMIx_server_finalize(); rc != C.PMIX_SUCCESS {
		return fmt.Errorf("pmix: PMIx_server_finalize: %w", status(rc))
	}
	return nil
}

// status turns a PMIx status into an error (nil for success).
func status(rc C.pmix_status_t) error {
	if rc == C.PMIX_SUCCESS || rc == C.PMIX_OPERATION_SUCCEEDED {
		return nil
	}
	return &StatusError{Status: int(rc), Msg: C.GoString(C.PMIx_Error_string(rc))}
}

// code turns an error of a Handler into a PMIx status.
func code(err error) C.pmix_status_t {
	if err == nil {
		return C.PMIX_SUCCESS
	}
	var se *StatusError
	if errors.As(err, &se) {
		return C.pmix_status_t(se.Status)
	}
	return C.PMIX_ERROR
}

// call runs one asynchronous server operation: start is given a handle
// for the completion (dynGoOpDone) and returns the call's own status.
func call(start func(h C.uintptr_t) (C.pmix_status_t, bool)) error {
	ch := make(chan C.pmix_status_t, 1)
	h := cgo.NewHandle(ch)
	defer h.Delete()
	rc, async := start(C.uintptr_t(h))
	if async {
		if rc != C.PMIX_SUCCESS {
			return status(rc)
		}
		rc = <-ch
	}
	return status(rc)
}

//export dynGoOpDone
func dynGoOpDone(h C.uintptr_t, st C.pmix_status_t) {
	cgo.Handle(h).Value().(chan C.pmix_status_t) <- st
}

// modexReply is the answer to a direct modex request.
type modexReply struct {
	st   C.pmix_status_t
	data []byte
}

//export dynGoModexDone
func dynGoModexDone(h C.uintptr_t, st C.pmix_status_t, data *C.char, n C.size_t) {
	r := modexReply{st: st}
	if data != nil && n > 0 {
		r.data = C.GoBytes(unsafe.Pointer(data), C.int(n))
	}
	cgo.Handle(h).Value().(chan modexReply) <- r
}

// RegisterJob registers job's namespace with everything its processes
// read at PMIx_Init, and routes the callbacks of its processes to h. Its
// local processes are registered one by one with RegisterClient.
func (s *Server) RegisterJob(job *Job, h Handler) error {
	if err := job.validate(); err != nil {
		return err
	}
	info, err := jobInfo(job)
	if err != nil {
		return err
	}
	defer C.PMIx_Data_array_destruct(&info)
	s.mu.Lock()
	if _, dup := s.jobs[job.Nspace]; dup {
		s.mu.Unlock()
		return fmt.Errorf("pmix: namespace %s registered twice", job.Nspace)
	}
	s.jobs[job.Nspace] = h
	s.mu.Unlock()
	ns := C.CString(job.Nspace)
	defer C.free(unsafe.Pointer(ns))
	nlocal := C.int(len(job.LocalRanks()))
	err = call(func(hd C.uintptr_t) (C.pmix_status_t, bool) {
		return C.dyn_register_nspace(ns, nlocal, (*C.pmix_info_t)(info.array), info.size, hd), true
	})
	if err != nil {
		s.mu.Lock()
		delete(s.jobs, job.Nspace)
		s.mu.Unlock()
		return fmt.Errorf("pmix: register namespace %s: %w", job.Nspace, err)
	}
	return nil
}

// DeregisterJob forgets a namespace (and its clients) once its local
// processes have ended. Its Handler gets no more calls, and the calls
// under way must complete first (DeregisterJob waits for them): a
// Handler stops what it waits for before.
func (s *Server) DeregisterJob(nspace string) {
	s.mu.Lock()
	delete(s.jobs, nspace)
	for s.inflight[nspace] > 0 {
		s.idle.Wait()
	}
	s.mu.Unlock()
	ns := C.CString(nspace)
	defer C.free(unsafe.Pointer(ns))
	_ = call(func(h C.uintptr_t) (C.pmix_status_t, bool) {
		C.dyn_deregister_nspace(ns, h)
		return C.PMIX_SUCCESS, true
	})
}

// RegisterClient registers a local process of a registered job before
// it is forked; uid and gid are the ones it runs with (PMIx checks them
// when it connects).
func (s *Server) RegisterClient(p Proc, uid, gid int) error {
	ns := C.CString(p.Nspace)
	defer C.free(unsafe.Pointer(ns))
	err := call(func(h C.uintptr_t) (C.pmix_status_t, bool) {
		return C.dyn_register_client(ns, C.uint32_t(p.Rank), C.uint32_t(uid), C.uint32_t(gid), h), true
	})
	if err != nil {
		return fmt.Errorf("pmix: register client %s: %w", p, err)
	}
	return nil
}

// DeregisterClient forgets a local process after it ended.
func (s *Server) DeregisterClient(p Proc) {
	ns := C.CString(p.Nspace)
	defer C.free(unsafe.Pointer(ns))
	_ = call(func(h C.uintptr_t) (C.pmix_status_t, bool) {
		C.dyn_deregister_client(ns, C.uint32_t(p.Rank), h)
		return C.PMIX_SUCCESS, true
	})
}

// SetupFork returns the environment variables ("KEY=value") that a
// registered client needs to reach this server.
func (s *Server) SetupFork(p Proc) ([]string, error) {
	var cp C.pmix_proc_t
	loadProc(&cp, p)
	var env **C.char
	if rc := C.PMIx_server_setup_fork(&cp, &env); rc != C.PMIX_SUCCESS {
		return nil, fmt.Errorf("pmix: setup fork of %s: %w", p, status(rc))
	}
	defer C.dyn_argv_free(env)
	return goStrings(env), nil
}

// DirectModexRequest returns the data a local process p has committed,
// for another server's direct modex (Handler.DirectModex there). It
// waits until p has committed it, or ctx ends.
func (s *Server) DirectModexRequest(ctx context.Context, p Proc) ([]byte, error) {
	ns := C.CString(p.Nspace)
	defer C.free(unsafe.Pointer(ns))
	ch := make(chan modexReply, 1)
	h := cgo.NewHandle(ch)
	if rc := C.dyn_dmodex_request(ns, C.uint32_t(p.Rank), C.uintptr_t(h)); rc != C.PMIX_SUCCESS {
		h.Delete()
		return nil, fmt.Errorf("pmix: direct modex of %s: %w", p, status(rc))
	}
	select {
	case r := <-ch:
		h.Delete()
		if err := status(r.st); err != nil {
			return nil, fmt.Errorf("pmix: direct modex of %s: %w", p, err)
		}
		return r.data, nil
	case <-ctx.Done():
		// libpmix still owns the request: the handle lives until its
		// answer comes (at the latest when p's namespace goes).
		go func() {
			<-ch
			h.Delete()
		}()
		return nil, fmt.Errorf("pmix: direct modex of %s: %w", p, ctx.Err())
	}
}

func loadProc(cp *C.pmix_proc_t, p Proc) {
	ns := unsafe.Slice((*byte)(unsafe.Pointer(&cp.nspace[0])), len(cp.nspace))
	clear(ns)
	copy(ns[:len(ns)-1], p.Nspace)
	cp.rank = C.pmix_rank_t(p.Rank)
}

func goProc(cp *C.pmix_proc_t) Proc {
	return Proc{Nspace: C.GoString(&cp.nspace[0]), Rank: uint32(cp.rank)}
}

// begin starts a host operation of namespace ns: it returns the
// namespace's Handler and the function that marks the operation ended
// (once; DeregisterJob waits for it), or nil for an unknown namespace.
func begin(ns string) (Handler, func()) {
	the.mu.Lock()
	s := the.srv
	the.mu.Unlock()
	if s == nil {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.jobs[ns]
	if h == nil {
		return nil, nil
	}
	s.inflight[ns]++
	var once sync.Once
	return h, func() {
		once.Do(func() {
			s.mu.Lock()
			if s.inflight[ns]--; s.inflight[ns] <= 0 {
				delete(s.inflight, ns)
			}
			s.idle.Broadcast()
			s.mu.Unlock()
		})
	}
}

// beginAs is begin for an optional interface T of the namespace's
// Handler: ok is false (and nothing is in flight) when there is no
// handler or it does not implement T.
func beginAs[T any](ns string) (t T, end func(), ok bool) {
	h, end := begin(ns)
	if t, ok = h.(T); !ok && end != nil {
		end()
		end = nil
	}
	return t, end, ok
}

// opDone returns the completion of a callback that takes a
// pmix_op_cbfunc_t; end ends the operation after it.
func opDone(f C.pmix_op_cbfunc_t, cbdata unsafe.Pointer, end func()) func(error) {
	var once sync.Once
	return func(err error) {
		once.Do(func() {
			C.dyn_op_complete(f, code(err), cbdata)
			end()
		})
	}
}

// modexDone returns the completion of a callback that takes a
// pmix_modex_cbfunc_t; the data is copied to C memory that PMIx
// releases.
func modexDone(f C.pmix_modex_cbfunc_t, cbdata unsafe.Pointer, end func()) func([]byte, error) {
	var once sync.Once
	return func(data []byte, err error) {
		once.Do(func() {
			defer end()
			var p *C.char
			if err == nil && len(data) > 0 {
				p = (*C.char)(C.CBytes(data))
			} else {
				data = nil
			}
			C.dyn_modex_complete(f, code(err), p, C.size_t(len(data)), cbdata)
		})
	}
}

// dispatch runs fn with the Handler of namespace ns on a goroutine of
// its own, so that libpmix's progress thread goes on at once; an unknown
// namespace gets the status missing.
func dispatch(ns string, missing C.pmix_status_t, fn func(Handler, func())) C.pmix_status_t {
	h, end := begin(ns)
	if h == nil {
		return missing
	}
	go fn(h, end)
	return C.PMIX_SUCCESS
}

func cproc(ns *C.char, rank C.uint32_t) Proc {
	return Proc{Nspace: C.GoString(ns), Rank: uint32(rank)}
}

//export dynGoClientConnected
func dynGoClientConnected(ns *C.char, rank C.uint32_t, f C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	p := cproc(ns, rank)
	return dispatch(p.Nspace, C.PMIX_OPERATION_SUCCEEDED, func(h Handler, end func()) { h.ClientConnected(p, opDone(f, cbdata, end)) })
}

//export dynGoClientFinalized
func dynGoClientFinalized(ns *C.char, rank C.uint32_t, f C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	p := cproc(ns, rank)
	return dispatch(p.Nspace, C.PMIX_OPERATION_SUCCEEDED, func(h Handler, end func()) { h.ClientFinalized(p, opDone(f, cbdata, end)) })
}

func goProcs(procs *C.pmix_proc_t, n C.size_t) []Proc {
	if procs == nil || n == 0 {
		return nil
	}
	cs := unsafe.Slice(procs, n)
	out := make([]Proc, len(cs))
	for i := range cs {
		out[i] = goProc(&cs[i])
	}
	return out
}

//export dynGoAbort
func dynGoAbort(ns *C.char, rank C.uint32_t, st C.int, msg *C.char, procs *C.pmix_proc_t, n C.size_t, f C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	p := cproc(ns, rank)
	m := ""
	if msg != nil {
		m = C.GoString(msg)
	}
	ps := goProcs(procs, n)
	return dispatch(p.Nspace, C.PMIX_ERR_NOT_FOUND, func(h Handler, end func()) { h.Abort(p, int(st), m, ps, opDone(f, cbdata, end)) })
}

//export dynGoFence
func dynGoFence(procs *C.pmix_proc_t, n C.size_t, collect C.int, data *C.char, ndata C.size_t, f C.pmix_modex_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	ps := goProcs(procs, n)
	if len(ps) == 0 {
		return C.PMIX_ERR_BAD_PARAM
	}
	var blob []byte // data is libpmix's: copied here
	if data != nil && ndata > 0 {
		blob = C.GoBytes(unsafe.Pointer(data), C.int(ndata))
	}
	return dispatch(ps[0].Nspace, C.PMIX_ERR_NOT_FOUND, func(h Handler, end func()) { h.Fence(ps, collect != 0, blob, modexDone(f, cbdata, end)) })
}

//export dynGoDirectModex
func dynGoDirectModex(ns *C.char, rank C.uint32_t, f C.pmix_modex_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	p := cproc(ns, rank)
	return dispatch(p.Nspace, C.PMIX_ERR_NOT_FOUND, func(h Handler, end func()) { h.DirectModex(p, modexDone(f, cbdata, end)) })
}

// publisher starts an operation of the Publisher of namespace ns (nil
// if none; see begin).
func publisher(ns string) (Publisher, func()) {
	pub, end, ok := beginAs[Publisher](ns)
	if !ok {
		return nil, nil
	}
	return pub, end
}

// goStrings copies a NULL-terminated array of C strings.
func goStrings(keys **C.char) []string {
	var out []string
	for p := keys; p != nil && *p != nil; p = (**C.char)(unsafe.Add(unsafe.Pointer(p), unsafe.Sizeof(*p))) {
		out = append(out, C.GoString(*p))
	}
	return out
}

//export dynGoPublish
func dynGoPublish(ns *C.char, rank C.uint32_t, info *C.pmix_info_t, n C.size_t, persistence C.int, f C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	p := cproc(ns, rank)
	persist, ok := persistOf(persistence)
	if !ok {
		return C.PMIX_ERR_BAD_PARAM
	}
	data := map[string]string{}
	for i := range C.size_t(n) {
		key := C.GoString(C.dyn_info_key(info, i))
		if strings.HasPrefix(key, "pmix.") {
			continue // a directive
		}
		v, err := publishValue(info, i) // dyn.go
		if err != nil {
			return code(err)
		}
		data[key] = v
	}
	if len(data) == 0 {
		return C.PMIX_ERR_BAD_PARAM
	}
	pub, end := publisher(p.Nspace)
	if pub == nil {
		return C.PMIX_ERR_NOT_SUPPORTED
	}
	go pub.Publish(p, data, persist, opDone(f, cbdata, end))
	return C.PMIX_SUCCESS
}

// persistOf reads the persistence publish_persistence (glue.c) found;
// false for one that is not a PMIx persistence.
func persistOf(v C.int) (Persistence, bool) {
	switch v {
	case -1:
		return PersistDefault, true
	case C.PMIX_PERSIST_INDEF:
		return PersistIndef, true
	case C.PMIX_PERSIST_FIRST_READ:
		return PersistFirstRead, true
	case C.PMIX_PERSIST_PROC:
		return PersistProc, true
	case C.PMIX_PERSIST_APP:
		return PersistApp, true
	case C.PMIX_PERSIST_SESSION:
		return PersistSession, true
	}
	return PersistDefault, false
}

//export dynGoLookup
func dynGoLookup(ns *C.char, rank C.uint32_t, keys **C.char, wait C.int, f C.pmix_lookup_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	p := cproc(ns, rank)
	pub, end := publisher(p.Nspace)
	if pub == nil {
		return C.PMIX_ERR_NOT_SUPPORTED
	}
	ks := goStrings(keys)
	var once sync.Once
	done := func(found map[string]string, err error) {
		once.Do(func() {
			lookupDone(f, cbdata, p, ks, found, err)
			end()
		})
	}
	go pub.Lookup(p, ks, wait != 0, done)
	return C.PMIX_SUCCESS
}

// lookupDone answers a lookup with the values found, in the order of
// the keys asked.
func lookupDone(f C.pmix_lookup_cbfunc_t, cbdata unsafe.Pointer, p Proc, keys []string, found map[string]string, err error) {
	st := code(err)
	var ks, vs []string
	for _, k := range keys {
		if v, ok := found[k]; ok && err == nil {
			ks, vs = append(ks, k), append(vs, v)
		}
	}
	if err == nil && len(ks) == 0 {
		st = C.PMIX_ERR_NOT_FOUND
	}
	completeLookup(f, cbdata, st, p, ks, vs) // dyn.go
}

//export dynGoUnpublish
func dynGoUnpublish(ns *C.char, rank C.uint32_t, keys **C.char, f C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	p := cproc(ns, rank)
	pub, end := publisher(p.Nspace)
	if pub == nil {
		return C.PMIX_ERR_NOT_SUPPORTED
	}
	ks := goStrings(keys)
	go pub.Unpublish(p, ks, opDone(f, cbdata, end))
	return C.PMIX_SUCCESS
}

//export dynGoQuery
func dynGoQuery(ns *C.char, rank C.uint32_t, queries *C.pmix_query_t, n C.size_t, f C.pmix_info_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	p := cproc(ns, rank)
	qs := make([]Query, n)
	about := ""  // the namespace a qualifier names
	caller := "" // the connection of the client that asked (requestor.c)
	for i := range qs {
		qs[i].Keys = goStrings(C.dyn_query_keys(queries, C.size_t(i)))
		var nq C.size_t
		quals := C.dyn_query_quals(queries, C.size_t(i), &nq)
		for j := range nq {
			key := C.GoString(C.dyn_info_key(quals, j))
			if v := C.dyn_info_proc_nspace(quals, j); v != nil && key == "pmix.procid" {
				about = C.GoString(v)
			}
			if v := C.dyn_info_string(quals, j); v != nil && key == requestorKey {
				caller = C.GoString(v)
			} else if v != nil {
				if qs[i].Qualifiers == nil {
					qs[i].Qualifiers = map[string]string{}
				}
				qs[i].Qualifiers[key] = C.GoString(v)
				if key == "pmix.nspace" {
					about = C.GoString(v)
				}
			}
		}
	}
	p = asker(p, about, caller)
	q, end, ok := beginAs[Querier](p.Nspace)
	if !ok {
		return C.PMIX_ERR_NOT_SUPPORTED
	}
	var once sync.Once
	done := func(res []QueryResult, err error) {
		once.Do(func() {
			queryDone(f, cbdata, res, err)
			end()
		})
	}
	go q.Query(p, qs, done)
	return C.PMIX_SUCCESS
}

// asker names the process a query is answered for. libpmix 4.2.2 hands
// the host queries in the server's own name, not the client's: the job
// is then the one a qualifier names (PMIX_NSPACE, PMIX_PROCID), else the
// only job registered here (the rank is then PMIX_RANK_UNDEF), else (with
// several) the client that asked, found from the connection requestor.c
// adds as a qualifier (callerConn); if that fails, nobody answers.
func asker(requestor Proc, about, callerConn string) Proc {
	the.mu.Lock()
	s := the.srv
	the.mu.Unlock()
	if s == nil {
		return requestor
	}
	s.mu.Lock()
	_, own := s.jobs[requestor.Nspace]
	jobs := len(s.jobs)
	s.mu.Unlock()
	switch {
	case own:
		return requestor
	case about != "":
		return Proc{Nspace: about, Rank: RankUndef}
	case jobs > 1 && callerConn != "":
		// Only then: finding the client reads /proc (outside the lock).
		if caller, ok := requestorOf(callerConn); ok {
			s.mu.Lock()
			_, known := s.jobs[caller.Nspace]
			s.mu.Unlock()
			if known {
				return caller
			}
		}
	}
	requestor = Proc{Rank: RankUndef}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.jobs) == 1 {
		for ns := range s.jobs {
			requestor.Nspace = ns
		}
	}
	return requestor
}

// queryDone answers a query with res.
func queryDone(f C.pmix_info_cbfunc_t, cbdata unsafe.Pointer, res []QueryResult, err error) {
	st := code(err)
	if len(res) == 0 {
		if err == nil {
			st = C.PMIX_ERR_NOT_FOUND
		}
		C.dyn_info_complete(f, st, nil, cbdata)
		return
	}
	il := newInfoList()
	for _, r := range res {
		il.value(r.Key, r.Value)
	}
	da, cerr := il.convert()
	if cerr != nil {
		C.dyn_info_complete(f, code(cerr), nil, cbdata)
		return
	}
	heap := (*C.pmix_data_array_t)(C.malloc(C.size_t(unsafe.Sizeof(da))))
	*heap = da
	C.dyn_info_complete(f, st, heap, cbdata)
}

// infoList builds a pmix_info_t array through PMIx's info list API,
// which copies every value.
type infoList struct {
	l   unsafe.Pointer
	err error
}

func newInfoList() *infoList { return &infoList{l: C.PMIx_Info_list_start()} }

func (il *infoList) add(key string, v unsafe.Pointer, t C.pmix_data_type_t) {
	if il.err != nil {
		return
	}
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	if rc := C.dyn_info_add(il.l, k, v, t); rc != C.PMIX_SUCCESS {
		il.err = fmt.Errorf("pmix: info %s: %w", key, status(rc))
	}
}

func (il *infoList) str(key, v string) {
	cs := C.CString(v)
	defer C.free(unsafe.Pointer(cs))
	il.add(key, unsafe.Pointer(cs), C.PMIX_STRING)
}

func (il *infoList) u32(key string, v uint32) {
	x := C.uint32_t(v)
	il.add(key, unsafe.Pointer(&x), C.PMIX_UINT32)
}

func (il *infoList) u16(key string, v uint16) {
	x := C.uint16_t(v)
	il.add(key, unsafe.Pointer(&x), C.PMIX_UINT16)
}

func (il *infoList) rank(key string, v uint32) {
	x := C.pmix_rank_t(v)
	il.add(key, unsafe.Pointer(&x), C.PMIX_PROC_RANK)
}

func (il *infoList) flag(key string, v bool) {
	x := C.bool(v)
	il.add(key, unsafe.Pointer(&x), C.PMIX_BOOL)
}

func (il *infoList) size(key string, v uint64) {
	x := C.size_t(v)
	il.add(key, unsafe.Pointer(&x), C.PMIX_SIZE)
}

// procs adds a PMIX_DATA_ARRAY of pmix_proc_t.
func (il *infoList) procs(key string, ps []Proc) {
	da := C.dyn_array(C.size_t(len(ps)), C.PMIX_PROC)
	defer C.dyn_array_free(da)
	for i, p := range ps {
		ns := C.CString(p.Nspace)
		C.dyn_array_set_proc(da, C.size_t(i), ns, C.uint32_t(p.Rank))
		C.free(unsafe.Pointer(ns))
	}
	il.add(key, unsafe.Pointer(da), C.PMIX_DATA_ARRAY)
}

// strs adds a PMIX_DATA_ARRAY of strings.
func (il *infoList) strs(key string, ss []string) {
	da := C.dyn_array(C.size_t(len(ss)), C.PMIX_STRING)
	defer C.dyn_array_free(da)
	for i, s := range ss {
		cs := C.CString(s)
		C.dyn_array_set_string(da, C.size_t(i), cs)
		C.free(unsafe.Pointer(cs))
	}
	il.add(key, unsafe.Pointer(da), C.PMIX_DATA_ARRAY)
}

// value adds v by its Go type (see QueryResult).
func (il *infoList) value(key string, v any) {
	switch v := v.(type) {
	case uint64:
		il.size(key, v)
	case uint32:
		il.u32(key, v)
	case string:
		il.str(key, v)
	case bool:
		il.flag(key, v)
	case []string:
		il.strs(key, v)
	case []Proc:
		il.procs(key, v)
	default:
		if il.err == nil {
			il.err = fmt.Errorf("pmix: value of %s: unsupported type %T", key, v)
		}
	}
}

// array adds a sub-list as a PMIX_DATA_ARRAY value and releases it.
func (il *infoList) array(key string, sub *infoList) {
	da, err := sub.convert()
	if err != nil {
		if il.err == nil {
			il.err = err
		}
		return
	}
	defer C.PMIx_Data_array_destruct(&da)
	il.add(key, unsafe.Pointer(&da), C.PMIX_DATA_ARRAY)
}

// convert returns the list as an array of pmix_info_t (for
// PMIx_Data_array_destruct) and releases the list.
func (il *infoList) convert() (C.pmix_data_array_t, error) {
	defer C.PMIx_Info_list_release(il.l)
	var da C.pmix_data_array_t
	if il.err != nil {
		return da, il.err
	}
	if rc := C.PMIx_Info_list_convert(il.l, &da); rc != C.PMIX_SUCCESS {
		return da, fmt.Errorf("pmix: info list: %w", status(rc))
	}
	return da, nil
}

// regex compresses a list with PMIx_generate_regex or _ppn.
func regex(ppn bool, in string) (string, error) {
	cs := C.CString(in)
	defer C.free(unsafe.Pointer(cs))
	var out *C.char
	var rc C.pmix_status_t
	if ppn {
		rc = C.PMIx_generate_ppn(cs, &out)
	} else {
		rc = C.PMIx_generate_regex(cs, &out)
	}
	if rc != C.PMIX_SUCCESS {
		return "", status(rc)
	}
	defer C.free(unsafe.Pointer(out))
	// The result is a string, possibly a "pmix"-prefixed blob with NULs
	// inside; PMIx reads it back as a string value either way.
	return C.GoString(out), nil
}

// jobInfo builds the job-level and process-level keys of job: what Open
// MPI (ess/pmi, ompi_proc) and PMIx clients read at init.
func jobInfo(job *Job) (C.pmix_data_array_t, error) {
	il := newInfoList()
	local := job.LocalRanks()
	il.str(C.PMIX_JOBID, job.Nspace)
	il.u32(C.PMIX_JOB_SIZE, job.Size)
	il.u32(C.PMIX_UNIV_SIZE, max(job.Universe, job.Size))
	il.u32(C.PMIX_MAX_PROCS, max(job.Universe, job.Size))
	il.u32(C.PMIX_NUM_NODES, uint32(len(job.Nodes)))
	napps := uint32(1)
	for _, a := range job.RankApp {
		napps = max(napps, a+1)
	}
	il.u32(C.PMIX_JOB_NUM_APPS, napps)
	il.flag(C.PMIX_SPAWNED, job.Spawned)
	if job.Parent != nil {
		il.proc(C.PMIX_PARENT_ID, *job.Parent) // dyn.go
	}
	if d := job.Dynrt; d != nil {
		il.str(KeyDynrtJob, d.Job)
		il.u32(KeyDynrtBase, d.Base)
		if d.Delta != "" {
			il.str(KeyDynrtDelta, d.Delta)
		}
	}
	if job.Tmpdir != "" {
		il.str(C.PMIX_TMPDIR, job.Tmpdir)
		il.str(C.PMIX_NSDIR, job.Tmpdir)
	}
	nodeMap, err := regex(false, strings.Join(job.Nodes, ","))
	if err != nil {
		return C.pmix_data_array_t{}, fmt.Errorf("pmix: node map of %s: %w", job.Nspace, err)
	}
	il.str(C.PMIX_NODE_MAP, nodeMap)
	perNode := make([]string, len(job.Nodes))
	for n := range job.Nodes {
		perNode[n] = joinRanks(job.ranksOn(n))
	}
	procMap, err := regex(true, strings.Join(perNode, ";"))
	if err != nil {
		return C.pmix_data_array_t{}, fmt.Errorf("pmix: process map of %s: %w", job.Nspace, err)
	}
	il.str(C.PMIX_PROC_MAP, procMap)
	// This node: the job's processes here (none for a job registered
	// with Node -1).
	il.u32(C.PMIX_LOCAL_SIZE, uint32(len(local)))
	il.u32(C.PMIX_NODE_SIZE, uint32(len(local)))
	if len(local) > 0 {
		il.str(C.PMIX_LOCAL_PEERS, joinRanks(local))
		il.rank(C.PMIX_LOCALLDR, local[0])
	}
	if job.Node >= 0 {
		il.str(C.PMIX_HOSTNAME, job.Nodes[job.Node])
		il.u32(C.PMIX_NODEID, uint32(job.Node))
	}
	// Every process: rank, app, its node and its rank there.
	appLdr := map[uint32]uint32{}
	appRank := make([]uint32, job.Size)
	appCount := map[uint32]uint32{}
	nodeIdx := make([]uint16, job.Size)
	nodeCount := make([]uint16, len(job.Nodes))
	for r := range job.Size {
		a := job.app(r)
		if _, ok := appLdr[a]; !ok {
			appLdr[a] = r
		}
		appRank[r] = appCount[a]
		appCount[a]++
		n := job.RankNode[r]
		nodeIdx[r] = nodeCount[n]
		nodeCount[n]++
	}
	inSets := make([][]string, job.Size)
	for _, name := range slices.Sorted(maps.Keys(job.Psets)) {
		for _, r := range job.Psets[name] {
			if r < job.Size {
				inSets[r] = append(inSets[r], name)
			}
		}
	}
	for r := range job.Size {
		pl := newInfoList()
		a := job.app(r)
		pl.rank(C.PMIX_RANK, r)
		pl.u32(C.PMIX_APPNUM, a)
		pl.rank(C.PMIX_APPLDR, appLdr[a])
		pl.rank(C.PMIX_APP_RANK, appRank[r])
		pl.rank(C.PMIX_GLOBAL_RANK, r)
		pl.u16(C.PMIX_LOCAL_RANK, nodeIdx[r])
		pl.u16(C.PMIX_NODE_RANK, nodeIdx[r])
		pl.str(C.PMIX_HOSTNAME, job.Nodes[job.RankNode[r]])
		pl.u32(C.PMIX_NODEID, uint32(job.RankNode[r]))
		if len(inSets[r]) > 0 {
			pl.strs(C.PMIX_PSET_NAMES, inSets[r])
		}
		il.array(C.PMIX_PROC_DATA, pl)
	}
	return il.convert()
}

func joinRanks(rs []uint32) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strconv.FormatUint(uint64(r), 10)
	}
	return strings.Join(s, ",")
}

// completions counts the completions of queries and lookups so far, and
// those that ran on another thread than libpmix's (none should: shift.c).
func completions() (all, elsewhere int64) {
	var a, e C.long
	C.dyn_completions(&a, &e)
	return int64(a), int64(e)
}
