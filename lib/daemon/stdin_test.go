package daemon

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// TestStdinStream: pieces arrive in order, EOF closes the pipe, and
// nothing more is accepted after it.
func TestStdinStream(t *testing.T) {
	var tab stdinTable
	key := procKey{"dvm1.1", 0}
	s := tab.open(key)
	ctx := context.Background()
	for _, p := range []stdinPiece{{data: []byte("ab")}, {data: []byte("c")}, {data: []byte("d"), eof: true}} {
		if err := s.push(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.push(ctx, stdinPiece{data: []byte("x")}); !errors.Is(err, wire.ErrState) {
		t.Errorf("push after EOF: %v, want ErrState", err)
	}
	got, err := io.ReadAll(s.r)
	if err != nil || string(got) != "abcd" {
		t.Errorf("read %q, %v; want abcd", got, err)
	}
	tab.drop(key)
	if tab.get(key) != nil {
		t.Error("stream still listed after drop")
	}
}

// TestStdinStreamDrop: a process that never reads fills the queue; the
// waiting push is released when the process goes.
func TestStdinStreamDrop(t *testing.T) {
	var tab stdinTable
	key := procKey{"dvm1.1", 0}
	s := tab.open(key)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// One piece blocks in the pipe write, stdinQueue more fill the queue.
	for range stdinQueue + 1 {
		if err := s.push(ctx, stdinPiece{data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- s.push(ctx, stdinPiece{data: []byte("y")}) }()
	tab.drop(key)
	if err := <-errc; !errors.Is(err, wire.ErrState) {
		t.Errorf("push to a dropped stream: %v, want ErrState", err)
	}
	if _, err := s.r.Read(make([]byte, 1)); err == nil {
		t.Error("reader still open after drop")
	}
}
