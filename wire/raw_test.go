package wire

import (
	"bytes"
	"errors"
	"reflect"
	"strconv"
	"strings"
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

// TestPlacementsDecode: the one-pass decoder of a placement list gives what
// msgpack's reflection gives (and its encoder the same bytes), for lists of every shape (nil, empty, a node
// without ranks, many nodes, an unknown key), under Unmarshal and under a
// plain decoder; and it fails on a truncated or mistyped list.
func TestPlacementsDecode(t *testing.T) {
	type withList struct {
		Placement Placements `msgpack:"pl,omitempty"`
		After     string     `msgpack:"z"`
	}
	type plain struct {
		Placement []Placement `msgpack:"pl,omitempty"`
		After     string      `msgpack:"z"`
	}
	many := make([]Placement, 1500)
	for i := range many {
		many[i] = Placement{Node: "node" + strconv.Itoa(i), Ranks: RankRanges{{uint32(2 * i), uint32(2*i + 1)}, {70000, 70000 + uint32(i)}}}
	}
	for name, pl := range map[string][]Placement{
		"nil": nil, "empty": {}, "no ranks": {{Node: "n1"}}, "no node": {{Ranks: Span(3, 4)}},
		"two": {{Node: "n1", Ranks: Span(0, 3)}, {Node: "n2", Ranks: RankRanges{{4, 4}, {9, 12}}}}, "many": many,
		"long names": {{Node: strings.Repeat("h", 40), Ranks: Span(0, 0)}, {Node: strings.Repeat("h", 300)}},
	} {
		b, err := Marshal(&plain{Placement: pl, After: "end"})
		if err != nil {
			t.Fatal(err)
		}
		var want plain
		if err := msgpack.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		// Encoded as the reflection encodes []Placement, byte for byte.
		mine, err := Marshal(&withList{Placement: pl, After: "end"})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mine, b) {
			t.Errorf("%s: encoded\n% x\nwant\n% x", name, mine, b)
		}
		var got, viaDecoder withList
		if err := Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := msgpack.NewDecoder(bytes.NewReader(b)).Decode(&viaDecoder); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, g := range []withList{got, viaDecoder} {
			if g.After != "end" || !reflect.DeepEqual([]Placement(g.Placement), want.Placement) {
				t.Errorf("%s: decoded %d entries %+v, want %d", name, len(g.Placement), g, len(want.Placement))
			}
		}
	}
	// As values of their own: nil and empty as the reflection has them.
	for _, pl := range [][]Placement{nil, {}} {
		want, _ := msgpack.Marshal(pl)
		if got, err := Marshal(Placements(pl)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%#v encoded % x (%v), want % x", pl, got, err, want)
		}
	}
	// An unknown key in an entry is skipped, as the struct decoder does.
	b, _ := Marshal(map[string]any{"pl": []map[string]any{{"n": "n1", "x": []int{1, 2}, "r": [][]int{{5, 6}}}}})
	var got withList
	if err := Unmarshal(b, &got); err != nil || len(got.Placement) != 1 || got.Placement[0].Node != "n1" || got.Placement[0].Ranks.String() != "5-6" {
		t.Errorf("unknown key: %+v %v", got, err)
	}
	for name, bad := range map[string][]byte{
		"not a list":     {0x81, 0xa2, 'p', 'l', 0x05},
		"entry not map":  {0x81, 0xa2, 'p', 'l', 0x91, 0x05},
		"ranks not list": {0x81, 0xa2, 'p', 'l', 0x91, 0x81, 0xa1, 'r', 0x05},
	} {
		if err := Unmarshal(bad, &got); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// BenchmarkPlacementsDecode: a change's record placing 1,024 processes on
// 1,024 nodes, as every daemon and process of the job reads it, with the
// one-pass list against the reflected one.
//
//	go test -run '^$' -bench PlacementsDecode -benchmem ./wire
func BenchmarkPlacementsDecode(b *testing.B) {
	rec := RC{Job: "dvm1.7", Delta: "mpi://rte/app/rc/9", Type: RCAdd, Status: RCAnnounced, Ranks: Span(1024, 2047)}
	for i := range 1024 {
		rec.Placement = append(rec.Placement, Placement{Node: "node" + strconv.Itoa(i), Ranks: Span(uint32(1024+i), uint32(1024+i))})
	}
	raw, err := Marshal(&rec)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Placements", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var r RC
			if err := Unmarshal(raw, &r); err != nil || len(r.Placement) != 1024 {
				b.Fatal(err)
			}
		}
	})
	b.Run("reflection", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var r oldRC
			if err := Unmarshal(raw, &r); err != nil || len(r.Placement) != 1024 {
				b.Fatal(err)
			}
		}
	})
}

// oldRC has a record's placement list as it was before Placements.
type oldRC struct {
	Job       string      `msgpack:"j,omitempty"`
	Delta     string      `msgpack:"d,omitempty"`
	Placement []Placement `msgpack:"pl,omitempty"`
}

// BenchmarkPlacementsEncode: the same record encoded, as a daemon does in
// its answers to queries and the master in its pushes.
//
//	go test -run '^$' -bench PlacementsEncode -benchmem ./wire
func BenchmarkPlacementsEncode(b *testing.B) {
	rec := RC{Job: "dvm1.7", Delta: "mpi://rte/app/rc/9"}
	for i := range 1024 {
		rec.Placement = append(rec.Placement, Placement{Node: "node" + strconv.Itoa(i), Ranks: Span(uint32(1024+i), uint32(1024+i))})
	}
	old := oldRC{Job: rec.Job, Delta: rec.Delta, Placement: rec.Placement}
	for _, c := range []struct {
		name string
		v    any
	}{{"Placements", &rec}, {"reflection", &old}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Marshal(c.v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
