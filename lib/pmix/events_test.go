//go:build pmix

package pmix

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// eventer is a Handler that answers each client's event to the host
// with an event to that client alone, and records job control requests.
type eventer struct {
	recorder
	mu     sync.Mutex
	events []string
	ctls   []string
	// of the last Notify
	notifyErr error
}

func (e *eventer) ClientEvent(ev ClientEvent) {
	var kv []string
	for _, in := range ev.Info {
		if !strings.HasPrefix(in.Key, "pmix.") {
			kv = append(kv, in.Key+"="+in.Value)
		}
	}
	e.mu.Lock()
	e.events = append(e.events, fmt.Sprintf("%d from %s range %d %v", ev.Status, ev.Source, ev.Range, kv))
	e.mu.Unlock()
	err := e.s.Notify(Event{
		Status:   -3602,
		Targets:  []Proc{ev.Source},
		Affected: []Proc{{ev.Source.Nspace, 1}, {"elsewhere", 4}},
		Info: []Info{
			{"dynrt.for", fmt.Sprint(ev.Source.Rank)},
			{"dynrt.n", uint32(3)},
			{"dynrt.names", []string{"a", "b"}},
		},
	})
	if err != nil {
		e.mu.Lock()
		e.notifyErr = err
		e.mu.Unlock()
	}
}

// Fence completes with the local part, from another goroutine as a
// daemon does (the events client commits nothing, so the recorder's
// direct modex would wait for ever).
func (e *eventer) Fence(_ []Proc, _ bool, data []byte, done func([]byte, error)) {
	time.AfterFunc(10*time.Millisecond, func() { done(data, nil) })
}

func (e *eventer) JobControl(p Proc, targets []Proc, ctl JobCtl, done func()) {
	e.mu.Lock()
	e.ctls = append(e.ctls, fmt.Sprintf("%s %v %+v", p, targets, ctl))
	e.mu.Unlock()
	done()
}

// TestNotify: a client's event to its host (PMIX_RANGE_RM) reaches the
// Handler's EventReceiver with its source and info, and Server.Notify
// brings an event with strings, integers, arrays and affected processes
// to exactly the clients it targets (each rank gets the one meant for
// it, from the server).
func TestNotify(t *testing.T) {
	s, _, mark := setup(t)
	bin := program(t, t.TempDir(), "events")
	h := &eventer{recorder: recorder{s: s}}
	outs, codes := run(t, s, bin, oneNode(t, "ev-a", 2), h, mark, "notify")
	for r := range 2 {
		want := fmt.Sprintf("rank %d notify: SUCCESS\nrank %d event -3602 from other:0: pmix.evaffected=job:1,other:4 dynrt.for=%d dynrt.n=3 dynrt.names=a,b\n", r, r, r)
		if codes[r] != 0 || outs[r] != want {
			t.Errorf("rank %d: exit %d, output\n%s\nwant\n%s", r, codes[r], outs[r], want)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	slices.Sort(h.events)
	want := []string{"-3601 from ev-a:0 range 1 [dynrt.test=hello dynrt.n=7]", "-3601 from ev-a:1 range 1 [dynrt.test=hello dynrt.n=7]"}
	if !slices.Equal(h.events, want) {
		t.Errorf("events at the host %q, want %q", h.events, want)
	}
	if h.notifyErr != nil { // under h.mu
		t.Errorf("Notify: %v", h.notifyErr)
	}
	if err := s.Notify(Event{Status: -3602}); err == nil {
		t.Error("Notify without targets: no error")
	}
}

// TestJobControl: PMIx_Job_control_nb with PMIX_JOB_CTRL_KILL or
// PMIX_JOB_CTRL_SIGNAL reaches the Handler's JobController with the
// requestor and the targets; the client is answered at once, as
// mpirun.openmpi's runtime does (dynGoJobControl). Four jobs in a row, each with a rank on a node that
// never runs it, in one server: their clients hung in PMIx_Init or their
// fence now and then before closesock.c (a deregistered client's socket
// number left unwatched).
func TestJobControl(t *testing.T) {
	s, _, mark := setup(t)
	bin := program(t, t.TempDir(), "events")
	t.Setenv("EVENTS_NO_WAIT", "1") // a granted kill of its own job: no wait to be killed
	for i, tc := range []struct {
		args    []string
		wantCtl string
	}{
		{[]string{"kill", "1"}, "jc-%d:0 [jc-%d:1] {Kill:true Signal:0}"},
		{[]string{"signal", "1", "10"}, "jc-%d:0 [jc-%d:1] {Kill:false Signal:10}"},
		{[]string{"kill", "all"}, "jc-%d:0 [jc-%d:*] {Kill:true Signal:0}"},
		{[]string{"kill", "2"}, "jc-%d:0 [jc-%d:2] {Kill:true Signal:0}"},
	} {
		h := &eventer{recorder: recorder{s: s}}
		ns := fmt.Sprintf("jc-%d", i)
		job := &Job{Nspace: ns, Size: 2, Nodes: []string{"n0", "n1"}, RankNode: []int{0, 1}}
		outs, codes := run(t, s, bin, job, h, mark, tc.args...)
		if want := "rank 0 job control: SUCCESS\n"; codes[0] != 0 || outs[0] != want {
			t.Errorf("%v: exit %d, output %q, want %q", tc.args, codes[0], outs[0], want)
		}
		// The Handler runs after the answer: wait for it a little.
		want := strings.ReplaceAll(tc.wantCtl, "%d", fmt.Sprint(i))
		deadline := time.Now().Add(10 * time.Second)
		for {
			h.mu.Lock()
			got := slices.Clone(h.ctls)
			h.mu.Unlock()
			if len(got) == 1 && got[0] == want || time.Now().After(deadline) {
				if len(got) != 1 || got[0] != want {
					t.Errorf("%v: job control calls %q, want %q", tc.args, got, want)
				}
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
