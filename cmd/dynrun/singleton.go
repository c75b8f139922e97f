package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/lib/pmi"
	"github.com/dynrt/dynrt/wire"
)

// singletonDial bounds the connection to a singleton's port.
const singletonDial = 10 * time.Second

// runSingleton is dynrun run as `mpiexec -pmi_args PORT IFACE KEY PID`:
// an MPICH process started without a launcher needs a process manager
// (it reads MPI_UNIVERSE_SIZE, say) and execs `mpiexec` from PATH with
// those arguments (docs/mpi.md "Singletons"). dynrun connects to PORT on
// this host, runs the handshake and serves that one process's PMI-1
// session itself, as a job of one rank, until it finalizes.
func runSingleton(ctx context.Context, args []string, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "dynrun: singleton: "+format+"\n", a...)
		return 1
	}
	if len(args) != 4 {
		return fail("want -pmi_args PORT INTERFACE KEY PID, got %d arguments", len(args))
	}
	port, err := strconv.Atoi(args[0])
	if err != nil || port <= 0 || port > 65535 {
		return fail("bad port %q", args[0])
	}
	pid, err := strconv.Atoi(args[3])
	if err != nil || pid <= 0 {
		return fail("bad pid %q", args[3])
	}
	dctx, cancel := context.WithTimeout(ctx, singletonDial)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(dctx, "tcp", net.JoinHostPort("127.0.0.1", args[0]))
	if err != nil {
		return fail("%v", err)
	}
	defer conn.Close()
	// A signal to dynrun ends the session: MPICH then fails its next PMI
	// call instead of waiting.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	h := newSingleton(pid)
	if err := pmi.SingInit(conn, h.proc.KVS); err != nil {
		return fail("%v", err)
	}
	res, err := pmi.Serve(ctx, conn, pmi.Config{Handler: h})
	switch {
	case err != nil && ctx.Err() == nil:
		return fail("%v", err)
	case res.Aborted:
		return h.abortCode
	}
	return 0
}

// singleton answers PMI for a lone process: rank 0 of a job of one, with
// its own key-value space and names. Spawn needs a DVM and is refused.
type singleton struct {
	proc pmi.Proc
	pid  int

	mu        sync.Mutex
	kv        map[string]string
	node      map[string]string
	names     map[string]string
	abortCode int
}

func newSingleton(pid int) *singleton {
	return &singleton{
		// A private DVM would have a slot per CPU: so has the universe.
		proc: pmi.Proc{Rank: 0, Size: 1, KVS: pmi.SingletonKVS(pid), Universe: runtime.NumCPU()},
		pid:  pid,
		kv:   map[string]string{}, node: map[string]string{}, names: map[string]string{},
	}
}

func (h *singleton) Proc() pmi.Proc  { return h.proc }
func (h *singleton) Started(int)     {}
func (h *singleton) Mapping() string { return "(vector,(0,1,1))" }

// Dead: a world of one has no peer that could die.
func (h *singleton) Dead() string { return "" }

func (h *singleton) Put(key, value string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.kv[key] = value
	return nil
}

func (h *singleton) Get(key string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.kv[key]
	return v, ok
}

func (h *singleton) Fence(context.Context) error { return nil } // a barrier of one

func (h *singleton) PutNodeAttr(key, value string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.node[key] = value
	return nil
}

// GetNodeAttr never waits: nobody else could put the attribute.
func (h *singleton) GetNodeAttr(_ context.Context, key string, _ bool) (string, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.node[key]
	return v, ok, nil
}

func (h *singleton) Publish(_ context.Context, service, port string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.names[service]; ok {
		return wire.Errorf(wire.ErrExists, "dynrun: service %q is already published", service)
	}
	h.names[service] = port
	return nil
}

func (h *singleton) Lookup(_ context.Context, service string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p, ok := h.names[service]; ok {
		return p, nil
	}
	return "", wire.Errorf(wire.ErrNotFound, "dynrun: service %q is not published", service)
}

func (h *singleton) Unpublish(_ context.Context, service string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.names[service]; !ok {
		return wire.Errorf(wire.ErrNotFound, "dynrun: service %q is not published", service)
	}
	delete(h.names, service)
	return nil
}

func (h *singleton) Spawn(context.Context, *pmi.Spawn) (*pmi.SpawnResult, error) {
	return nil, wire.Errorf(wire.ErrState, "dynrun: a process started without dynrun cannot spawn; start it with dynrun -n 1")
}

// Abort ends the singleton as a launcher ends an aborting job: SIGTERM
// (MPICH waits to be killed).
func (h *singleton) Abort(_ context.Context, code int, _ string) error {
	h.mu.Lock()
	h.abortCode = code
	h.mu.Unlock()
	if err := syscall.Kill(h.pid, syscall.SIGTERM); err != nil {
		return wire.Errorf(wire.ErrNotFound, "dynrun: abort: %w", err)
	}
	return nil
}
