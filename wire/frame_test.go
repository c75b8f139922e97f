package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"sync"
	"testing"
)

func frameOf(body []byte) []byte { return AppendFrame(nil, body) }

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, 0)
	bodies := [][]byte{{}, []byte("a"), bytes.Repeat([]byte{7}, 70000)}
	for _, b := range bodies {
		if err := w.WriteFrame(b); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader(&buf, 0)
	for i, want := range bodies {
		got, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("frame %d: %d bytes, want %d", i, len(got), len(want))
		}
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("at end: %v, want io.EOF", err)
	}
}

func TestFrameTruncated(t *testing.T) {
	full := frameOf([]byte("hello"))
	for cut := 1; cut < len(full); cut++ {
		_, err := NewReader(bytes.NewReader(full[:cut]), 0).ReadFrame()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
}

func TestWriterRefusesOversize(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, 10)
	if err := w.WriteFrame(make([]byte, 11)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("WriteFrame = %v, want ErrTooLarge", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("%d bytes written for a refused frame", buf.Len())
	}
	if err := w.WriteFrame(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
}

// An oversize frame is reported, skipped, and the next frame reads fine.
func TestFrameOversizeSkipped(t *testing.T) {
	head := AppendEnvelope(nil, &Envelope{V: 1, ID: 6, Kind: "pset.op"})
	big := append(append([]byte{}, head...), bytes.Repeat([]byte{0xc0}, 5000)...)
	var stream []byte
	stream = append(stream, frameOf(big)...)
	stream = append(stream, frameOf([]byte("next"))...)
	r := NewReader(bytes.NewReader(stream), 1000)

	_, err := r.ReadFrame()
	var tl *FrameTooLargeError
	if !errors.As(err, &tl) || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadFrame = %v, want FrameTooLargeError", err)
	}
	if tl.Size != uint32(len(big)) || tl.Limit != 1000 || len(tl.Head) != headKeep {
		t.Fatalf("error = %+v", tl)
	}
	if env, _ := DecodeEnvelope(tl.Head); env.ID != 6 || env.Kind != "pset.op" {
		t.Fatalf("id/kind not recoverable from head: %+v", env)
	}
	got, err := r.ReadFrame()
	if err != nil || string(got) != "next" {
		t.Fatalf("after oversize: %q, %v", got, err)
	}
}

func TestFrameOversizeTruncatedBody(t *testing.T) {
	hdr := binary.BigEndian.AppendUint32(nil, 1<<30)
	_, err := NewReader(bytes.NewReader(append(hdr, make([]byte, 1000)...)), 0).ReadFrame()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("ReadFrame = %v, want io.ErrUnexpectedEOF", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// Reading a frame whose header claims more than the limit must not
// allocate anything near the claimed size: skip 256 MiB and check that the
// heap barely grew.
func TestFrameOversizeAllocatesNothingBig(t *testing.T) {
	const claimed = 256 << 20
	hdr := binary.BigEndian.AppendUint32(nil, claimed)
	src := io.MultiReader(bytes.NewReader(hdr), io.LimitReader(zeros{}, claimed), bytes.NewReader(frameOf([]byte("ok"))))
	r := NewReader(bufio.NewReader(src), 1<<20)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := r.ReadFrame()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadFrame = %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("skipping an oversize frame allocated %d bytes", grew)
	}
	if got, err := r.ReadFrame(); err != nil || string(got) != "ok" {
		t.Fatalf("next frame: %q, %v", got, err)
	}

	// And by count: a header-only oversize frame costs a handful of small
	// allocations (the error and its head), independent of the claim.
	allocs := testing.AllocsPerRun(50, func() {
		_, _ = NewReader(bytes.NewReader(binary.BigEndian.AppendUint32(nil, 0xffffffff)), 1024).ReadFrame()
	})
	if allocs > 10 {
		t.Fatalf("%.0f allocations for a header claiming 4 GiB", allocs)
	}
}

func TestReadFrameIntoReuses(t *testing.T) {
	var stream []byte
	stream = append(stream, frameOf([]byte("abc"))...)
	stream = append(stream, frameOf([]byte("de"))...)
	r := NewReader(bytes.NewReader(stream), 0)
	buf := make([]byte, 0, 16)
	got, err := r.ReadFrameInto(buf)
	if err != nil || string(got) != "abc" || &got[0] != &buf[:1][0] {
		t.Fatalf("first: %q %v (reused=%v)", got, err, err == nil && &got[0] == &buf[:1][0])
	}
	got, err = r.ReadFrameInto(got)
	if err != nil || string(got) != "de" {
		t.Fatalf("second: %q %v", got, err)
	}
}

// Concurrent writers never interleave frames.
func TestWriterConcurrent(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, 0)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			body := bytes.Repeat([]byte{byte(g)}, 1000+g)
			for i := 0; i < 50; i++ {
				if err := w.WriteFrame(body); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	r := NewReader(&buf, 0)
	for n := 0; n < 400; n++ {
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		g := int(f[0])
		if len(f) != 1000+g || bytes.Count(f, []byte{byte(g)}) != len(f) {
			t.Fatalf("frame %d is interleaved", n)
		}
	}
}
