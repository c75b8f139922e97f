package wire

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// A count on the wire must mean what it says: -1 or 2^32+1 in a uint32
// field is malformed, not 4294967295 or 1 (issue 11 item 1).
func TestUint32DecodesStrictly(t *testing.T) {
	tests := []struct {
		name string
		n    any
		want uint32
		ok   bool
	}{
		{"zero", 0, 0, true},
		{"fixint", 7, 7, true},
		{"max", uint64(1<<32 - 1), 1<<32 - 1, true},
		{"signed positive", int64(70000), 70000, true},
		{"nil", nil, 0, true},
		{"minus one", -1, 0, false},
		{"minus int64", int64(-1 << 40), 0, false},
		{"2^32+1", uint64(1<<32 + 1), 0, false},
		{"signed 2^32", int64(1 << 32), 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := msgpack.Marshal(map[string]any{"n": tc.n, "argv": []string{"x"}})
			if err != nil {
				t.Fatal(err)
			}
			var req JobLaunchReq
			err = Unmarshal(b, &req)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("Unmarshal: %v", err)
			case tc.ok && req.N != tc.want:
				t.Fatalf("N = %d, want %d", req.N, tc.want)
			case !tc.ok && !errors.Is(err, ErrMalformed):
				t.Fatalf("Unmarshal = %v (N=%d), want ErrMalformed", err, req.N)
			}
		})
	}
	// Pointers and slices of uint32 go through the same decoder.
	b, _ := msgpack.Marshal(map[string]any{"r": -3})
	var q RCQueryReq
	if err := Unmarshal(b, &q); !errors.Is(err, ErrMalformed) {
		t.Fatalf("*uint32 field: Unmarshal = %v, want ErrMalformed", err)
	}
}

func TestLimitsCheck(t *testing.T) {
	l := DefaultLimits()
	long := strings.Repeat("a", DefaultNameBytes+1)
	tests := []struct {
		name  string
		body  any
		limit string // "" = passes
	}{
		{"launch within", &JobLaunchReq{N: 4, Argv: []string{"x"}}, ""},
		{"launch 10^9", &JobLaunchReq{N: 1_000_000_000, Argv: []string{"x"}}, "procs-per-job"},
		{"launch long name", &JobLaunchReq{N: 1, Argv: []string{"x"}, Name: long}, "name-bytes"},
		{"launch huge env", &JobLaunchReq{N: 1, Argv: []string{"x"}, Env: []string{strings.Repeat("e", DefaultArgvEnvBytes)}}, "argv-env-bytes"},
		{"add 10^9", &RCRequest{Type: RCAdd, N: 1_000_000_000}, "procs-per-change"},
		{"sub of too many ranks", &RCRequest{Type: RCSub, Ranks: RankRanges{{0, 1 << 20}}}, "procs-per-change"},
		{"too many bound sets", &RCRequest{Type: RCAdd, N: 1, Bound: make([]string, DefaultListItems+1)}, "list-items"},
		{"spawn total", &PMISpawnReq{Apps: []PMISpawnApp{{Argv: []string{"a"}, N: 1 << 15}, {Argv: []string{"b"}, N: 1<<15 + 1}}}, "procs-per-job"},
		{"kv key", &KVPutReq{Key: long}, "name-bytes"},
		{"grow within", &DVMGrowReq{Nodes: 2, Hosts: []GrowHost{{Name: "h3", Slots: 8}}}, ""},
		{"grow 10^6 nodes", &DVMGrowReq{Nodes: 1_000_000}, "nodes"},
		{"grow too many hosts", &DVMGrowReq{Hosts: make([]GrowHost, DefaultNodes+1)}, "nodes"},
		{"grow long host", &DVMGrowReq{Hosts: []GrowHost{{Name: long, Slots: 1}}}, "name-bytes"},
		{"shrink long node", &DVMShrinkReq{Node: long}, "name-bytes"},
		{"kv value", &KVPutReq{Key: "k", Value: make([]byte, DefaultValueBytes+1)}, "value-bytes"},
		{"publish value", &PublishReq{Data: []KV{{Key: "k", Value: make([]byte, DefaultValueBytes+1)}}}, "value-bytes"},
		{"pset op name", &PsetOpReq{P1: long}, "name-bytes"},
		{"split within", &PsetOpReq{Op: OpSplit, P1: "mpi://app/a", Mode: SplitRanks, Lists: []RankRanges{{{0, 1 << 15}}, {{1<<15 + 1, 1<<16 - 1}}}}, ""},
		{"split into 10^9 parts", &PsetOpReq{Op: OpSplit, P1: "mpi://app/a", Mode: SplitParts, K: 1_000_000_000}, "list-items"},
		{"split into too many lists", &PsetOpReq{Op: OpSplit, P1: "mpi://app/a", Mode: SplitRanks, Lists: make([]RankRanges, DefaultListItems+1)}, "list-items"},
		{"split lists of too many ranges", &PsetOpReq{Op: OpSplit, P1: "mpi://app/a", Mode: SplitRanks, Lists: []RankRanges{make(RankRanges, DefaultListItems/2+1), make(RankRanges, DefaultListItems/2)}}, "list-items"},
		{"split lists of 2^32 ranks", &PsetOpReq{Op: OpSplit, P1: "mpi://app/a", Mode: SplitRanks, Lists: []RankRanges{{{0, 1<<32 - 1}}}}, "procs-per-job"},
		{"split lists over the job size", &PsetOpReq{Op: OpSplit, P1: "mpi://app/a", Mode: SplitRanks, Lists: []RankRanges{{{0, 1 << 15}}, {{0, 1 << 15}}}}, "procs-per-job"},
		{"split names", &PsetOpReq{Op: OpSplit, P1: "mpi://app/a", Mode: SplitParts, K: 1, Names: []string{long}}, "name-bytes"},
		{"split too many names", &PsetOpReq{Op: OpSplit, P1: "mpi://app/a", Mode: SplitParts, K: 1, Names: make([]string, DefaultListItems+1)}, "list-items"},
		{"event message", &EventNotifyReq{Msg: strings.Repeat("m", DefaultValueBytes+1)}, "value-bytes"},
		{"fence of too many entries", &FenceReq{Procs: make([]ProcRanges, DefaultListItems+1)}, "list-items"},
		{"requester id", &RCRequest{Type: RCAdd, N: 1, RequesterID: long}, "name-bytes"},
		{"other types pass", &Ping{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := l.Check("k.ind", tc.body)
			if tc.limit == "" {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), tc.limit) || !strings.Contains(err.Error(), "docs/limits.md") {
				t.Fatalf("Check = %v, want an ErrLimit naming %s", err, tc.limit)
			}
		})
	}
}

