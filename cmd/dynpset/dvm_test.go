package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"os/signal"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/daemon"
	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/lib/master"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// The test binary doubles as the node daemon of the virtual nodes other
// than node 0 (DYNRT_TEST_ROLE=daemon), as in lib/master's tests.
const envRole = "DYNRT_TEST_ROLE"

func TestMain(m *testing.M) {
	if os.Getenv(envRole) == "daemon" {
		os.Exit(daemonMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func daemonMain(args []string) int {
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	var cfg daemon.Config
	fs.StringVar(&cfg.Master, "master", "", "")
	fs.StringVar(&cfg.Node, "node", "", "")
	fs.IntVar(&cfg.Slots, "slots", 0, "")
	fs.StringVar(&cfg.DVM, "dvm", "", "")
	fs.StringVar(&cfg.Dir, "dir", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.Token = os.Getenv(launcher.EnvToken)
	cfg.KillGrace = 200 * time.Millisecond
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := daemon.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "daemon:", err)
		return 1
	}
	return 0
}

// testDVM is a DVM of k virtual nodes for one test. Its directory is
// $DYNRT_DIR for the test, so dynpset finds it as "the only live DVM".
type testDVM struct {
	t   *testing.T
	m   *master.Master
	c   *tool.Client
	dir string
}

func startDVM(t *testing.T, k, slots int) *testDVM {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "d")
	t.Setenv(dvmdir.EnvDir, dir)
	t.Setenv(dvmdir.EnvDVM, "")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{envRole + "=daemon", "GORACE=atexit_sleep_ms=0"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DYNRT_") && !strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	starter, err := launcher.New(launcher.Options{Kind: launcher.Local, Command: []string{exe}, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]alloc.Node, k)
	for i := range nodes {
		nodes[i] = alloc.Node{Name: "node" + strconv.Itoa(i), Slots: slots}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := master.Start(ctx, master.Config{
		Dir: dir, Name: "psettest", Nodes: nodes, Starter: starter, KillGrace: 200 * time.Millisecond,
		Env: func(string) string { return "" },
	})
	if err != nil {
		t.Fatalf("start DVM: %v", err)
	}
	d := &testDVM{t: t, m: m, dir: dir}
	t.Cleanup(func() {
		if d.c != nil {
			d.c.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Stop(ctx); err != nil {
			t.Errorf("stop DVM: %v", err)
		}
	})
	d.c, err = tool.Attach(ctx, tool.Options{Dir: dir, Env: func(string) string { return "" }, Name: "test"})
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	return d
}

// launch starts n sleeping processes named app; they live until the test
// ends (the test's client launched them).
func (d *testDVM) launch(app string, n int) wire.JobLaunchReply {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := d.c.Launch(ctx, wire.JobLaunchReq{Argv: []string{"/bin/sleep", "60"}, N: uint32(n), Name: app})
	if err != nil {
		d.t.Fatalf("launch: %v", err)
	}
	return rep
}

// run runs dynpset with args and returns its exit code and output.
func run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), append([]string{"dynpset"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}
