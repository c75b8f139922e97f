package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/testapp/identity"

	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/wire"
)

// TestInitOutsideDynrun checks the error of a process that dynrun did not
// start: it names the first missing variable.
func TestInitOutsideDynrun(t *testing.T) {
	env := map[string]string{}
	for _, tc := range []struct{ set, missing string }{
		{"", "DYNRT_DAEMON"},
		{"DYNRT_DAEMON", "DYNRT_JOB"},
		{"DYNRT_JOB", "DYNRT_RANK"},
	} {
		if tc.set != "" {
			env[tc.set] = "x"
		}
		_, err := session.Init(context.Background(), session.WithEnv(func(k string) string { return env[k] }))
		if !errors.Is(err, session.ErrNoRuntime) || !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), tc.missing) {
			t.Errorf("with %v: Init error %v, want one naming %s", env, err, tc.missing)
		}
	}
	env["DYNRT_RANK"] = "-1"
	if _, err := session.Init(context.Background(), session.WithEnv(func(k string) string { return env[k] })); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("bad rank: %v", err)
	}
}

// Report is what `testapp identity` prints.
type Report = identity.Report

// TestIdentity runs 8 processes over 4 virtual nodes and checks what each
// learns about itself and its sets.
func TestIdentity(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 4, 8)
	rep, lines := d.run(8, wire.MapByNode, "identity")
	nodeOf := map[uint32]string{}
	peers := map[string][]uint32{}
	for _, pl := range rep.Placement {
		for r := range pl.Ranks.All() {
			nodeOf[r] = pl.Node
			peers[pl.Node] = append(peers[pl.Node], r)
		}
	}
	if len(nodeOf) != 8 || len(peers) != 4 {
		t.Fatalf("placement %v: want 8 ranks on 4 nodes", rep.Placement)
	}
	id := d.m.Info().ID
	app := session.AppSet(rep.App)
	wantNames := []string{session.Self, session.Shared, session.World, app}
	all := wire.Span(0, 7)
	seen := map[uint32]bool{}
	for rank, ls := range lines {
		if len(ls) != 1 || !strings.HasPrefix(ls[0], "identity ") {
			t.Fatalf("rank %d printed %q", rank, ls)
		}
		var r Report
		if err := json.Unmarshal([]byte(strings.TrimPrefix(ls[0], "identity ")), &r); err != nil {
			t.Fatalf("rank %d: %v", rank, err)
		}
		if r.Rank != rank || seen[r.Rank] {
			t.Fatalf("output of rank %d reports rank %d (seen before: %v)", rank, r.Rank, seen[r.Rank])
		}
		seen[r.Rank] = true
		node := nodeOf[rank]
		local := peers[node]
		want := Report{
			Rank: rank, UID: wire.ProcUID(rep.ID, rank), Job: rep.Job, App: rep.App, Node: node, DVM: id, Size: 8,
			LocalRank: slices.Index(local, rank), LocalPeers: local,
		}
		got := r
		got.Env, got.Names, got.Sets, got.Info = nil, nil, nil, nil
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("rank %d identity\n got %+v\nwant %+v", rank, got, want)
		}
		for k, v := range map[string]string{
			"DYNRT_RANK": strconv.Itoa(int(rank)), "DYNRT_UID": strconv.FormatUint(want.UID, 10), "DYNRT_JOB": rep.Job,
			"DYNRT_APP": rep.App, "DYNRT_NODE": node, "DYNRT_DVM": id, "DYNRT_SIZE": "8",
			"DYNRT_DAEMON": filepath.Join(d.dir, id, node+".sock"),
		} {
			if r.Env[k] != v {
				t.Errorf("rank %d: %s=%q, want %q", rank, k, r.Env[k], v)
			}
		}
		if !slices.Equal(r.Names, wantNames) {
			t.Errorf("rank %d: set names %q, want %q", rank, r.Names, wantNames)
		}
		for name, members := range map[string]wire.RankRanges{
			session.World: all, app: all, session.Self: wire.Span(rank, rank), session.Shared: wire.RangesOf(local),
		} {
			p := r.Sets[name]
			if p.Name != name || p.Job != rep.Job || p.Size != members.Count() || p.Members.String() != members.String() || !p.Active || p.Version != 0 {
				t.Errorf("rank %d: set %s: %+v, want members %s", rank, name, p, members)
			}
			info := r.Info[name]
			if info["mpi_size"] != strconv.Itoa(members.Count()) || info["mpi_ps_version"] != "0" || info["mpi_ps_active"] != "true" || info["mpi_ps_epoch"] == "" {
				t.Errorf("rank %d: info of %s: %v", rank, name, info)
			}
		}
	}
	if len(seen) != 8 {
		t.Errorf("%d ranks reported, want 8", len(seen))
	}
}

