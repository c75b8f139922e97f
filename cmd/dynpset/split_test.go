package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares out, with the job's namespace replaced by JOB, with
// testdata/<name> (rewritten with -update).
func golden(t *testing.T, name, job, out string) {
	t.Helper()
	out = strings.ReplaceAll(out, job, "JOB")
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/dynpset -run %s -update writes it)", err, t.Name())
	}
	if out != string(want) {
		t.Errorf("%s differs:\n got:\n%s\nwant:\n%s", path, out, want)
	}
}

// TestOpSplit: `dynpset op split` against a live DVM of 3 virtual nodes,
// job "lu" with ranks 0-1 on node0, 2-3 on node1 and 4 on node2. The
// previews are computed by the tool, the definitions by the master; the
// outputs are golden files. Bad splits exit 1 with the master's (or the
// preview's) words.
func TestOpSplit(t *testing.T) {
	d := startDVM(t, 3, 2)
	lu := d.launch("lu", 5)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	golden(t, "split/bynode-preview.txt", lu.Job, mustRun(t, "op", "split", "mpi://app/lu", "--by-node"))
	golden(t, "split/parts-preview.json", lu.Job, mustRun(t, "op", "split", "mpi://WORLD@0", "--parts", "2", "--job", "lu", "--json"))
	golden(t, "split/bynode-define.json", lu.Job, mustRun(t, "op", "split", "mpi://app/lu", "--by-node", "--define", "--prefix", "node", "--json"))
	golden(t, "split/ranks-define.txt", lu.Job, mustRun(t, "op", "split", "mpi://app/lu", "--ranks", "0,4", "--ranks", "1-3",
		"--define", "--name", "ends", "--name", "mpi://app/lu/middle"))

	// What the master stored: inactive parts with the members shown.
	sh := decode[showJSON](t, mustRun(t, "show", "mpi://app/lu/node/2", "--json"))
	if sh.Members != "4" || sh.Active || sh.Version != 0 || len(sh.Nodes) != 1 || sh.Nodes[0].Node != "node2" {
		t.Errorf("node/2 as stored: %+v", sh)
	}
	sh = decode[showJSON](t, mustRun(t, "show", "mpi://app/lu/middle", "--json"))
	if sh.Members != "1-3" || sh.Active {
		t.Errorf("middle as stored: %+v", sh)
	}

	// Active parts in a running application need --force.
	if code, _, errOut := run("op", "split", "mpi://app/lu", "--parts", "2", "--define", "--active"); code != 1 || !strings.Contains(errOut, "--force") {
		t.Errorf("active parts without --force: exit %d, %q", code, errOut)
	}
	res := decode[splitJSON](t, mustRun(t, "op", "split", "mpi://app/lu", "--parts", "2", "--define", "--active", "--force", "--json"))
	if !res.Defined || len(res.Parts) != 2 || !strings.HasPrefix(res.Parts[0].Name, "mpi://app/lu/split-") || !*res.Parts[1].Active || res.Parts[1].Members != "3-4" {
		t.Errorf("generated names: %+v", res)
	}
	if code, _, errOut := run("op", "split", "mpi://app/lu", "--parts", "2", "--define", "--name", "z", "--name", res.Parts[1].Name); code != 1 ||
		!strings.Contains(errOut, res.Parts[1].Name+" is an active set of running application lu") {
		t.Errorf("over an active part without --force: exit %d, %q", code, errOut)
	}

	delta, err := d.c.RequestRC(ctx, wire.RCRequest{Job: lu.Job, Type: wire.RCAdd, N: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"op", "split", "mpi://app/lu", "--parts", "6"}, 1, "cannot split mpi://app/lu (5 members) into 6 parts: want 1 to 5"},
		{[]string{"op", "split", "mpi://app/lu", "--ranks", "0-2", "--ranks", "2-4"}, 1, "in more than one part: 2"},
		{[]string{"op", "split", "mpi://app/lu", "--ranks", "0-2"}, 1, "members in no part: 3-4"},
		{[]string{"op", "split", "mpi://app/lu", "--ranks", "0-4", "--ranks", "9"}, 1, "not members: 9"},
		{[]string{"op", "split", "mpi://app/lu/nosuch", "--parts", "1"}, 1, "no process set mpi://app/lu/nosuch"},
		{[]string{"op", "split", "mpi://app/lu@7", "--parts", "1"}, 1, "no version 7"},
		{[]string{"op", "split", delta.Delta, "--parts", "1"}, 1, "delta set records a resource change"},
		{[]string{"op", "split", "mpi://app/lu", "--by-node", "--define", "--name", "a"}, 2, "1 --name given for 3 parts"},
		{[]string{"op", "split", "mpi://app/lu", "--by-node", "--define", "--prefix", "mpi://app/other/x"}, 2, "application domain mpi://app/lu/..."},
	} {
		code, out, errOut := run(c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d (want %d), stderr %q (want %q), stdout %q", c.args, code, c.code, errOut, c.want, out)
		}
	}
}
