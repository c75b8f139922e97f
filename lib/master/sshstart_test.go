package master

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/leakcheck"
	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/wire"
)

// fakeSSHD is a script standing in for ssh to hosts whose sshd has
// MaxStartups = max: it counts the connections in their handshake (a file
// each in conns/, for handshake), drops one that finds more than max
// (as sshd does, with ssh's message and exit code 255), and otherwise
// runs the remote command here with its host's own DYNRT_DIR. Every count
// it sees goes to peaks, one line each.
type fakeSSHD struct {
	script, peaks string
}

func newFakeSSHD(t testing.TB, max int, handshake time.Duration) *fakeSSHD {
	t.Helper()
	root := t.TempDir()
	conns := filepath.Join(root, "conns")
	if err := os.Mkdir(conns, 0o700); err != nil {
		t.Fatal(err)
	}
	f := &fakeSSHD{script: filepath.Join(root, "ssh"), peaks: filepath.Join(root, "peaks")}
	script := fmt.Sprintf(`#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -o) shift 2 ;; *) break ;; esac; done
host=$1
shift
: > '%[1]s'/$$
n=$(ls '%[1]s' | wc -l)
echo $n >> '%[2]s'
if [ "$n" -gt %[3]d ]; then
	rm -f '%[1]s'/$$
	echo "kex_exchange_identification: read: Connection reset by peer" >&2
	exit 255
fi
sleep %[4]s
rm -f '%[1]s'/$$
DYNRT_DIR='%[5]s'/$host
export DYNRT_DIR
exec sh -c "$*"
`, conns, f.peaks, max, strconv.FormatFloat(handshake.Seconds(), 'f', 3, 64), root)
	if err := os.WriteFile(f.script, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return f
}

// peak is the most connections in their handshake at once.
func (f *fakeSSHD) peak(t testing.TB) int {
	b, err := os.ReadFile(f.peaks)
	if err != nil {
		t.Fatal(err)
	}
	p := 0
	for _, l := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(l)
		p = max(p, n)
	}
	return p
}

// viaSSH makes the DVM of startDVM start its daemons through f, at most
// window connecting at once: the test binary as the remote dynrun, over
// ssh to hosts node1.. (startDVM builds it with the test environment).
func (f *fakeSSHD) viaSSH(window int) func(*Config) {
	return func(c *Config) { c.Starter, c.MaxConnecting = sshVia{f}, window }
}

// sshVia asks startDVM for an ssh starter through a fake sshd; it starts
// nothing itself.
type sshVia struct{ f *fakeSSHD }

func (sshVia) Kind() string { return launcher.SSH }
func (sshVia) Start(context.Context, launcher.NodeSpec) (*launcher.Daemon, error) {
	panic("sshVia is replaced by startDVM")
}