// TestExchange has 32 processes on 4 nodes commit a value, fence and read
// their ring neighbours' values (most of them on another node), twice with
// new values, with and without collecting the data in the fence.
func TestExchange(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 4, 8)
	const n = 32
	for _, mode := range [][]string{{"exchange"}, {"exchange", "collect"}} {
		rep, lines := d.run(n, "", mode...)
		nodes := map[string]bool{}
		for _, pl := range rep.Placement {
			nodes[pl.Node] = true
		}
		if len(nodes) != 4 {
			t.Fatalf("%v: placement %v, want 4 nodes", mode, rep.Placement)
		}
		for r := range uint32(n) {
			var want []string
			for round := 1; round <= 2; round++ {
				for _, p := range []uint32{(r + n - 1) % n, (r + 1) % n, r} {
					want = append(want, fmt.Sprintf("r%d-%d", round, p))
				}
			}
			wantLine := fmt.Sprintf("exchange %d %s", r, strings.Join(want, " "))
			if got := lines[r]; len(got) != 1 || got[0] != wantLine {
				t.Errorf("%v: rank %d printed %q, want %q", mode, r, got, wantLine)
			}
		}
	}
}

// TestPublishLookup has one job wait in a lookup for a key that another
// job, launched later on the same DVM (and on another node), publishes;
// the first job then reads data the publisher committed and publishes an
// acknowledgement the publisher waits for.
func TestPublishLookup(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 1)
	looker := d.launch(1, "", "lookup", "rendezvous")
	d.waitLine(looker.Job, "waiting rendezvous")
	time.Sleep(50 * time.Millisecond) // let the lookup reach the master (correct either way)
	pub := d.launch(1, "", "publish", "rendezvous", "hello")
	for _, j := range []string{looker.Job, pub.Job} {
		if end := d.wait(j); end.State != wire.JobStateDone {
			t.Fatalf("job %s ended %s (%d): %s\n%v", j, end.State, end.Code, end.Msg, d.lines(j))
		}
	}
	l := d.lines(looker.Job)[0]
	if len(l) != 3 || l[0] != "waiting rendezvous" || !strings.HasPrefix(l[1], "found rendezvous=hello after ") || l[2] != "got true" {
		t.Errorf("lookup job printed %q", l)
	}
	if p := d.lines(pub.Job)[0]; !slices.Equal(p, []string{"published rendezvous", "acked " + looker.Job}) {
		t.Errorf("publish job printed %q", p)
	}

	// Without wait a missing key is not found; with wait it times out.
	// The acknowledgement outlives its job (DVM range); the key, which
	// its publisher withdrew, can be published again.
	_, lines := d.run(1, "", "lookuptimeout", "rendezvous")
	want := []string{"nowait not_found", "wait timeout", "ack true ", "republish true", "unpublished not_found"}
	if got := lines[0]; !slices.Equal(got, want) {
		t.Errorf("lookuptimeout printed %q, want %q", got, want)
	}
}

