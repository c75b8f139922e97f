package simnode

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/daemon"
	"github.com/dynrt/dynrt/lib/proc"
	"github.com/dynrt/dynrt/wire"
)

type ended struct {
	p  daemon.Process
	st proc.ExitStatus
}

func startProg(t *testing.T, s *Spawner, argv ...string) (daemon.Process, <-chan ended) {
	t.Helper()
	ch := make(chan ended, 1)
	p, err := s.Start(context.Background(), "j/0", proc.Spec{Path: argv[0], Args: argv}, func(p daemon.Process, st proc.ExitStatus) {
		ch <- ended{p, st}
	})
	if err != nil {
		t.Fatal(err)
	}
	return p, ch
}

func waitExit(t *testing.T, ch <-chan ended) ended {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("the simulated process did not end")
	}
	return ended{}
}

func TestSignals(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		ends bool
	}{
		{syscall.SIGTERM, true}, {syscall.SIGKILL, true}, {syscall.SIGUSR1, true}, {syscall.SIGINT, true},
		{syscall.SIGCONT, false}, {syscall.SIGCHLD, false}, {syscall.SIGSTOP, false}, {0, false},
	} {
		s := New(nil)
		p, ch := startProg(t, s, "/sim/"+Idle)
		if err := p.Signal(tc.sig); err != nil {
			t.Fatalf("%v: %v", tc.sig, err)
		}
		if !tc.ends {
			select {
			case <-ch:
				t.Errorf("%v ended the process; its default action is to ignore it", tc.sig)
			case <-time.After(20 * time.Millisecond):
			}
			_ = p.Signal(syscall.SIGKILL)
			waitExit(t, ch)
			continue
		}
		e := waitExit(t, ch)
		if e.st.Signal != tc.sig || e.st.Exited() || e.p != p {
			t.Errorf("%v: status %v, want killed by it", tc.sig, e.st)
		}
		select {
		case <-p.Done():
		default:
			t.Errorf("%v: Done not closed before the exit callback", tc.sig)
		}
		if err := p.Signal(syscall.SIGTERM); !errors.Is(err, proc.ErrDone) {
			t.Errorf("signal after the end: %v, want proc.ErrDone", err)
		}
		if s.Running() != 0 {
			t.Errorf("Running() = %d after the end", s.Running())
		}
	}
}

func TestExitAndPids(t *testing.T) {
	s := New(nil)
	seen := map[int]bool{}
	for _, tc := range []struct {
		args []string
		code int
	}{{[]string{Exit}, 0}, {[]string{Exit, "7"}, 7}, {[]string{"/x/" + Exit, "x"}, 2}} {
		p, ch := startProg(t, s, tc.args...)
		if p.Pid() <= 1<<22 || seen[p.Pid()] {
			t.Errorf("pid %d: want a unique pid above 2^22", p.Pid())
		}
		seen[p.Pid()] = true
		if e := waitExit(t, ch); e.st.Code() != tc.code || e.st.Signal != 0 {
			t.Errorf("%v: %v, want exit code %d", tc.args, e.st, tc.code)
		}
	}
}

func TestStartErrors(t *testing.T) {
	s := New(map[string]Program{"mine": func(context.Context, *Proc) int { return 0 }})
	nop := func(daemon.Process, proc.ExitStatus) { t.Error("exit callback of a process that did not start") }
	_, err := s.Start(context.Background(), "j/1", proc.Spec{Path: "/usr/bin/true"}, nop)
	if !errors.Is(err, wire.ErrNotFound) || !strings.Contains(err.Error(), `"/usr/bin/true"`) || !strings.Contains(err.Error(), "mine") {
		t.Errorf("unknown program: %v; want ErrNotFound naming it and the programs there are", err)
	}
	r, w, _ := osPipe(t)
	_, err = s.Start(context.Background(), "j/1", proc.Spec{Path: Idle, ExtraFiles: []*osFile{r, w}}, nop)
	if !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), "--pmi none") {
		t.Errorf("file descriptors: %v; want ErrInvalid telling to launch without PMI", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err = s.Start(ctx, "j/1", proc.Spec{Path: Idle}, nop); !errors.Is(err, wire.ErrCanceled) {
		t.Errorf("canceled start: %v, want ErrCanceled", err)
	}
	if s.Running() != 0 {
		t.Errorf("Running() = %d after failed starts", s.Running())
	}
}

// TestOutput: lines of a process reach Spec.Output one call at a time.
func TestOutput(t *testing.T) {
	s := New(map[string]Program{"talk": func(_ context.Context, p *Proc) int {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.Println("line", i, p.Getenv("K"))
			}()
		}
		wg.Wait()
		return 0
	}})
	var mu sync.Mutex
	var lines []string
	inCall := false
	ch := make(chan ended, 1)
	_, err := s.Start(context.Background(), "j/2", proc.Spec{Path: "talk", Env: []string{"K=a", "K=b"}, Output: func(stream int, b []byte) {
		mu.Lock()
		defer mu.Unlock()
		if inCall || stream != proc.Stdout {
			t.Errorf("overlapping Output calls or stream %d", stream)
		}
		inCall = true
		lines = append(lines, string(b))
		inCall = false
	}}, func(p daemon.Process, st proc.ExitStatus) { ch <- ended{p, st} })
	if err != nil {
		t.Fatal(err)
	}
	waitExit(t, ch)
	if len(lines) != 8 || !strings.HasSuffix(lines[0], " b") {
		t.Errorf("lines %q: want 8, each ending in the last K of the environment", lines)
	}
}

type osFile = os.File

func osPipe(t *testing.T) (*os.File, *os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w, nil
}
