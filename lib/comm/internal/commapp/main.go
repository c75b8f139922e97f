// Command commapp is the test program of lib/comm: launched by the
// package's tests on a throw-away DVM, it builds communicators and checks
// what they deliver. Every line it prints is a word and a JSON object:
//
//	OK       the checks of a mode passed (rank, size, ...)
//	STATE    -mode adapt: a change ended for this process (delta, status, size, sum)
//	LEFT     -mode adapt: a SUB removed this process
//	KILLED   -mode killed: what each operation with the killed rank gave
//	BENCH    -mode bench: rank 0's timing (op, n, ns per operation)
//	ERROR    a check failed (exit code 1)
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/dynrt/dynrt/lib/comm"
	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/wire"
)

type config struct {
	mode     string
	tcp      bool
	last     int
	blocking bool
	rootLast bool
	dieNew   int
	rootLate bool
	bench    string
	n        int
	timeout  time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.mode, "mode", "check", "check, holes, overlap, exit, killed, adapt or bench")
	flag.BoolVar(&c.tcp, "tcp", false, "TCP even on this host")
	flag.IntVar(&c.last, "last", 0, "adapt: exit once change number N has ended")
	flag.BoolVar(&c.blocking, "blocking", false, "adapt: wait for the accept request at once (else test it first)")
	flag.BoolVar(&c.rootLast, "root-last", false, "adapt: the highest member of the communicator is the root of every change")
	flag.IntVar(&c.dieNew, "die-new", 0, "adapt: new processes exit with this code before confirming")
	flag.BoolVar(&c.rootLate, "root-late", false, "adapt: the root accepts an ADD only once it is aborted (the other members accept at once)")
	flag.StringVar(&c.bench, "bench", "pingpong", "bench: pingpong, barrier or allreduce")
	flag.IntVar(&c.n, "n", 1000, "bench: iterations")
	flag.DurationVar(&c.timeout, "timeout", 40*time.Second, "overall limit")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if err := run(ctx, c); err != nil {
		say("ERROR", map[string]any{"rank": os.Getenv("DYNRT_RANK"), "err": err.Error()})
		os.Exit(1)
	}
}

func say(word string, v map[string]any) {
	b, _ := json.Marshal(v)
	fmt.Println(word, string(b))
}

type proc struct {
	c   config
	s   *session.Session
	e   *comm.Endpoint
	me  uint32
	app string
}

func run(ctx context.Context, c config) error {
	s, err := session.Init(ctx)
	if err != nil {
		return err
	}
	e, err := comm.Open(ctx, s, comm.Options{TCPOnly: c.tcp, Timeout: 20 * time.Second})
	if err != nil {
		return err
	}
	p := &proc{c: c, s: s, e: e, me: s.Rank(), app: session.AppSet(s.App())}
	switch c.mode {
	case "check":
		err = p.check(ctx)
	case "holes":
		err = p.holes(ctx)
	case "overlap":
		err = p.overlap(ctx)
	case "exit":
		err = p.exit(ctx)
	case "killed":
		err = p.killed(ctx)
	case "agreegone":
		err = p.agreeGone(ctx)
	case "adapt":
		err = p.adapt(ctx)
	case "bench":
		err = p.benchmark(ctx)
	default:
		err = fmt.Errorf("unknown mode %q", c.mode)
	}
	if cerr := e.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, errLeft) {
		err = nil
	}
	if ferr := s.Finalize(ctx); err == nil {
		err = ferr
	}
	return err
}

var errLeft = errors.New("removed by a SUB")

// world is the communicator over the whole application set as launched.
func (p *proc) world(ctx context.Context, tag string) (*comm.Comm, error) {
	return p.e.New(ctx, wire.PsetRef{Name: p.app}, tag)
}

func (p *proc) check(ctx context.Context) error {
	c, err := p.world(ctx, "check")
	if err != nil {
		return err
	}
	if err := checkAll(ctx, c); err != nil {
		return err
	}
	if err := checkSelf(ctx, p.e); err != nil {
		return err
	}
	say("OK", map[string]any{"rank": p.me, "crank": c.Rank(), "size": c.Size(), "cid": c.ContextID()})
	if err := c.Free(ctx); err != nil {
		return err
	}
	if err := c.Send(ctx, 0, 1, nil); !errors.Is(err, wire.ErrState) {
		return fmt.Errorf("send on a freed communicator: %v, want a state error", err)
	}
	return nil
}