func TestLimitsFromEnv(t *testing.T) {
	env := map[string]string{"DYNRT_LIMIT_PROCS_PER_JOB": "10", "DYNRT_LIMIT_NODES": "3"}
	l, err := LimitsFromEnv(func(k string) string { return env[k] })
	if err != nil || l.ProcsPerJob != 10 || l.Nodes != 3 || l.ProcsPerChange != DefaultProcsPerChange {
		t.Fatalf("LimitsFromEnv = %+v, %v", l, err)
	}
	for _, bad := range []string{"0", "-1", "x", "4294967296"} {
		env["DYNRT_LIMIT_NODES"] = bad
		if _, err := LimitsFromEnv(func(k string) string { return env[k] }); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "DYNRT_LIMIT_NODES") {
			t.Errorf("DYNRT_LIMIT_NODES=%s: %v, want ErrInvalid naming the variable", bad, err)
		}
	}
}

// docs/limits.md lists every limit with its variable and default.
func TestLimitsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/limits.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	d := DefaultLimits()
	for _, f := range limitFields {
		if !strings.Contains(doc, "| "+f.name+" |") || !strings.Contains(doc, "`"+f.env+"`") {
			t.Errorf("docs/limits.md has no row for %s (%s)", f.name, f.env)
		}
		def := *f.ptr(&d)
		shown := strconv.Itoa(def)
		if def >= 1<<20 && def%(1<<20) == 0 {
			shown = strconv.Itoa(def>>20) + " MiB"
		}
		if !strings.Contains(doc, "| "+f.name+" | "+shown+" |") {
			t.Errorf("docs/limits.md: %s should show the default %s", f.name, shown)
		}
	}
	for _, s := range []string{
		"| " + strconv.Itoa(DefaultMaxInflight) + " |", "| " + strconv.Itoa(DefaultMaxHandshakes) + " |",
		"| " + strconv.Itoa(DefaultMaxInflightBytes>>20) + " MiB |", "| " + strconv.Itoa(DefaultMaxFrame>>20) + " MiB |",
		"| " + strconv.Itoa(helloMaxFrame>>10) + " KiB |", "| " + DefaultHelloTimeout.String() + " |",
	} {
		if !strings.Contains(strings.ReplaceAll(doc, "| 5 s |", "| 5s |"), s) {
			t.Errorf("docs/limits.md lacks %q", s)
		}
	}
}
