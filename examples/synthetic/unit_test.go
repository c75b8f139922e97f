package main

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

func TestPlan(t *testing.T) {
	add := func(n int) change { return change{wire.RCAdd, n} }
	sub := func(n int) change { return change{wire.RCSub, n} }
	for _, tc := range []struct {
		name                string
		mode                string
		start, limit, delta int
		want                []change
	}{
		{"inc grow", modeInc, 28, 112, 28, []change{add(28), add(28), add(28)}},
		{"inc shrink", modeInc, 112, 28, 28, []change{sub(28), sub(28), sub(28)}},
		{"inc remainder", modeInc, 2, 7, 2, []change{add(2), add(2), add(1)}},
		{"step grow", modeStep, 28, 112, 28, []change{add(28), sub(28), add(56), sub(56), add(84), sub(84)}},
		{"step from 84", modeStep, 84, 112, 28, []change{add(28), sub(28)}},
		{"step shrink", modeStep, 8, 2, 3, []change{sub(3), add(3), sub(6), add(6)}},
		{"no distance", modeInc, 8, 8, 2, nil},
		{"no delta", modeStep, 8, 16, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := plan(tc.mode, tc.start, tc.limit, tc.delta); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan(%s, %d, %d, %d) = %v, want %v", tc.mode, tc.start, tc.limit, tc.delta, got, tc.want)
			}
		})
	}
}

func TestPartitionCoversEveryPointOnce(t *testing.T) {
	for _, tc := range []struct {
		problem int64
		n       int
	}{{100, 1}, {100, 3}, {7, 7}, {5, 8}, {1_000_003, 112}} {
		next := int64(0)
		for r := range tc.n {
			lo, hi := partition(tc.problem, r, tc.n)
			if lo != next || hi < lo {
				t.Fatalf("problem %d over %d: rank %d gets [%d, %d), want it to start at %d", tc.problem, tc.n, r, lo, hi, next)
			}
			next = hi
		}
		if next != tc.problem {
			t.Errorf("problem %d over %d: the slices end at %d", tc.problem, tc.n, next)
		}
	}
}

// The check the benchmark makes at run time: any split gives the same
// count, and the count is neither zero nor everything.
func TestWorkIsSplitInvariant(t *testing.T) {
	const problem = 200_000
	whole := work(problem, 0, problem)
	if whole <= 0 || whole >= problem {
		t.Fatalf("the box holds %d of %d points: the benchmark would check nothing", whole, problem)
	}
	for _, n := range []int{1, 2, 3, 7, 28, 112} {
		var sum int64
		for r := range n {
			lo, hi := partition(problem, r, n)
			sum += work(problem, lo, hi)
		}
		if sum != whole {
			t.Errorf("%d processes count %d, one counts %d", n, sum, whole)
		}
	}
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--mode", "inc", "--start", "4", "--limit", "8", "--delta", "2"}, ""},
		{[]string{"--trigger", "external", "--changes", "3"}, ""},
		{[]string{"--mode", "zigzag"}, "--mode"},
		{[]string{"--trigger", "scheduler"}, "--trigger"},
		{[]string{"-i", "0"}, "-i and -f"},
		{[]string{"--problem-size", "0"}, "--problem-size"},
		{[]string{"--start", "4", "--limit", "8"}, "--limit needs --delta"},
		{[]string{"--limit", "8", "--delta", "2"}, "--limit needs --start"},
		{[]string{"--delta", "-1"}, "negative"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"--exchange", "kv", "--trigger", "external", "--changes", "2"}, ""},
		{[]string{"--exchange", "pipes"}, "--exchange"},
		{[]string{"--exchange", "kv", "--mode", "step"}, "--mode inc only"},
	} {
		_, err := parseArgs(tc.args, io.Discard)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: error %v, want one mentioning %q", tc.args, err, tc.err)
		}
	}
}

// TestKVDecision: the value of d:<iter> is c-synthetic's
// "<iter> <stop> <type> <delta> <newset>", "-" for none, both ways.
func TestKVDecision(t *testing.T) {
	for _, tc := range []struct {
		d    kvDecision
		text string
	}{
		{kvDecision{iter: 3}, "3 0 - - -"},
		{kvDecision{iter: 7, stop: true}, "7 1 - - -"},
		{kvDecision{iter: 4, typ: wire.RCAdd, delta: "mpi://delta/j1/3", newSet: "mpi://app/a1@2"}, "4 0 ADD mpi://delta/j1/3 mpi://app/a1@2"},
	} {
		if got := tc.d.String(); got != tc.text {
			t.Errorf("%+v: %q, want %q", tc.d, got, tc.text)
		}
		if got, err := parseKVDecision(tc.text); err != nil || got != tc.d {
			t.Errorf("parse %q: %+v, %v; want %+v", tc.text, got, err, tc.d)
		}
	}
	for _, bad := range []string{"", "3 0 - -", "x 0 - - -", "3 2 - - -"} {
		if _, err := parseKVDecision(bad); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}

func TestMainUsage(t *testing.T) {
	if code := Main(t.Context(), []string{"synthetic", "--mode", "zigzag"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("bad flag: exit %d, want 2", code)
	}
	if code := Main(t.Context(), []string{"synthetic", "-h"}, io.Discard, io.Discard); code != 0 {
		t.Errorf("-h: exit %d, want 0", code)
	}
}
