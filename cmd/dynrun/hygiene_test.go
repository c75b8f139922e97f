package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/lib/dvmdir"
)

// A second daemon for a node that is up is refused by the master and must
// leave the live daemon's socket alone: its processes (and tools) still
// reach it afterwards.
func TestRejoinLiveNodeKeepsSocket(t *testing.T) {
	dir := dynDir(t)
	id := startDVM(t, "--nodes", "2", "--slots", "1")
	info, err := dvmdir.Read(dvmdir.File(dir, id))
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, id, "node1.sock")
	before, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runBin(t, "daemon", "--master", info.Socket, "--node", "node1", "--slots", "1", "--dvm", id)
	if code == 0 || !strings.Contains(errOut, "already has a daemon") {
		t.Fatalf("second daemon for node1: exit %d, stderr %q", code, errOut)
	}
	after, err := os.Stat(sock)
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("node1's socket after the refused rejoin: %v (same file: %v)", err, err == nil && os.SameFile(before, after))
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("connect to the live daemon: %v", err)
	}
	c.Close()
	entries, _ := os.ReadDir(filepath.Join(dir, id))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".j") {
			t.Errorf("refused daemon left its temporary socket %s", e.Name())
		}
	}
	if code, out, errOut := runBin(t, "--dvm", id, "-n", "2", "--map-by", "node", "sh", "-c", `echo "$DYNRT_NODE"`); code != 0 || !strings.Contains(out, "node1") {
		t.Errorf("job after the refused rejoin: exit %d, %q %q", code, out, errOut)
	}
}
