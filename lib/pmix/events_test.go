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
// with an event to that client alone.
type eventer struct {
	recorder
	mu     sync.Mutex
	events []string
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
