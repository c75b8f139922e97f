package comm

import (
	"bytes"
	"errors"
	"io"
	"math"
	"slices"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

func TestFrameCodec(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    header
		data []byte
	}{
		{"empty", header{ctx: 1, src: 0, tag: 0}, nil},
		{"user tag", header{ctx: 1<<63 | 5, src: 1<<32 - 1, tag: MaxTag}, []byte("hello")},
		{"collective error", header{ctx: 42, src: 7, tag: -2 - 1<<29, flags: flagError}, errPayload(wire.Errorf(wire.ErrAborted, "gone"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h
			h.n = uint32(len(tc.data))
			b := make([]byte, headerLen)
			h.put(b)
			got, data, err := readFrame(io.MultiReader(bytes.NewReader(b), bytes.NewReader(tc.data)), make([]byte, headerLen))
			if err != nil || got != h || !bytes.Equal(data, tc.data) {
				t.Errorf("got %+v %q %v, want %+v %q", got, data, err, h, tc.data)
			}
		})
	}
}

func TestFrameBad(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    header
		body []byte
		want error
	}{
		{"too large", header{n: MaxMessage + 1}, nil, wire.ErrTooLarge},
		{"unknown flag", header{flags: 2}, nil, wire.ErrMalformed},
		{"short body", header{n: 10}, []byte("abc"), io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, headerLen)
			tc.h.put(b)
			_, _, err := readFrame(io.MultiReader(bytes.NewReader(b), bytes.NewReader(tc.body)), make([]byte, headerLen))
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
}

func TestHelloAndAddress(t *testing.T) {
	h := hello{rank: 17, job: "abc.3"}
	h.token[0], h.token[15] = 1, 2
	got, err := readHello(bytes.NewReader(h.encode()))
	if err != nil || got != h {
		t.Errorf("hello: %+v %v", got, err)
	}
	if _, err := readHello(bytes.NewReader([]byte("HTTP/1.1 200 OK\r\n\r\n..........."))); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("bad hello: %v", err)
	}
	a := address{host: "n1", unix: "@dynrt-comm-x", port: 4242, token: h.token}
	if b, err := parseAddress(a.String()); err != nil || b != a {
		t.Errorf("address %q: %+v %v", a, b, err)
	}
	for _, bad := range []string{"", "v2 n1 @x 1 00", "v1 n1 @x 1 0011"} {
		if _, err := parseAddress(bad); !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("address %q: %v", bad, err)
		}
	}
	if err := payloadErr(errPayload(wire.Errorf(wire.ErrAborted, "rc 3 aborted"))); !errors.Is(err, wire.ErrAborted) || err.Error() != "rc 3 aborted" {
		t.Errorf("error payload: %v", err)
	}
}

func TestMatcher(t *testing.T) {
	type step struct {
		arrive *message // else post
		src    int64
		tag    int32
		want   string // data the posted receive gets at once ("" = waits)
	}
	m := func(src uint32, tag int32, d string) *message { return &message{src: src, tag: tag, data: []byte(d)} }
	for _, tc := range []struct {
		name  string
		steps []step
		left  []string // data of the waiting receives at the end, in posting order ("" still waiting)
	}{
		{"in order per source", []step{
			{arrive: m(1, 5, "a")}, {arrive: m(1, 5, "b")},
			{src: 1, tag: 5, want: "a"}, {src: 1, tag: 5, want: "b"},
		}, nil},
		{"by tag", []step{
			{arrive: m(1, 5, "a")}, {arrive: m(1, 6, "b")},
			{src: 1, tag: 6, want: "b"}, {src: 1, tag: AnyTag, want: "a"},
		}, nil},
		{"any source takes the oldest", []step{
			{arrive: m(2, 5, "x")}, {arrive: m(1, 5, "y")},
			{src: anyRank, tag: 5, want: "x"}, {src: anyRank, tag: AnyTag, want: "y"},
		}, nil},
		{"any tag skips collectives", []step{
			{arrive: m(1, -7, "coll")}, {src: 1, tag: AnyTag}, {src: 1, tag: -7, want: "coll"},
		}, []string{""}},
		{"posted first, in posting order", []step{
			{src: anyRank, tag: AnyTag}, {src: 1, tag: 5}, {arrive: m(1, 5, "a")}, {arrive: m(1, 5, "b")},
		}, []string{"a", "b"}},
		{"other source waits", []step{
			{src: 2, tag: 5}, {arrive: m(1, 5, "a")}, {src: 1, tag: 5, want: "a"},
		}, []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newMatcher()
			var waiting []*recvReq
			for i, s := range tc.steps {
				if s.arrive != nil {
					q.arrive(1, *s.arrive)
					continue
				}
				r := newRecv(1, s.src, s.tag)
				q.post(r)
				select {
				case <-r.done:
					if string(r.m.data) != s.want {
						t.Errorf("step %d: got %q, want %q", i, r.m.data, s.want)
					}
				default:
					if s.want != "" {
						t.Errorf("step %d: waits, want %q", i, s.want)
					}
					waiting = append(waiting, r)
				}
			}
			for i, r := range waiting {
				got := ""
				select {
				case <-r.done:
					got = string(r.m.data)
				default:
				}
				if i >= len(tc.left) || got != tc.left[i] {
					t.Errorf("waiting receive %d got %q, want %v", i, got, tc.left)
				}
			}
		})
	}
}

