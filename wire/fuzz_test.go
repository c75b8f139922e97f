package wire

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
)

func FuzzReadFrame(f *testing.F) {
	f.Add(AppendFrame(nil, []byte("hello")))
	f.Add(append(AppendFrame(nil, make([]byte, 2000)), AppendFrame(nil, []byte{1})...))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3})
	f.Add([]byte{0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 1024
		r := NewReader(bytes.NewReader(data), limit)
		consumed := 0
		for i := 0; i < 100; i++ {
			b, err := r.ReadFrame()
			var tl *FrameTooLargeError
			switch {
			case err == nil:
				if len(b) > limit {
					t.Fatalf("frame of %d bytes over the limit", len(b))
				}
				consumed += HeaderSize + len(b)
			case errors.As(err, &tl):
				if int(tl.Size) <= limit || len(tl.Head) > headKeep {
					t.Fatalf("bad oversize report %+v", tl)
				}
				consumed += HeaderSize + int(tl.Size)
			case err == io.EOF:
				if consumed != len(data) {
					t.Fatalf("EOF after %d of %d bytes", consumed, len(data))
				}
				return
			default:
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
		}
	})
}

func FuzzDecodeEnvelope(f *testing.F) {
	for _, v := range samples() {
		body, _ := Marshal(v)
		f.Add(AppendEnvelope(nil, &Envelope{V: 1, ID: 3, Kind: KindPsetOp, Body: body}))
	}
	f.Add(AppendEnvelope(nil, &Envelope{V: 1, ID: 2, Kind: "x", Err: &Error{Code: CodeBusy, Msg: "m"}}))
	f.Add([]byte{0x81, 0xa4, 'b', 'o', 'd', 'y', 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0xc1})
	targets := []func() any{
		func() any { return new(PsetInfo) }, func() any { return new(DVMState) }, func() any { return new(Event) },
		func() any { return new(FenceReq) }, func() any { return new(RankRanges) },
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := DecodeEnvelope(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if checkOne(data) != nil {
			t.Fatal("accepted envelope fails the structural check")
		}
		// re-encoding a decoded envelope round-trips
		again, err := DecodeEnvelope(AppendEnvelope(nil, &env))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(again, env) && !(len(again.Body) == 0 && len(env.Body) == 0) {
			t.Fatalf("round trip: %+v != %+v", again, env)
		}
		// bodies never panic the decoders
		for _, mk := range targets {
			_ = Unmarshal(env.Body, mk())
		}
	})
}
