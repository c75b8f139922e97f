package simdvm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/dynrt/dynrt/lib/daemon"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/lib/simnode"
	"github.com/dynrt/dynrt/wire"
)

// The daemons of nodes 1.. may run in a process of their own, the nodes
// host, so that the master's process holds only the master (and node 0)
// and its memory and CPU can be measured apart (scripts/bench-scale.sh).
// The host reads one JSON NodeSpec per line on stdin and runs its
// daemon; it writes "ended <node>" when a daemon returns, and stops every
// daemon and exits when stdin closes.

// EnvHost makes a binary that calls HostMain from its main act as the
// nodes host.
const EnvHost = "DYNRT_SIMDVM_HOST"

// IsHost says whether this process was started as a nodes host.
func IsHost() bool { return os.Getenv(EnvHost) == "1" }

// HostMain runs the nodes host on stdin and stdout until stdin closes.
func HostMain(programs map[string]simnode.Program, log *slog.Logger) int {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex // stdout
	var wg sync.WaitGroup
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var spec launcher.NodeSpec
		if err := json.Unmarshal(sc.Bytes(), &spec); err != nil {
			fmt.Fprintf(os.Stderr, "simdvm host: bad node spec %q: %v\n", sc.Text(), err)
			return 2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := daemon.Run(ctx, daemonConfig(spec, programs, log))
			if err != nil {
				log.Warn("simdvm: daemon ended", "node", spec.Name, "err", err)
			}
			mu.Lock()
			fmt.Fprintf(os.Stdout, "ended %s\n", spec.Name)
			mu.Unlock()
		}()
	}
	cancel()
	wg.Wait()
	return 0
}

func daemonConfig(spec launcher.NodeSpec, programs map[string]simnode.Program, log *slog.Logger) daemon.Config {
	return daemon.Config{
		Master: spec.Master, Token: spec.Token, Node: spec.Name, Slots: spec.Slots, DVM: spec.DVM, Dir: spec.Dir,
		Logger: log, Env: func(string) string { return "" }, Spawner: simnode.New(programs),
	}
}

// hostStarter hands the nodes to a nodes host, started at the first node
// with argv (this binary, which calls HostMain when IsHost).
type hostStarter struct {
	argv []string

	mu    sync.Mutex
	cmd   *exec.Cmd
	in    io.WriteCloser
	done  map[string]chan struct{}
	ended chan struct{} // closed when the host has exited
	err   error
}

func (*hostStarter) Kind() string { return launcher.Local }

func (h *hostStarter) Start(_ context.Context, spec launcher.NodeSpec) (*launcher.Daemon, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd == nil && h.err == nil {
		h.err = h.startHost()
	}
	if h.err != nil {
		return nil, h.err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	h.done[spec.Name] = done
	if _, err := h.in.Write(append(b, '\n')); err != nil {
		return nil, wire.Errorf(wire.ErrClosed, "simdvm: nodes host: %v", err)
	}
	// A daemon stops when the master tells it to (node.stop); the
	// backstop is the host's end, in Close.
	return launcher.InProcess(spec.Name, done, func() {}), nil
}

func (h *hostStarter) startHost() error {
	cmd := exec.Command(h.argv[0], h.argv[1:]...)
	cmd.Env = append(os.Environ(), EnvHost+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("simdvm: start the nodes host %s: %w", h.argv[0], err)
	}
	h.cmd, h.in, h.done, h.ended = cmd, in, map[string]chan struct{}{}, make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if node, ok := strings.CutPrefix(sc.Text(), "ended "); ok {
				h.mu.Lock()
				if ch := h.done[node]; ch != nil {
					close(ch)
					delete(h.done, node)
				}
				h.mu.Unlock()
			}
		}
		_ = cmd.Wait()
		h.mu.Lock()
		for _, ch := range h.done {
			close(ch)
		}
		h.done = map[string]chan struct{}{}
		h.mu.Unlock()
		close(h.ended)
	}()
	return nil
}

// Pid is the nodes host's pid (0 before the first node).
func (h *hostStarter) Pid() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd == nil || h.cmd.Process == nil {
		return 0
	}
	return h.cmd.Process.Pid
}

// close ends the host: its stdin closes, it stops what still runs and
// exits.
func (h *hostStarter) close() {
	h.mu.Lock()
	in, ended := h.in, h.ended
	h.mu.Unlock()
	if in == nil {
		return
	}
	in.Close()
	<-ended
}
