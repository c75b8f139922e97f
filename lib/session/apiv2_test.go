package session_test

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/sigstop"
	"github.com/dynrt/dynrt/lib/session"
)

// TestQueryNeedsCaller: QueryRC reports a change only while it needs the
// caller (docs/session.md, "Migrating from v1"). The members see an ADD
// until they accept it, then NULL (v1: FINALIZED, forever); its new
// process sees it until it confirms, then NULL; an ADD nobody accepts is
// reported ABORTED once, then NULL, even when a WaitFailure looked at it
// first (WaitRC takes an abort only if its done accepts it). JobInfo
// during the ADD already counts the new process (the job after the
// announced change), and the query is NULL as soon as the accept request
// is started.
func TestQueryNeedsCaller(t *testing.T) {
	d := startDVM(t, 1, 4)
	_, lines := d.run(2, "", "rcquery")
	member := []string{
		"q start NULL NULL", "q seen ADD ANNOUNCED", "jobinfo 3", "q accepting NULL NULL", "q accepted NULL NULL",
		"q seen2 ADD ANNOUNCED", "q aborted ADD ABORTED", "q again NULL NULL",
	}
	want := map[uint32][]string{
		0: member, 1: member,
		2: {"q new ADD true", "q confirmed NULL NULL", "q seen2 ADD ANNOUNCED", "q aborted ADD ABORTED", "q again NULL NULL"},
	}
	for r, w := range want {
		if got := lines[r]; !slices.Equal(got, w) {
			t.Errorf("rank %d printed %q, want %q", r, got, w)
		}
	}
}

// TestFenceAfterSub: right after a SUB is accepted, a fence over every
// live process (Fence(nil)) and a group construct over them
// (GroupConstruct with nil members) leave out the removed process that
// has not exited yet; they used to wait for it and fail with "aborted"
// when it exited.
func TestFenceAfterSub(t *testing.T) {
	d := startDVM(t, 1, 3)
	_, lines := d.run(3, "", "fenceaftersub")
	want := map[uint32][]string{0: {"fence ok", "group ok"}, 1: {"fence ok", "group ok"}, 2: {"left ok"}}
	for r, w := range want {
		if got := lines[r]; !slices.Equal(got, w) {
			t.Errorf("rank %d printed %q, want %q", r, got, w)
		}
	}
}

// TestParseSetVersion: "name@version" round trips; a bare name or a bad
// version is refused with a message saying what to write.
func TestParseSetVersion(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{"mpi://app/x@3", "mpi://app/x@3", ""},
		{"mpi://app/x/part@0", "mpi://app/x/part@0", ""},
		{"mpi://app/x", "", "names no version"},
		{"mpi://app/x@-1", "", "version"},
		{"mpi://app/x@v2", "", "version"},
		{"@3", "", ""},
	}
	for _, tt := range tests {
		v, err := session.ParseSetVersion(tt.in)
		switch {
		case tt.want != "" && (err != nil || v.String() != tt.want):
			t.Errorf("ParseSetVersion(%q) = %v, %v; want %s", tt.in, v, err, tt.want)
		case tt.want == "" && err == nil:
			t.Errorf("ParseSetVersion(%q) = %v, want an error", tt.in, v)
		case tt.want == "" && !strings.Contains(err.Error(), tt.err):
			t.Errorf("ParseSetVersion(%q): %v, want it to mention %q", tt.in, err, tt.err)
		}
	}
}

// TestRequestDuringLaunch: a process that asks for a change as soon as it
// runs, while the launch round still waits for another node (its daemon
// stopped for a moment), gets its change once the launch has completed; it
// was refused with "job ... is still being launched" (seen in a CI run of
// spawnbench's TestSmoke).
func TestRequestDuringLaunch(t *testing.T) {
	d := startDVM(t, 2, 1)
	st, err := d.c.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pid := st.Nodes[1].PID
	sigstop.Stop(t, pid)
	cont := time.AfterFunc(500*time.Millisecond, func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	defer cont.Stop()
	_, lines := d.run(2, "node", "rcatstart")
	if got := lines[0]; !slices.Equal(got, []string{"requested SUB"}) {
		t.Errorf("rank 0 printed %q, want the SUB it asked for", got)
	}
}

// TestInitDuringChange: a process of the launch that opens its session
// while a change of its job is in flight is told the job as it is, not as
// the change will leave it: during a SUB of rank 2, ranks 1 and 2 count
// three processes, and rank 2 is among its own local peers and in
// mpi://self/shared (they used to be told a size of 2 and local peers
// without rank 2, so that rank 2 skipped a fence over the launch that the
// others then waited on until it timed out; seen in a CI run of
// TestChaosElastic). During an ADD, rank 1 counts the two processes of
// the launch while the new process counts three.
func TestInitDuringChange(t *testing.T) {
	tests := []struct {
		typ          string
		nodes, slots int
		launch       int
		mapBy        string
		want         map[uint32][]string
	}{
		{"sub", 2, 2, 3, "node", map[uint32][]string{ // by node: ranks 0 and 2 on node1, 1 on node2
			0: {"init size=3 localrank=0 peers=[0 2] shared=0,2", "accepted"},
			1: {"init size=3 localrank=0 peers=[1] shared=1", "accepted"},
			2: {"init size=3 localrank=1 peers=[0 2] shared=0,2", "left"},
		}},
		{"add", 1, 3, 2, "", map[uint32][]string{
			0: {"init size=2 localrank=0 peers=[0 1] shared=0-1", "accepted"},
			1: {"init size=2 localrank=1 peers=[0 1] shared=0-1", "accepted"},
			2: {"init size=3 localrank=2 peers=[0 1 2] shared=0-2", "confirmed"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			d := startDVM(t, tt.nodes, tt.slots)
			_, lines := d.run(tt.launch, tt.mapBy, "initduring", t.TempDir(), tt.typ)
			for r, w := range tt.want {
				if got := lines[r]; !slices.Equal(got, w) {
					t.Errorf("rank %d printed %q, want %q", r, got, w)
				}
			}
		})
	}
}
