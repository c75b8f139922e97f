package wire

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestRawKeepsValue: a Raw field holds the value exactly as it was
// encoded, whether it is read by Unmarshal (the in-place path) or by a
// plain msgpack decoder, for every catalogue sample as the inner value,
// and the outer fields after it still decode.
func TestRawKeepsValue(t *testing.T) {
	type outer struct {
		A    string `msgpack:"a"`
		Body Raw    `msgpack:"b,omitempty"`
		Z    uint32 `msgpack:"z"`
	}
	for name, v := range samples() {
		inner, err := Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := Marshal(&outer{A: "x", Body: Raw(inner), Z: 7})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got outer
		if err := Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got.Body, inner) || got.A != "x" || got.Z != 7 {
			t.Errorf("%s under Unmarshal: %+v, want the inner value's %d bytes", name, got, len(inner))
		}
		if len(inner) > 0 && &got.Body[0] == &b[bytes.Index(b, inner)] {
			t.Errorf("%s: Raw shares the input's bytes, want a copy (the caller may reuse them)", name)
		}
		var plain outer
		if err := msgpack.NewDecoder(bytes.NewReader(b)).Decode(&plain); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(plain.Body, inner) || plain.Z != 7 {
			t.Errorf("%s under msgpack's decoder: %+v", name, plain)
		}
	}
}

// TestRawMalformed: a Raw field over a truncated value fails as malformed
// instead of reading past its input.
func TestRawMalformed(t *testing.T) {
	inner, _ := Marshal(&ProcID{Job: "dvm1.1", Rank: 42})
	b, _ := Marshal(&struct {
		Body Raw `msgpack:"b"`
	}{Raw(inner)})
	var got struct {
		Body Raw `msgpack:"b"`
	}
	if err := Unmarshal(b[:len(b)-2], &got); !errors.Is(err, ErrMalformed) {
		t.Errorf("truncated: %v, want ErrMalformed", err)
	}
}

// TestEventHead: the kind and job a daemon reads from an encoded event
// (to route it without decoding it) are the decoded event's, for events
// with and without a job, seq and time, and a large record after them.
func TestEventHead(t *testing.T) {
	rec := samples()["RC"].(*RC)
	for _, ev := range []Event{
		*samples()["Event"].(*Event),
		{Kind: EvNodeUp, Node: "n1"},
		{Seq: 1, Kind: EvRCState, Job: "dvm1.3", RC: rec},
		{Seq: 1 << 40, Time: -1, Kind: EvRCUpdate, Job: "dvm1.3", RC: rec, Ranks: RankRanges{{0, 9}}},
		{Job: "dvm1.3"},
		{},
	} {
		b, err := Marshal(&ev)
		if err != nil {
			t.Fatal(err)
		}
		kind, job, err := EventHead(b)
		if err != nil || kind != ev.Kind || job != ev.Job {
			t.Errorf("head of %+v: %q %q %v, want %q %q", ev, kind, job, err, ev.Kind, ev.Job)
		}
	}
	for _, bad := range [][]byte{nil, {0x91, 0x01}, {0x81, 0xa1, 'k'}, {0x81, 0xa1, 'k', 0x05}} {
		if _, _, err := EventHead(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("head of % x: %v, want ErrMalformed", bad, err)
		}
	}
}

// BenchmarkRelayBodyDecode: a daemon decoding a relay that carries a
// fence's collected data, 8 keys of 64 bytes from each of 8,192 processes
// (a wire-up over 1,024 nodes of 8, about 5 MB), as Raw against
// msgpack.RawMessage, the type the field had before.
//
//	go test -run '^$' -bench RelayBodyDecode -benchmem ./wire
func BenchmarkRelayBodyDecode(b *testing.B) {
	data := make([]ProcKV, 8192)
	for i := range data {
		kv := make([]KV, 8)
		for k := range kv {
			kv[k] = KV{Key: "key" + string(rune('a'+k)), Value: bytes.Repeat([]byte{byte(i)}, 64)}
		}
		data[i] = ProcKV{Job: "dvm1.7", Rank: uint32(i), Data: kv}
	}
	inner, err := Marshal(&FenceData{Inst: 3, Job: "dvm1.7", Data: data})
	if err != nil {
		b.Fatal(err)
	}
	frame, err := Marshal(&NodeRelay{Seq: 9, Kind: KindFenced, Body: Raw(inner)})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Raw", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		for b.Loop() {
			var r NodeRelay
			if err := Unmarshal(frame, &r); err != nil || len(r.Body) != len(inner) {
				b.Fatal(err)
			}
		}
	})
	b.Run("RawMessage", func(b *testing.B) {
		type oldRelay struct {
			Seq  uint64             `msgpack:"q"`
			Kind string             `msgpack:"k"`
			Body msgpack.RawMessage `msgpack:"b,omitempty"`
		}
		b.SetBytes(int64(len(frame)))
		for b.Loop() {
			var r oldRelay
			if err := Unmarshal(frame, &r); err != nil || len(r.Body) != len(inner) {
				b.Fatal(err)
			}
		}
	})
}
