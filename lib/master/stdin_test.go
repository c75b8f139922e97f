package master

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// TestStdin: job.stdin reaches rank 0 only, from the launcher only, and
// EOF ends the process's input.
func TestStdin(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 1)
	rep, err := d.launch(wire.JobLaunchReq{Argv: []string{"/bin/cat"}, N: 2, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, piece := range []string{"one\ntw", "o\n"} {
		if err := d.c.Stdin(ctx, rep.Job, 0, []byte(piece), false); err != nil {
			t.Fatalf("stdin %q: %v", piece, err)
		}
	}
	if err := d.c.Stdin(ctx, rep.Job, 1, []byte("x"), false); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("stdin to rank 1: %v, want ErrInvalid", err)
	}
	other := d.attach()
	defer other.Close()
	if err := other.Stdin(ctx, rep.Job, 0, []byte("x"), false); !errors.Is(err, wire.ErrPermission) {
		t.Errorf("stdin from another tool: %v, want ErrPermission", err)
	}
	if err := d.c.Stdin(ctx, rep.Job, 0, []byte("three"), true); err != nil {
		t.Fatalf("stdin with EOF: %v", err)
	}
	if err := d.c.Stdin(ctx, rep.Job, 0, []byte("late"), false); err == nil {
		t.Errorf("stdin after EOF accepted")
	}
	if end := d.wait(rep.Job); end.State != wire.JobStateDone {
		t.Fatalf("job %+v", end)
	}
	var got []string
	for _, l := range d.output(rep.Job) {
		if l.Rank != 0 {
			t.Errorf("rank %d printed %q: it should read /dev/null", l.Rank, l.Line)
			continue
		}
		got = append(got, string(l.Line))
	}
	if want := []string{"one", "two", "three"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("rank 0 printed %q, want %q", got, want)
	}

	// A job launched without a stream refuses input.
	rep, end := d.run(wire.JobLaunchReq{Argv: []string{"/bin/cat"}, N: 1})
	if end.State != wire.JobStateDone {
		t.Fatalf("job %+v", end)
	}
	if err := d.c.Stdin(ctx, rep.Job, 0, []byte("x"), false); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("stdin to a job without a stream: %v, want ErrInvalid", err)
	}
}