// holes: rank 0 makes the set of the processes off its node (ranks with
// gaps when mapped by node); its members check a communicator over it.
func (p *proc) holes(ctx context.Context) error {
	name := p.app + "/holes"
	if p.me == 0 {
		if _, err := p.s.PsetOp(ctx, session.OpDifference, p.app, session.Shared, session.PsetOpOptions{Target: name}); err != nil {
			return err
		}
	}
	if err := p.s.Fence(ctx, nil, false); err != nil {
		return err
	}
	set, err := p.s.PsetInfo(ctx, name)
	if err != nil {
		return err
	}
	if !set.Members.Contains(p.me) {
		say("OK", map[string]any{"rank": p.me, "member": false})
		return nil
	}
	c, err := p.e.New(ctx, wire.PsetRef{Name: set.Name, Version: set.Version}, "holes")
	if err != nil {
		return err
	}
	if want := slices.Index(set.Members.Ranks(), p.me); c.Rank() != want {
		return fmt.Errorf("rank %d in a set with members %s has communicator rank %d, want %d", p.me, set.Members, c.Rank(), want)
	}
	if err := checkAll(ctx, c); err != nil {
		return err
	}
	say("OK", map[string]any{"rank": p.me, "member": true, "crank": c.Rank(), "size": c.Size(), "members": set.Members.String()})
	return c.Free(ctx)
}

// overlap: a communicator over everybody and one over the processes off
// rank 0's node, both with the same tag string, used with the same user
// tags in an interleaved order.
func (p *proc) overlap(ctx context.Context) error {
	name := p.app + "/part"
	if p.me == 0 {
		if _, err := p.s.PsetOp(ctx, session.OpDifference, p.app, session.Shared, session.PsetOpOptions{Target: name}); err != nil {
			return err
		}
	}
	if err := p.s.Fence(ctx, nil, false); err != nil {
		return err
	}
	set, err := p.s.PsetInfo(ctx, name)
	if err != nil {
		return err
	}
	a, err := p.world(ctx, "x")
	if err != nil {
		return err
	}
	if !set.Members.Contains(p.me) {
		if err := ring(ctx, a, "A", 5); err != nil {
			return err
		}
		if _, err := allreduceCheck(ctx, a, 1); err != nil {
			return err
		}
		say("OK", map[string]any{"rank": p.me, "member": false})
		return a.Free(ctx)
	}
	b, err := p.e.New(ctx, wire.PsetRef{Name: set.Name, Version: set.Version}, "x")
	if err != nil {
		return err
	}
	if a.ContextID() == b.ContextID() {
		return fmt.Errorf("two communicators with context id %d", a.ContextID())
	}
	// Sends on both first, receives on B first: a message of A taken by B
	// (or the reverse) shows in the payload.
	const tag = 7
	for i := range 5 {
		ra := a.Isend((a.Rank()+1)%a.Size(), tag, fmt.Appendf(nil, "A %d %d", a.Rank(), i))
		rb := b.Isend((b.Rank()+1)%b.Size(), tag, fmt.Appendf(nil, "B %d %d", b.Rank(), i))
		if err := comm.WaitAll(ctx, ra, rb); err != nil {
			return err
		}
	}
	for _, x := range []struct {
		c *comm.Comm
		w string
	}{{b, "B"}, {a, "A"}} {
		from := (x.c.Rank() - 1 + x.c.Size()) % x.c.Size()
		for i := range 5 {
			got, st, err := x.c.Recv(ctx, comm.AnySource, comm.AnyTag)
			if err != nil {
				return err
			}
			if want := fmt.Sprintf("%s %d %d", x.w, from, i); string(got) != want || st.Source != from || st.Tag != tag {
				return fmt.Errorf("communicator %s got %q from %d tag %d, want %q from %d", x.w, got, st.Source, st.Tag, want, from)
			}
		}
	}
	sa, err := allreduceCheck(ctx, a, 1)
	if err != nil {
		return err
	}
	sb, err := allreduceCheck(ctx, b, 2)
	if err != nil {
		return err
	}
	say("OK", map[string]any{"rank": p.me, "member": true, "sa": sa, "sb": sb})
	if err := b.Free(ctx); err != nil {
		return err
	}
	return a.Free(ctx)
}

// allreduceCheck sums k*(job rank+1) over c and checks it against the
// members.
func allreduceCheck(ctx context.Context, c *comm.Comm, k int64) (int64, error) {
	got, err := comm.Allreduce(ctx, c, comm.Sum, []int64{k * int64(c.JobRank(c.Rank())+1)})
	if err != nil {
		return 0, err
	}
	var want int64
	for r := range c.Size() {
		want += k * int64(c.JobRank(r)+1)
	}
	if got[0] != want {
		return 0, fmt.Errorf("allreduce over %d members: %d, want %d", c.Size(), got[0], want)
	}
	return got[0], nil
}