func TestMatcherFailures(t *testing.T) {
	q := newMatcher()
	gone := wire.Errorf(wire.ErrClosed, "rank 3 gone")
	q.arrive(1, message{src: 3, tag: 1, data: []byte("last words")})
	fromIt := newRecv(2, 3, 1)
	anyone := newRecv(2, anyRank, 1)
	q.post(fromIt)
	q.post(anyone)
	q.fail(3, gone)
	if !errors.Is(fromIt.err, wire.ErrClosed) {
		t.Errorf("waiting receive from the gone rank: %v", fromIt.err)
	}
	select {
	case <-anyone.done:
		t.Error("a receive from any source failed with one source gone")
	default:
	}
	// Queued messages of a gone rank are still delivered, then receives fail.
	r := newRecv(1, 3, 1)
	q.post(r)
	if string(r.m.data) != "last words" || r.err != nil {
		t.Errorf("queued message: %q %v", r.m.data, r.err)
	}
	r = newRecv(1, 3, 1)
	q.post(r)
	if !errors.Is(r.err, wire.ErrClosed) {
		t.Errorf("later receive: %v", r.err)
	}
	if !q.cancel(anyone) || q.cancel(anyone) {
		t.Error("cancel of a waiting receive")
	}
	w := newRecv(5, 1, 1)
	q.post(w)
	q.drop(5, wire.ErrState)
	if !errors.Is(w.err, wire.ErrState) {
		t.Errorf("receive of a dropped context: %v", w.err)
	}
	q.close(wire.ErrClosed)
	r = newRecv(1, 4, 1)
	q.post(r)
	if !errors.Is(r.err, wire.ErrClosed) {
		t.Errorf("receive after close: %v", r.err)
	}
}

func TestTree(t *testing.T) {
	for n := 1; n <= 70; n++ {
		for _, root := range []int{0, n / 3, n - 1} {
			seen := make([]int, n)
			for r := range n {
				v := vrank(r, root, n)
				if realRank(v, root, n) != r {
					t.Fatalf("n=%d root=%d: rank %d ↔ %d", n, root, r, v)
				}
				kids := treeChildren(v, n)
				total := 1
				for i, k := range kids {
					if treeParent(k) != v {
						t.Errorf("n=%d: child %d of %d has parent %d", n, k, v, treeParent(k))
					}
					if i > 0 && k >= kids[i-1] {
						t.Errorf("n=%d: children of %d not deepest branch first: %v", n, v, kids)
					}
					seen[k]++
					total += span(k, n)
				}
				if total != span(v, n) {
					t.Errorf("n=%d: span of %d is %d, children cover %d", n, v, span(v, n), total)
				}
			}
			for v := 1; v < n; v++ {
				if seen[v] != 1 {
					t.Errorf("n=%d: %d is a child %d times", n, v, seen[v])
				}
			}
		}
	}
	// The depth is the most bits set in a rank below n.
	for _, tc := range []struct{ n, depth int }{{1, 0}, {2, 1}, {7, 2}, {8, 3}, {28, 4}, {64, 6}} {
		d := 0
		for v := range tc.n {
			k := 0
			for x := v; x != 0; x = treeParent(x) {
				k++
			}
			d = max(d, k)
		}
		if d != tc.depth {
			t.Errorf("n=%d: depth %d, want %d", tc.n, d, tc.depth)
		}
	}
}

func TestCombine(t *testing.T) {
	for _, tc := range []struct {
		op        Op
		acc, src  []float64
		want      []float64
		wantError bool
	}{
		{Sum, []float64{1, 2}, []float64{0.5, -2}, []float64{1.5, 0}, false},
		{Min, []float64{1, 2}, []float64{0.5, 3}, []float64{0.5, 2}, false},
		{Max, []float64{1, 2}, []float64{0.5, 3}, []float64{1, 3}, false},
		{Max, []float64{math.Inf(-1)}, []float64{-1e300}, []float64{-1e300}, false},
		{Sum, []float64{1}, []float64{1, 2}, nil, true},
		{Op(9), []float64{1}, []float64{1}, nil, true},
	} {
		err := combine(tc.op, tc.acc, tc.src)
		if (err != nil) != tc.wantError || (err == nil && !slices.Equal(tc.acc, tc.want)) {
			t.Errorf("%s: %v %v, want %v (error %v)", tc.op, tc.acc, err, tc.want, tc.wantError)
		}
	}
	iv := []int{3, -4}
	if err := combine(Min, iv, []int{1, 1}); err != nil || !slices.Equal(iv, []int{1, -4}) {
		t.Errorf("int min: %v %v", iv, err)
	}
}

func TestSliceBytes(t *testing.T) {
	f := []float64{1.5, -0.1, math.MaxFloat64}
	got, err := bytesSlice[float64](sliceBytes(f))
	if err != nil || !slices.Equal(got, f) {
		t.Errorf("float64: %v %v", got, err)
	}
	u := []uint32{0, 1 << 31, 7}
	gu, err := bytesSlice[uint32](sliceBytes(u))
	if err != nil || !slices.Equal(gu, u) {
		t.Errorf("uint32: %v %v", gu, err)
	}
	type celsius float32
	c := []celsius{-40, 100}
	gc, err := bytesSlice[celsius](sliceBytes(c))
	if err != nil || !slices.Equal(gc, c) {
		t.Errorf("named float32: %v %v", gc, err)
	}
	if e, err := bytesSlice[int64](sliceBytes([]int64{})); err != nil || len(e) != 0 {
		t.Errorf("empty: %v %v", e, err)
	}
	if _, err := bytesSlice[int64](make([]byte, 12)); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("12 bytes as int64: %v", err)
	}
}