func (v sshVia) starter(t testing.TB, exe string, env []string) launcher.Starter {
	s, err := launcher.New(launcher.Options{
		Kind: launcher.SSH, SSH: []string{v.f.script, "-o", "BatchMode=yes"}, Remote: []string{exe},
		Env: env, Logger: testLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Daemons start through a bounded number of ssh connections at once, so
// that a DVM of more hosts than sshd's MaxStartups comes up: 12 hosts,
// sshd dropping beyond 4 handshakes, a window of 3. Before the bound
// every ssh was started at once and the DVM failed with ssh's
// "Connection reset by peer".
func TestSSHStartBounded(t *testing.T) {
	f := newFakeSSHD(t, 4, 100*time.Millisecond)
	d := startDVM(t, 13, 1, f.viaSSH(3))
	if p := f.peak(t); p > 3 {
		t.Errorf("%d ssh connections were in their handshake at once, want at most 3", p)
	}
	st, err := d.c.State(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 13 {
		t.Fatalf("%d nodes", len(st.Nodes))
	}
	for _, n := range st.Nodes {
		if n.State != "up" {
			t.Errorf("node %s is %s", n.Name, n.State)
		}
	}
}

// BenchmarkSSHStart: `dvm start` of 24 hosts over ssh whose sshd has the
// default MaxStartups (10 connections in their handshake) and a handshake
// of 50 ms, by the window of connections at once. Every daemon is the
// test binary on this machine. failed/op counts the starts that failed
// (sshd dropped a connection).
func BenchmarkSSHStart(b *testing.B) {
	const hosts = 24
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, window := range []int{1, 4, 8, -1} {
		name := "window=" + strconv.Itoa(window)
		if window < 0 {
			name = "window=unbounded"
		}
		b.Run(name, func(b *testing.B) {
			f := newFakeSSHD(b, 10, 50*time.Millisecond)
			mark := leakcheck.NewMark(b)
			starter := sshVia{f}.starter(b, exe, append([]string{envRole + "=daemon"}, testEnv(mark)...))
			nodes := make([]alloc.Node, hosts+1)
			for i := range nodes {
				nodes[i] = alloc.Node{Name: "node" + strconv.Itoa(i), Slots: 1}
			}
			failed := 0
			for b.Loop() {
				dir := filepath.Join(b.TempDir(), "d")
				m, err := Start(context.Background(), Config{
					Dir: dir, Nodes: nodes, Starter: starter, MaxConnecting: window, KillGrace: testGrace,
					Env: func(string) string { return "" },
				})
				if err != nil {
					failed++
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if err := m.Stop(ctx); err != nil {
					b.Fatal(err)
				}
				cancel()
			}
			b.ReportMetric(float64(failed)/float64(b.N), "failed/op")
			if left := leakcheck.MarkedProcs(mark); len(left) > 0 {
				b.Errorf("processes left: %v", left)
			}
		})
	}
}

// slowBooking is a Starter whose Start returns late, after the daemon it
// started may already have registered.
type slowBooking struct {
	launcher.Starter
	delay time.Duration
}

func (s slowBooking) Start(ctx context.Context, spec launcher.NodeSpec) (*launcher.Daemon, error) {
	d, err := s.Starter.Start(ctx, spec)
	time.Sleep(s.delay)
	return d, err
}

// Start returns once every daemon has registered, even when a daemon
// registers before its start was booked; the daemons must stay up. (The
// first version of the parallel start canceled the booking when Start
// returned, and stopped such a daemon.)
func TestStartDaemonRegistersBeforeBooking(t *testing.T) {
	d := startDVM(t, 3, 1, func(c *Config) { c.Starter = slowBooking{c.Starter, 500 * time.Millisecond} })
	time.Sleep(300 * time.Millisecond) // a stopped daemon's connection closes within this
	st, err := d.c.State(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if n.State != "up" {
			t.Errorf("node %s is %s after the start", n.Name, n.State)
		}
	}
}

// Daemons that do not register in time are named in the error.
func TestRegisterTimeoutNamesNodes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	nodes := []alloc.Node{{Name: "h0", Slots: 1}, {Name: "h1", Slots: 1}, {Name: "h2", Slots: 1}}
	_, err := Start(t.Context(), Config{
		Dir: dir, Nodes: nodes, Launcher: launcher.Join, Bind: "127.0.0.1:0", RegisterTimeout: 200 * time.Millisecond,
		Env: func(string) string { return "" },
	})
	if err == nil || !strings.Contains(err.Error(), "the daemons of 2 nodes did not register within 200ms: h1, h2") {
		t.Fatalf("start: %v", err)
	}
}

// A DVM whose node 0 has no slots (the master's host when the host list
// does not name it): jobs, oversubscribed ones too, and resource-change
// ADDs never place a process there, and an ADD that would need it is
// refused for want of free slots.
func TestZeroSlotMasterNode(t *testing.T) {
	d := startDVM(t, 3, 2, func(c *Config) { c.Nodes[0].Slots = 0 })
	rep, err := d.launch(wire.JobLaunchReq{Argv: []string{"sleep", "30"}, N: 6, Name: "over", Oversubscribe: true, MapBy: wire.MapByNode})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range d.procs(rep.Job) {
		if p.Node == "node0" {
			t.Errorf("rank %d of an oversubscribed job placed on the 0-slot node", p.Rank)
		}
	}
	d.kill(rep.Job)
	job := d.sleeper(2)
	if _, err := d.rc(wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 3}); !errors.Is(err, wire.ErrNoResources) {
		t.Errorf("ADD of 3 with 2 free slots (and 0 on node0): %v", err)
	}
	for _, p := range d.procs(job.Job) {
		if p.Node == "node0" {
			t.Errorf("rank %d placed on the 0-slot node", p.Rank)
		}
	}
}
