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
	rec := placedRecord()
	raw, err := Marshal(&rec)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		decode func() (int, error) // entries read
	}{
		{"Placements", func() (int, error) { var r RC; err := Unmarshal(raw, &r); return len(r.Placement), err }},
		{"reflection", func() (int, error) { var r oldRC; err := Unmarshal(raw, &r); return len(r.Placement), err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if n, err := c.decode(); err != nil || n != 1024 {
					b.Fatal(n, err)
				}
			}
		})
	}
}

// placedRecord is a change's record placing 1,024 processes on 1,024
// nodes, one each.
func placedRecord() RC {
	rec := RC{Job: "dvm1.7", Delta: "mpi://rte/app/rc/9", Type: RCAdd, Status: RCAnnounced, Ranks: Span(1024, 2047)}
	for i := range 1024 {
		rec.Placement = append(rec.Placement, Placement{Node: "node" + strconv.Itoa(i), Ranks: Span(uint32(1024+i), uint32(1024+i))})
	}
	return rec
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
	rec := placedRecord()
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
