package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSingletonProtocol plays an MPICH singleton that upgrades (it
// listens, dynrun is exec'd as `mpiexec -pmi_args ...` and connects): the
// handshake, then a PMI-1 session that dynrun answers for a job of one.
func TestSingletonProtocol(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	pid := strconv.Itoa(os.Getpid())
	done := make(chan int, 1)
	go func() {
		code, _, errOut := run("-pmi_args", port, "default_interface", "default_key", pid)
		if errOut != "" {
			t.Errorf("stderr %q", errOut)
		}
		done <- code
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	kvs := "singinit_kvs_" + pid + "_0"
	steps := []struct{ send, want string }{
		{"", "cmd=singinit pmi_version=1 pmi_subversion=1 stdio=no authtype=none"},
		{"cmd=singinit pmi_version=1 pmi_subversion=1 stdio=yes authtype=none", "cmd=singinit_info versionok=yes stdio=no kvsname=" + kvs},
		{"cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0"},
		{"cmd=get_maxes", "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024"},
		{"cmd=put kvsname=" + kvs + " key= value=", "cmd=put_result rc=0 msg=success"},
		{"cmd=get_universe_size", fmt.Sprintf("cmd=universe_size size=%d", runtime.NumCPU())},
		{"cmd=put kvsname=" + kvs + " key=a value=1", "cmd=put_result rc=0 msg=success"},
		{"cmd=barrier_in", "cmd=barrier_out"},
		{"cmd=get kvsname=" + kvs + " key=a", "cmd=get_result rc=0 msg=success value=1"},
		{"cmd=get kvsname=" + kvs + " key=PMI_process_mapping", "cmd=get_result rc=0 msg=success value=(vector,(0,1,1))"},
		{"cmd=publish_name service=s port=p", "cmd=publish_result rc=0 msg=success"},
		{"cmd=lookup_name service=s", "cmd=lookup_result port=p rc=0 msg=success"},
		{"mcmd=spawn\nnprocs=1\nexecname=/bin/true\ntotspawns=1\nspawnssofar=1\nargcnt=0\npreput_num=0\ninfo_num=0\nendcmd",
			"cmd=spawn_result rc=-1 msg=dynrun:_a_process_started_without_dynrun_cannot_spawn;_start_it_with_dynrun_-n_1"},
		{"cmd=finalize", "cmd=finalize_ack"},
	}
	for _, s := range steps {
		if s.send != "" {
			if _, err := c.Write([]byte(s.send + "\n")); err != nil {
				t.Fatal(err)
			}
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", s.send, err)
		}
		if got = strings.TrimSuffix(got, "\n"); got != s.want {
			t.Errorf("after %q:\n got %q\nwant %q", s.send, got, s.want)
		}
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("dynrun did not return after finalize")
	}
}

// TestSingletonMPICH: an MPICH program started without a launcher that
// reads MPI_UNIVERSE_SIZE execs `mpiexec` from PATH; with dynrun there
// (a link named mpiexec) it gets its answer and both exit.
func TestSingletonMPICH(t *testing.T) {
	cc, err := exec.LookPath("mpicc.mpich")
	if err != nil {
		t.Skip("no mpicc.mpich (apt-get install mpich libmpich-dev)")
	}
	dynDir(t)
	tmp := t.TempDir()
	hello := filepath.Join(tmp, "hello")
	if out, err := exec.Command(cc, "-O2", "-o", hello, "../../testdata/mpi/hello_mpi.c").CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v\n%s", err, out)
	}
	pathDir := filepath.Join(tmp, "bin")
	if err := os.Mkdir(pathDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(pathDir, "mpiexec")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, hello)
	cmd.Env = append(os.Environ(), "PATH="+pathDir+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hello: %v\n%s", err, out)
	}
	want := fmt.Sprintf("hello rank=0 size=1 appnum=-1 universe=%d\n", runtime.NumCPU())
	if string(out) != want {
		t.Errorf("output %q, want %q", out, want)
	}
}
