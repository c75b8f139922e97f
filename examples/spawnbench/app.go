package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/dynrt/dynrt/lib/comm"
	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/wire"
)

// config is what the flags say.
type config struct {
	ks       []int
	rounds   int
	warmup   int
	rate     int
	blocking bool
	tcp      bool
	timeout  time.Duration
	grace    time.Duration
}

// Main runs spawnbench with args (args[0] is the program name) and returns
// the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	start := time.Now()
	if len(args) > 1 && args[1] == "report" {
		if err := report(args[2:], stdout); err != nil {
			fmt.Fprintln(stderr, "spawnbench report:", err)
			return 1
		}
		return 0
	}
	fs := flag.NewFlagSet("spawnbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	ks := fs.String("k", "1,4,8", "grow sizes, comma-separated")
	fs.IntVar(&c.rounds, "rounds", 10, "counted rounds per grow size")
	fs.IntVar(&c.warmup, "warmup", 1, "uncounted rounds per grow size before the counted ones")
	fs.IntVar(&c.rate, "rate", 16, "grows by one of the rate run (0: none)")
	fs.BoolVar(&c.blocking, "blocking", true, "wait for the accept request at once (else test it first, then wait)")
	fs.BoolVar(&c.tcp, "tcp", false, "communicators over TCP even on one host")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "overall limit")
	fs.DurationVar(&c.grace, "grace", 0, "SUB grace period (0: the runtime's default)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	var err error
	if c.ks, err = parseKs(*ks); err != nil || c.rounds < 0 || c.warmup < 0 || c.rate < 0 {
		if err == nil {
			err = fmt.Errorf("negative -rounds, -warmup or -rate")
		}
		fmt.Fprintln(stderr, "spawnbench:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := run(ctx, c, start, stdout, log); err != nil {
		fmt.Fprintln(stdout, "ERROR", jsonOf(map[string]any{"err": err.Error()}))
		fmt.Fprintln(stderr, "spawnbench:", err)
		return 1
	}
	return 0
}

func parseKs(s string) ([]int, error) {
	var ks []int
	for _, f := range strings.Split(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 {
			return nil, fmt.Errorf("grow size %q: want a positive integer", f)
		}
		ks = append(ks, k)
	}
	return ks, nil
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// bench is one process of the benchmark job.
type bench struct {
	c   config
	s   *session.Session
	ep  *comm.Endpoint
	out io.Writer
	log *slog.Logger
	app string     // the application set
	cur *comm.Comm // over the version of the application set this process belongs to
}

// stamps are a new process's own times (unix ns), sent to rank 0 after the
// barrier so that a round can be broken down.
type stamps struct {
	Start   int64 `json:"start"`   // main entered
	Init    int64 `json:"init"`    // session open
	Open    int64 `json:"open"`    // endpoint open and published (while Confirm runs)
	Confirm int64 `json:"confirm"` // Confirm returned
	Comm    int64 `json:"comm"`    // communicator built
	Barrier int64 `json:"barrier"` // barrier done
}

func run(ctx context.Context, c config, start time.Time, out io.Writer, log *slog.Logger) (err error) {
	st := stamps{Start: start.UnixNano()}
	s, err := session.Init(ctx, session.WithLogger(log))
	if err != nil {
		return err
	}
	st.Init = time.Now().UnixNano()
	defer func() {
		if ferr := s.Finalize(context.WithoutCancel(ctx)); err == nil {
			err = ferr
		}
	}()
	b := &bench{c: c, s: s, out: out, log: log, app: session.AppSet(s.App())}
	q, err := s.QueryRC(ctx, session.QueryOptions{Bound: session.Self})
	if err != nil {
		return err
	}
	newcomer := q.Incl && q.Type == wire.RCAdd && (q.Status == wire.RCAnnounced || q.Status == wire.RCPending)
	if !newcomer && s.Rank() != 0 {
		return wire.Errorf(wire.ErrInvalid, "spawnbench: rank %d is neither rank 0 nor started by a grow: launch with -n 1", s.Rank())
	}
	// A new process opens its endpoint while it confirms: nobody needs
	// the endpoint before the confirmation, and both wait on the runtime.
	type opened struct {
		ep  *comm.Endpoint
		at  int64
		err error
	}
	och := make(chan opened, 1)
	go func() {
		ep, err := comm.Open(ctx, s, comm.Options{Logger: log, TCPOnly: c.tcp})
		och <- opened{ep, time.Now().UnixNano(), err}
	}()
	var set wire.PsetRef
	var cerr error
	if newcomer {
		if set, cerr = s.Confirm(ctx, q.Delta, session.ConfirmOptions{}); cerr != nil {
			cerr = fmt.Errorf("confirm %s: %w", q.Delta, cerr)
		}
		st.Confirm = time.Now().UnixNano()
	}
	o := <-och
	if o.err != nil {
		return o.err
	}
	b.ep = o.ep
	defer b.ep.Close()
	st.Open = o.at
	if cerr != nil {
		return cerr
	}
	if !newcomer {
		return b.drive(ctx)
	}
	if err := b.join(ctx, set, st); err != nil {
		return err
	}
	return b.follow(ctx)
}

// join is the rest of a new process's part of its grow: build the
// communicator over the new set and enter its barrier; then it sends its
// stamps to rank 0.
func (b *bench) join(ctx context.Context, set wire.PsetRef, st stamps) error {
	c, err := b.ep.New(ctx, set, "spawnbench")
	if err != nil {
		return err
	}
	st.Comm = time.Now().UnixNano()
	if err := c.Barrier(ctx); err != nil {
		return fmt.Errorf("barrier over %s@%d: %w", set.Name, set.Version, err)
	}
	st.Barrier = time.Now().UnixNano()
	b.cur = c
	_, err = c.Gather(ctx, 0, []byte(jsonOf(st)))
	return err
}

// follow is the life of a process started by a grow after it joined:
// take part in every later change of the application set until a SUB
// removes it.
func (b *bench) follow(ctx context.Context) error {
	for {
		// QueryRC reports only a change that needs this process.
		r, err := b.s.WaitRC(ctx, session.QueryOptions{Bound: b.app}, func(r session.RC) bool { return !r.Null() })
		if err != nil {
			return err
		}
		switch {
		case r.Status == wire.RCAborted:
			return wire.Errorf(wire.ErrAborted, "spawnbench: change %s aborted: %s", r.Delta, r.Record.Reason)
		case r.Type == wire.RCAdd:
			if _, _, err := b.grown(ctx, r.Delta, session.SetVersion{}); err != nil {
				return err
			}
		default:
			acc, err := b.accept(ctx, r.Delta, session.SetVersion{})
			if err != nil {
				return fmt.Errorf("accept %s: %w", r.Delta, err)
			}
			if !acc.Terminate {
				// Every shrink of this benchmark removes every process but rank 0.
				return wire.Errorf(wire.ErrState, "spawnbench: rank %d survived shrink %s", b.s.Rank(), r.Delta)
			}
			return b.cur.Free(ctx)
		}
	}
}

// accept is phase 3 over the current communicator; rank 0 names newSet.
// -blocking waits for the request at once; otherwise it is tested first
// (the way a program that goes on working would look at it).
func (b *bench) accept(ctx context.Context, delta string, newSet session.SetVersion) (session.AcceptResult, error) {
	req := b.s.Accept(ctx, delta, session.AcceptOptions{Bound: b.app, NewSet: newSet, Over: b.cur})
	if !b.c.blocking {
		if res, done, err := req.Test(); done {
			return res, err
		}
	}
	return req.Wait(ctx)
}

// growTimes are rank 0's own times of one grow (unix ns).
type growTimes struct {
	Request, Announced, PsetOp, Accepted, Comm, Barrier int64
}

// grown is phase 3 of an ADD for the processes already in the job, and the
// new communicator: accept over the current communicator (rank 0 names
// newSet), wait for the confirmation, build the communicator over the new
// set and enter its barrier. It returns the times of these steps and, at
// rank 0, the new processes' stamps (gathered after the barrier, untimed).
func (b *bench) grown(ctx context.Context, delta string, newSet session.SetVersion) (growTimes, []stamps, error) {
	var t growTimes
	acc, err := b.accept(ctx, delta, newSet)
	if err != nil {
		return t, nil, fmt.Errorf("accept %s: %w", delta, err)
	}
	t.Accepted = time.Now().UnixNano()
	c, err := b.ep.New(ctx, acc.NewSet, "spawnbench")
	if err != nil {
		return t, nil, err
	}
	t.Comm = time.Now().UnixNano()
	if err := c.Barrier(ctx); err != nil {
		return t, nil, fmt.Errorf("barrier over %s@%d: %w", acc.NewSet.Name, acc.NewSet.Version, err)
	}
	t.Barrier = time.Now().UnixNano()
	old := b.cur
	b.cur = c
	if err := old.Free(ctx); err != nil {
		return t, nil, err
	}
	blocks, err := c.Gather(ctx, 0, nil)
	if err != nil {
		return t, nil, fmt.Errorf("gather the new processes' times: %w", err)
	}
	var sts []stamps
	for _, blk := range blocks {
		if len(blk) == 0 {
			continue // a process that was there before
		}
		var st stamps
		if err := json.Unmarshal(blk, &st); err != nil {
			return t, nil, wire.Errorf(wire.ErrMalformed, "spawnbench: times of a new process: %w", err)
		}
		sts = append(sts, st)
	}
	return t, sts, nil
}
