package wire

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestPsetOpCompat: adding SPLIT to pset.op kept the encoding of the
// other operations: a union request and its reply, without the split
// fields, encode to the very bytes they had before (testdata/compat, the
// golden files of that time), and those bytes decode to the same values.
func TestPsetOpCompat(t *testing.T) {
	yes := true
	rr := RankRanges{{0, 3}, {7, 7}, {9, 1000}}
	cases := []struct {
		file string
		v    any
	}{
		{"PsetOpReq-union.hex", &PsetOpReq{Job: "dvm1.1", Op: OpUnion, P1: "mpi://app/lu", P2: "mpi://rte/lu/rc/1",
			Target: "mpi://app/lu/grid", Active: &yes, Hints: map[string]string{"k": "v", "a": ""}, Rank: 2}},
		{"PsetOpReply-union.hex", &PsetOpReply{Name: "mpi://app/lu/grid", Version: 4, Size: 12, Members: rr,
			Updated: []PsetRef{{Name: "mpi://app/lu/grid", Version: 3}, {Name: "mpi://app/lu", Version: 1}}}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", "compat", c.file))
			if err != nil {
				t.Fatal(err)
			}
			b, err := Marshal(c.v)
			if err != nil {
				t.Fatal(err)
			}
			if got := hexLines(b); got != string(want) {
				t.Fatalf("encoding changed:\n got:\n%s\nwant:\n%s", got, want)
			}
			raw, err := hex.DecodeString(strings.ReplaceAll(string(want), "\n", ""))
			if err != nil {
				t.Fatal(err)
			}
			got := reflect.New(reflect.TypeOf(c.v).Elem()).Interface()
			if err := Unmarshal(raw, got); err != nil || !reflect.DeepEqual(got, c.v) {
				t.Fatalf("decoded %+v (%v), want %+v", got, err, c.v)
			}
		})
	}
}