// TestGroups checks that the members of a group get the same context id
// and that ids never repeat, across groups and jobs.
func TestGroups(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 4, 4)
	ids := map[uint64]string{}
	for job := range 2 {
		_, lines := d.run(8, wire.MapByNode, "group")
		byName := map[string]map[uint64]bool{}
		for r := range uint32(8) {
			if len(lines[r]) != 1 {
				t.Fatalf("rank %d printed %q", r, lines[r])
			}
			f := strings.Fields(lines[r][0])
			if len(f) != 8 || f[0] != "group" || f[1] != strconv.Itoa(int(r)) || f[2] != "all" || f[6] != "again" {
				t.Fatalf("rank %d printed %q", r, lines[r][0])
			}
			for _, nv := range [][2]string{{"all", f[3]}, {f[4], f[5]}, {"again", f[7]}} {
				cid, err := strconv.ParseUint(nv[1], 10, 64)
				if err != nil || cid == 0 {
					t.Fatalf("rank %d: context id %q", r, nv[1])
				}
				name := fmt.Sprintf("%s of job %d", nv[0], job)
				if byName[name] == nil {
					byName[name] = map[uint64]bool{}
				}
				byName[name][cid] = true
			}
		}
		if len(byName) != 4 {
			t.Fatalf("groups %v, want all, even, odd, again", byName)
		}
		for name, cids := range byName {
			if len(cids) != 1 {
				t.Errorf("members of %s got different ids %v", name, cids)
			}
			for cid := range cids {
				if other, dup := ids[cid]; dup {
					t.Errorf("context id %d of %s was already given to %s", cid, name, other)
				}
				ids[cid] = name
			}
		}
	}
}

// TestAbort: a process aborts its job with a status; the job ends with it.
func TestAbort(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 2)
	rep := d.launch(4, "", "abort", "7")
	end := d.wait(rep.Job)
	if end.Code != 7 || end.Reason != wire.JobEndAbort || end.State != wire.JobStateKilled || !strings.Contains(end.Msg, "testapp was told to abort") {
		t.Errorf("job ended %s, code %d, reason %q, %q", end.State, end.Code, end.Reason, end.Msg)
	}
}

// TestFenceParticipantEnds: a fence with a process that ends without
// entering fails instead of waiting forever.
func TestFenceParticipantEnds(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 1)
	_, lines := d.run(2, "", "fencefail")
	if got := lines[0]; !slices.Equal(got, []string{"fence aborted true"}) {
		t.Errorf("rank 0 printed %q", got)
	}
}

// TestEvents: a process sees another's application event and its exit.
func TestEvents(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 1)
	_, lines := d.run(2, "", "events")
	if got := lines[0]; !slices.Equal(got, []string{"events app:hello:1:1 proc:1:exited"}) {
		t.Errorf("rank 0 printed %q", got)
	}
}

// TestManySessions: two processes on different nodes each open nine
// sessions and use them from sixteen goroutines at once (the test app is
// built with the race detector when the tests are).
func TestManySessions(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 1)
	_, lines := d.run(2, "", "multi")
	for r := range uint32(2) {
		if want := fmt.Sprintf("multi %d ok", r); !slices.Equal(lines[r], []string{want}) {
			t.Errorf("rank %d printed %q, want %q", r, lines[r], want)
		}
	}
}

// BenchmarkFence8 measures a fence over 8 processes on 4 virtual nodes
// (2 each). ns/fence is measured inside the application; ns/op also
// carries the launch of the job, spread over b.N fences.
func BenchmarkFence8(b *testing.B) {
	d := startDVM(b, 4, 2)
	b.ResetTimer()
	_, lines := d.run(8, wire.MapByNode, "fencebench", strconv.Itoa(b.N))
	b.StopTimer()
	var n, ns float64
	if len(lines[0]) != 1 {
		b.Fatalf("rank 0 printed %q", lines[0])
	}
	if _, err := fmt.Sscanf(lines[0][0], "fencebench %g %g", &n, &ns); err != nil {
		b.Fatalf("%q: %v", lines[0][0], err)
	}
	b.ReportMetric(ns/n, "ns/fence")
}

// BenchmarkGetRemote measures a get of a 64-byte value committed by a
// process on another node, fetched through the master every time
// (Refresh), and the same get answered from the local daemon's cache.
func BenchmarkGetRemote(b *testing.B) {
	d := startDVM(b, 2, 1)
	b.ResetTimer()
	_, lines := d.run(2, "", "getbench", strconv.Itoa(b.N))
	b.StopTimer()
	var n, remote, cached float64
	if len(lines[1]) != 1 {
		b.Fatalf("rank 1 printed %q", lines[1])
	}
	if _, err := fmt.Sscanf(lines[1][0], "getbench %g %g %g", &n, &remote, &cached); err != nil {
		b.Fatalf("%q: %v", lines[1][0], err)
	}
	b.ReportMetric(remote/n, "ns/get-remote")
	b.ReportMetric(cached/n, "ns/get-cached")
}