// ring passes k numbered messages to the next rank and checks those of the
// previous one.
func ring(ctx context.Context, c *comm.Comm, w string, k int) error {
	n := c.Size()
	for i := range k {
		if err := c.Send(ctx, (c.Rank()+1)%n, 7, fmt.Appendf(nil, "%s %d %d", w, c.Rank(), i)); err != nil {
			return err
		}
	}
	from := (c.Rank() - 1 + n) % n
	for i := range k {
		got, _, err := c.Recv(ctx, from, 7)
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("%s %d %d", w, from, i); string(got) != want {
			return fmt.Errorf("ring %s: got %q, want %q", w, got, want)
		}
	}
	return nil
}

// exit: a communicator of 3; rank 2 leaves without a word after a
// barrier; rank 0's receive from it must fail with a closed-connection
// error, and 0 and 1 must still talk. Rank 1 also checks that a receive
// that times out fails with a timeout and takes no later message.
// agreeGone: rank 2 leaves an agreement (the accept over a communicator)
// after its part of the fan-in, before the root's answer; the root's
// decision stands and is its answer although the broadcast to rank 2
// fails (TestAgreementMemberGone).
func (p *proc) agreeGone(ctx context.Context) error {
	c, err := p.world(ctx, "agreegone")
	if err != nil {
		return err
	}
	if c.Size() != 3 {
		return fmt.Errorf("mode agreegone needs 3 processes, not %d", c.Size())
	}
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	agree := c.Agreement()
	switch c.Rank() {
	case 2:
		go func() { _, _ = agree(ctx, 0, nil) }()
		time.Sleep(200 * time.Millisecond) // its fan-in is sent
		if err := p.s.Finalize(ctx); err != nil {
			return err
		}
		os.Exit(0)
	case 0:
		b, err := agree(ctx, 0, func(context.Context) ([]byte, error) {
			time.Sleep(600 * time.Millisecond) // rank 2 is gone meanwhile
			return []byte("decided"), nil
		})
		if err != nil {
			return fmt.Errorf("the root's own decision: %w", err)
		}
		say("AGREED", map[string]any{"rank": p.me, "b": string(b)})
	default:
		b, err := agree(ctx, 0, nil)
		if err != nil {
			return err
		}
		say("AGREED", map[string]any{"rank": p.me, "b": string(b)})
	}
	return nil
}

func (p *proc) exit(ctx context.Context) error {
	c, err := p.world(ctx, "exit")
	if err != nil {
		return err
	}
	if c.Size() != 3 {
		return fmt.Errorf("mode exit needs 3 processes, not %d", c.Size())
	}
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	switch c.Rank() {
	case 2:
		// Gone without closing the endpoint: the kernel closes the
		// sockets, as for a crash.
		if err := p.s.Finalize(ctx); err != nil {
			return err
		}
		os.Exit(0)
	case 0:
		t0 := time.Now()
		_, _, err := c.Recv(ctx, 2, 3)
		if !errors.Is(err, wire.ErrClosed) {
			return fmt.Errorf("receive from a process that exited: %v, want a closed-connection error", err)
		}
		say("GONE", map[string]any{"rank": p.me, "err": err.Error(), "ms": time.Since(t0).Milliseconds()})
		if err := c.Send(ctx, 1, 4, []byte("still here")); err != nil {
			return err
		}
		if err := c.Send(ctx, 2, 4, []byte("to nobody")); !errors.Is(err, wire.ErrClosed) {
			return fmt.Errorf("send to a process that exited: %v, want a closed-connection error", err)
		}
		// A receive that timed out at rank 1 must not have taken this.
		if _, _, err := c.Recv(ctx, 1, 9); err != nil {
			return err
		}
		if err := c.Send(ctx, 1, 8, []byte("late")); err != nil {
			return err
		}
	case 1:
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, _, err := c.Recv(short, 0, 8)
		cancel()
		if !errors.Is(err, wire.ErrTimeout) {
			return fmt.Errorf("receive that nobody answers: %v, want a timeout", err)
		}
		if err := c.Send(ctx, 0, 9, nil); err != nil {
			return err
		}
		got, _, err := c.Recv(ctx, 0, 4)
		if err != nil || string(got) != "still here" {
			return fmt.Errorf("rank 1 got %q, %v", got, err)
		}
		if got, _, err = c.Recv(ctx, 0, 8); err != nil || string(got) != "late" {
			return fmt.Errorf("after a receive timed out: %q, %v", got, err)
		}
	}
	say("OK", map[string]any{"rank": p.me})
	return nil
}

