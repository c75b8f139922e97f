package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func statusOf(t *testing.T, id string) statusJSON {
	t.Helper()
	code, out, errOut := runBin(t, "dvm", "status", "--json", "--dvm", id)
	if code != 0 {
		t.Fatalf("dvm status: exit %d, %q", code, errOut)
	}
	return parseStatus(t, out)
}

func parseStatus(t *testing.T, out string) statusJSON {
	t.Helper()
	var st statusJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("dvm status --json: %v: %q", err, out)
	}
	return st
}

// listedNodes says whether `dvm list` output lists DVM id with nodes
// nodes (columns ID NAME PID NODES ...).
func listedNodes(out, id, nodes string) bool {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[0] == id {
			return f[3] == nodes
		}
	}
	return false
}

func nodeNames(st statusJSON) []string {
	var out []string
	for _, n := range st.Nodes {
		out = append(out, n.Name)
	}
	return out
}

// TestDVMGrowShrinkCLI: `dvm grow --nodes` adds a virtual node that jobs
// use; status lists it and the change; `dvm shrink` takes it out again,
// and the refusals name their reason.
func TestDVMGrowShrinkCLI(t *testing.T) {
	dynDir(t)
	id := startDVM(t, "--nodes", "1", "--slots", "1")
	code, out, errOut := runBin(t, "dvm", "grow", "--dvm", id, "--nodes", "1", "--slots", "2")
	if code != 0 || !strings.Contains(out, "node node1 joined DVM "+id+": 2 slots") {
		t.Fatalf("dvm grow: exit %d, %q, %q", code, out, errOut)
	}
	st := statusOf(t, id)
	if names := nodeNames(st); !slices.Equal(names, []string{"node0", "node1"}) || st.Slots != 3 || len(st.NodeLog) != 1 || st.NodeLog[0].Event != "node.added" {
		t.Fatalf("status after the grow: nodes %v, %d slots, log %+v", names, st.Slots, st.NodeLog)
	}
	// dvm list reads the rendezvous file: it counts the new node too.
	if code, out, _ := runBin(t, "dvm", "list"); code != 0 || !listedNodes(out, id, "2") {
		t.Errorf("dvm list after the grow: %q; want DVM %s with 2 nodes", out, id)
	}
	code, out, errOut = runBin(t, "--dvm", id, "-n", "3", "sh", "-c", `echo "$DYNRT_NODE"`)
	if code != 0 || strings.Count(out, "node1") != 2 {
		t.Fatalf("job on the grown DVM: exit %d, %q, %q; want 2 ranks on node1", code, out, errOut)
	}
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"--node", "node0"}, "master's own node"},
		{[]string{"--node", "h9"}, `no node "h9"`},
	} {
		code, _, errOut := runBin(t, append([]string{"dvm", "shrink", "--dvm", id}, c.args...)...)
		if code != 1 || !strings.Contains(errOut, c.err) {
			t.Errorf("dvm shrink %v: exit %d, %q; want 1 and %q", c.args, code, errOut, c.err)
		}
	}
	if code, _, errOut := runBin(t, "dvm", "grow", "--dvm", id, "--host", "node1:4"); code != 1 || !strings.Contains(errOut, "already has a node node1") {
		t.Errorf("grow by a node of the DVM: exit %d, %q", code, errOut)
	}
	code, out, errOut = runBin(t, "dvm", "shrink", "--dvm", id, "--node", "node1")
	if code != 0 || !strings.Contains(out, "node node1 left DVM "+id) {
		t.Fatalf("dvm shrink: exit %d, %q, %q", code, out, errOut)
	}
	st = statusOf(t, id)
	if names := nodeNames(st); !slices.Equal(names, []string{"node0"}) || st.Slots != 1 || st.NodeLog[len(st.NodeLog)-1].Event != "node.removed" {
		t.Fatalf("status after the shrink: nodes %v, %d slots, log %+v", names, st.Slots, st.NodeLog)
	}
	if code, out, _ := runBin(t, "dvm", "list"); code != 0 || !listedNodes(out, id, "1") {
		t.Errorf("dvm list after the shrink: %q; want DVM %s with 1 node", out, id)
	}
	// A hostfile names the new nodes (on a local DVM they are virtual
	// nodes of this host, named as listed).
	hf := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hf, []byte("# more\nhx slots=2\nhy:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runBin(t, "dvm", "grow", "--dvm", id, "--hostfile", hf); code != 0 || !strings.Contains(out, "node hx joined") || !strings.Contains(out, "node hy joined") {
		t.Fatalf("dvm grow --hostfile: exit %d, %q, %q", code, out, errOut)
	}
	if st := statusOf(t, id); !slices.Equal(nodeNames(st), []string{"node0", "hx", "hy"}) || st.Slots != 4 {
		t.Fatalf("after the grow by a hostfile: nodes %v, %d slots", nodeNames(st), st.Slots)
	}
	code, out, _ = runBin(t, "dvm", "status", "--dvm", id)
	if code != 0 || !strings.Contains(out, "node changes:") || !strings.Contains(out, "node node1 left the DVM") {
		t.Errorf("dvm status does not show the node changes: %q", out)
	}
}

// TestDVMGrowJoinCLI: growing a join DVM prints the command that joins
// the new node's daemon, waits for it, and a shrink stops that daemon.
func TestDVMGrowJoinCLI(t *testing.T) {
	dynDir(t)
	id := startDVM(t, "--launcher", "join", "--nodes", "1", "--slots", "1")
	grow := exec.Command(bin, "dvm", "grow", "--dvm", id, "--host", "hj:2", "--timeout", "60s")
	var out strings.Builder
	grow.Stdout = &out
	stderr, err := grow.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := grow.Start(); err != nil {
		t.Fatal(err)
	}
	joinCmd := readJoinCommand(t, stderr)
	// The command is printed once the master expects the daemon (one
	// that registered earlier would be refused).
	for _, n := range statusOf(t, id).Nodes {
		if n.Name == "hj" && n.State != "starting" {
			t.Fatalf("node hj is %q when its join command is printed, want starting", n.State)
		}
	}
	if names := nodeNames(statusOf(t, id)); !slices.Contains(names, "hj") {
		t.Fatalf("node hj not in the DVM when its join command is printed: %v", names)
	}
	f := strings.Fields(joinCmd)
	if f[1] != "dynrun" || f[2] != "daemon" || !slices.Contains(f, "hj") {
		t.Fatalf("join command %q", joinCmd)
	}
	daemon := exec.Command(bin, f[2:]...)
	daemon.Env = append(os.Environ(), f[0])
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	if err := grow.Wait(); err != nil || !strings.Contains(out.String(), "node hj joined DVM "+id+": 2 slots") {
		t.Fatalf("dvm grow: %v, %q", err, out.String())
	}
	code, got, errOut := runBin(t, "--dvm", id, "-n", "3", "sh", "-c", `echo "$DYNRT_NODE"`)
	if code != 0 || strings.Count(got, "hj") != 2 {
		t.Fatalf("job: exit %d, %q, %q; want 2 ranks on hj", code, got, errOut)
	}
	if code, _, errOut := runBin(t, "dvm", "shrink", "--dvm", id, "--node", "hj"); code != 0 {
		t.Fatalf("dvm shrink: exit %d, %q", code, errOut)
	}
	if err := daemon.Wait(); err != nil {
		t.Errorf("the joined daemon after the shrink: %v", err)
	}
}
