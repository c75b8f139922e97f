package launcher

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

const roleEnv = "LAUNCHER_TEST_ROLE"

// TestMain lets the test binary stand in for `dynrun daemon` and for ssh.
func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "echo":
		// Print argv, the token from the environment and stdin's first line.
		for _, a := range os.Args[1:] {
			fmt.Println("arg:" + a)
		}
		fmt.Fprintln(os.Stderr, "token:"+os.Getenv(EnvToken))
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		fmt.Println("stdin:" + strings.TrimSuffix(line, "\n"))
		os.Exit(3)
	case "sleep":
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type capture struct {
	mu    sync.Mutex
	lines []string
}

func (c *capture) out(node string, stream int, line []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, fmt.Sprintf("%s/%d/%s", node, stream, line))
}

func (c *capture) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.lines)
}

func self(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func TestLocalStarter(t *testing.T) {
	var c capture
	s, err := New(Options{Kind: Local, Command: []string{self(t), "daemon"}, Env: []string{roleEnv + "=echo"}, Output: c.out})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Start(context.Background(), NodeSpec{Name: "node1", Slots: 4, DVM: "dvm1", Dir: "/run/d", Master: "/run/d/dvm1/master.sock", Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Pid() <= 0 || d.Node != "node1" {
		t.Fatalf("pid %d node %q", d.Pid(), d.Node)
	}
	st := d.Wait()
	if st.Code() != 3 {
		t.Fatalf("exit: %v", st)
	}
	got := c.get()
	want := []string{"daemon", "--master", "/run/d/dvm1/master.sock", "--node", "node1", "--slots", "4", "--dvm", "dvm1", "--dir", "/run/d"}
	for _, w := range want {
		if !slices.Contains(got, "node1/1/arg:"+w) {
			t.Errorf("missing argument %q in %q", w, got)
		}
	}
	// Token in the environment, not on the command line; stdin is empty.
	for _, l := range []string{"node1/2/token:tok", "node1/1/stdin:"} {
		if !slices.Contains(got, l) {
			t.Errorf("missing %q in %q", l, got)
		}
	}
	for _, l := range got {
		if _, arg, ok := strings.Cut(l, "/arg:"); ok && strings.Contains(arg, "tok") {
			t.Errorf("token on the command line: %q", l)
		}
	}
}

// The ssh starter runs the ssh argv (here the test binary standing in for
// ssh) and writes the token to its stdin.
func TestSSHStarterRuns(t *testing.T) {
	var c capture
	s, err := New(Options{Kind: SSH, SSH: []string{self(t), "-o", "BatchMode=yes"}, Env: []string{roleEnv + "=echo"}, Output: c.out})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Start(context.Background(), NodeSpec{Name: "h1", Host: "h1", Slots: 2, Master: "10.1.1.1:9", Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	d.Wait()
	got := c.get()
	for _, l := range []string{"h1/1/arg:h1", "h1/1/arg:dynrun daemon --master 10.1.1.1:9 --node h1 --slots 2 --join --token-stdin", "h1/1/stdin:tok", "h1/2/token:"} {
		if !slices.Contains(got, l) {
			t.Errorf("missing %q in %q", l, got)
		}
	}
}

func TestStopKillsDaemon(t *testing.T) {
	s, err := New(Options{Command: []string{self(t)}, Env: []string{roleEnv + "=sleep"}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Start(context.Background(), NodeSpec{Name: "n", Slots: 1, Master: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	st := d.Stop(100 * time.Millisecond)
	if st.Signal != syscall.SIGTERM {
		t.Fatalf("status %v", st)
	}
	select {
	case <-d.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	if err := syscall.Kill(d.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d still exists: %v", d.Pid(), err)
	}
}

func TestStartErrors(t *testing.T) {
	if _, err := New(Options{Kind: "pbs"}); !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), "local, ssh, join, slurm") {
		t.Errorf("unknown kind: %v", err)
	}
	if _, err := New(Options{Kind: Local}); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("local without command: %v", err)
	}
	s, _ := New(Options{Command: []string{"/nonexistent/dynrun", "daemon"}})
	_, err := s.Start(context.Background(), NodeSpec{Name: "n", Slots: 1, Master: "/x"})
	if !errors.Is(err, wire.ErrNotFound) || !strings.Contains(err.Error(), "node n") {
		t.Errorf("missing daemon binary: %v", err)
	}
	if _, err := s.Start(context.Background(), NodeSpec{Name: "n", Slots: 1}); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("no master address: %v", err)
	}
}

func TestJoinStartsNothing(t *testing.T) {
	s, err := New(Options{Kind: Join})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Start(context.Background(), NodeSpec{Name: "n", Slots: 1, Master: "h:1"})
	if err != nil || d.Pid() != 0 || d.Done() != nil || s.Kind() != Join {
		t.Fatalf("join: %+v %v", d, err)
	}
	if st := d.Stop(0); st != d.Wait() {
		t.Fatalf("join stop: %v", st)
	}
}