// checkAll runs every operation over c and checks the values.
func checkAll(ctx context.Context, c *comm.Comm) error {
	n, me := c.Size(), c.Rank()
	if c.JobRank(me) != uint32(mustEnv("DYNRT_RANK")) {
		return fmt.Errorf("JobRank(%d) = %d, not my job rank", me, c.JobRank(me))
	}
	if r, ok := c.RankOf(c.JobRank(me)); !ok || r != me {
		return fmt.Errorf("RankOf(JobRank(%d)) = %d, %v", me, r, ok)
	}
	if n > 1 {
		// Order: 20 messages to the next rank, with two tags alternating;
		// receive tag 2's first, then tag 1's: each tag in order.
		next, prev := (me+1)%n, (me-1+n)%n
		var reqs []*comm.Request
		for i := range 20 {
			reqs = append(reqs, c.Isend(next, 1+i%2, []byte(strconv.Itoa(i))))
		}
		for _, tag := range []int{2, 1} {
			for i := tag - 1; i < 20; i += 2 {
				got, st, err := c.Recv(ctx, prev, tag)
				if err != nil {
					return err
				}
				if string(got) != strconv.Itoa(i) || st.Source != prev || st.Tag != tag {
					return fmt.Errorf("from %d tag %d: got %q (source %d tag %d), want %d", prev, tag, got, st.Source, st.Tag, i)
				}
			}
		}
		if err := comm.WaitAll(ctx, reqs...); err != nil {
			return err
		}
		// AnySource/AnyTag: everybody sends its rank to rank 0.
		if me == 0 {
			seen := make([]bool, n)
			for range n - 1 {
				got, st, err := c.Recv(ctx, comm.AnySource, comm.AnyTag)
				if err != nil {
					return err
				}
				if string(got) != strconv.Itoa(st.Source) || st.Tag != 100+st.Source || seen[st.Source] {
					return fmt.Errorf("any source: %q from %d tag %d", got, st.Source, st.Tag)
				}
				seen[st.Source] = true
			}
		} else if err := c.Send(ctx, 0, 100+me, []byte(strconv.Itoa(me))); err != nil {
			return err
		}
		// Nobody sends rank 0 anything else before it has them all.
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		// Irecv posted before the message, Test until done.
		r := c.Irecv(prev, 5)
		if err := comm.SendSlice(ctx, c, next, 5, []float64{float64(me), 0.5}); err != nil {
			return err
		}
		b, _, err := r.Wait(ctx)
		if err != nil {
			return err
		}
		if !r.Test() || len(b) != 16 {
			return fmt.Errorf("irecv: %d bytes, done %v", len(b), r.Test())
		}
		if err := comm.SendSlice(ctx, c, next, 6, []int32{int32(me), -1}); err != nil {
			return err
		}
		v, _, err := comm.RecvSlice[int32](ctx, c, prev, 6)
		if err != nil || !slices.Equal(v, []int32{int32(prev), -1}) {
			return fmt.Errorf("recv slice: %v %v", v, err)
		}
	}
	// Send to self.
	if err := c.Send(ctx, me, 9, []byte("me")); err != nil {
		return err
	}
	if got, _, err := c.Recv(ctx, me, 9); err != nil || string(got) != "me" {
		return fmt.Errorf("self: %q %v", got, err)
	}
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	for _, root := range []int{0, n - 1, n / 2} {
		var in []byte
		if me == root {
			in = bytes.Repeat([]byte{byte(root)}, 1000+root)
		}
		got, err := c.Bcast(ctx, root, in)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, bytes.Repeat([]byte{byte(root)}, 1000+root)) {
			return fmt.Errorf("bcast from %d: %d bytes", root, len(got))
		}
		all, err := c.Gather(ctx, root, []byte(strconv.Itoa(me*me)))
		if err != nil {
			return err
		}
		if (me == root) != (all != nil) {
			return fmt.Errorf("gather at %d: result at rank %d: %v", root, me, all != nil)
		}
		for r, b := range all {
			if string(b) != strconv.Itoa(r*r) {
				return fmt.Errorf("gather at %d: rank %d sent %q", root, r, b)
			}
		}
		red, err := comm.Reduce(ctx, c, root, comm.Max, []int{me, -me})
		if err != nil {
			return err
		}
		if me == root && !slices.Equal(red, []int{n - 1, 0}) {
			return fmt.Errorf("reduce max at %d: %v", root, red)
		}
		if me != root && red != nil {
			return fmt.Errorf("reduce at %d: %v at rank %d", root, red, me)
		}
	}
	all, err := c.Allgather(ctx, []byte(strconv.Itoa(me+7)))
	if err != nil {
		return err
	}
	if len(all) != n {
		return fmt.Errorf("allgather: %d blocks", len(all))
	}
	for r, b := range all {
		if string(b) != strconv.Itoa(r+7) {
			return fmt.Errorf("allgather: rank %d gave %q", r, b)
		}
	}
	// Sums of 0.1*(r+1): the float result must be the same bits on every
	// member (checked by gathering them).
	for _, op := range []comm.Op{comm.Sum, comm.Min, comm.Max} {
		f, err := comm.Allreduce(ctx, c, op, []float64{0.1 * float64(me+1), float64(me)})
		if err != nil {
			return err
		}
		u, err := comm.Allreduce(ctx, c, op, []uint64{uint64(me), 3})
		if err != nil {
			return err
		}
		var want float64
		var wantU uint64
		switch op {
		case comm.Sum:
			want, wantU = float64(n*(n-1)/2), uint64(n*(n-1)/2)
			if u[1] != uint64(3*n) {
				return fmt.Errorf("allreduce sum: %v", u)
			}
		case comm.Min:
			want, wantU = 0, 0
		case comm.Max:
			want, wantU = float64(n-1), uint64(n-1)
		}
		if f[1] != want || u[0] != wantU {
			return fmt.Errorf("allreduce %s: %v %v", op, f, u)
		}
		bits, err := c.Allgather(ctx, []byte(strconv.FormatFloat(f[0], 'x', -1, 64)))
		if err != nil {
			return err
		}
		for r, b := range bits {
			if !bytes.Equal(b, bits[0]) {
				return fmt.Errorf("allreduce %s: rank %d got %s, rank 0 %s", op, r, b, bits[0])
			}
		}
	}
	return c.Barrier(ctx)
}

func checkSelf(ctx context.Context, e *comm.Endpoint) error {
	s := e.Self()
	if s.Size() != 1 || s.Rank() != 0 {
		return fmt.Errorf("self: size %d rank %d", s.Size(), s.Rank())
	}
	if err := s.Barrier(ctx); err != nil {
		return err
	}
	got, err := comm.Allreduce(ctx, s, comm.Sum, []float32{1.5})
	if err != nil || got[0] != 1.5 {
		return fmt.Errorf("self allreduce: %v %v", got, err)
	}
	return s.Free(ctx)
}

func mustEnv(k string) int {
	v, _ := strconv.Atoi(os.Getenv(k))
	return v
}

// killed: the last rank kills itself with SIGKILL after a barrier (some
// survivors have a connection to it, others never had one); every
// survivor then sends, isends and receives to and from it, runs an
// allreduce over the communicator that still holds it and a receive from
// any rank, and reports the code each gave. Run under dynrun
// --on-failure continue, so that the job outlives the kill.
func (p *proc) killed(ctx context.Context) error {
	c, err := p.world(ctx, "killed")
	if err != nil {
		return err
	}
	dead := c.Size() - 1
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	if c.Rank() == dead {
		pr, _ := os.FindProcess(os.Getpid())
		pr.Kill()
		time.Sleep(time.Minute)
		return errors.New("alive after SIGKILL")
	}
	code := func(err error) string {
		if err == nil {
			return "ok"
		}
		return string(wire.CodeOf(err))
	}
	out := map[string]any{"rank": p.me}
	// No deadline on ctx: a hang would end with the endpoint's timeout
	// (20 s) and show as "timeout".
	octx := context.WithoutCancel(ctx)
	_, _, err = c.Recv(octx, dead, 1)
	out["recv"] = code(err)
	out["send"] = code(c.Send(octx, dead, 1, []byte("to nobody")))
	_, _, err = c.Isend(dead, 2, []byte("to nobody")).Wait(octx)
	out["isend"] = code(err)
	_, err = comm.Allreduce(octx, c, comm.Sum, []int64{1})
	out["allreduce"] = code(err)
	// A receive from any rank cannot know that the dead one would have
	// been the sender: it waits for its limit.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, _, err = c.Recv(short, comm.AnySource, 3)
	cancel()
	out["any"] = code(err)
	say("KILLED", out)
	return nil
}
