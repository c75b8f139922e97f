package rc

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// at returns t0 plus ms milliseconds.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

const (
	app      = "jac"
	delta0   = "mpi://rte/jac/rc/0"
	setApp   = "mpi://app/jac"
	setA     = "mpi://app/jac/a"
	setB     = "mpi://app/jac/b"
	unbound  = "mpi://app/jac/other"
	addRanks = 2
)

func mustNew(t *testing.T, req Request) *RC {
	t.Helper()
	rc, err := New(app, 0, delta0, req, at(0))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return rc
}

func addReq() Request {
	return Request{Type: TypeAdd, N: addRanks, By: Requester{Kind: ByTool, Name: "dynrc"}}
}
func subReq() Request { return Request{Type: TypeSub, N: 2, By: Requester{Kind: ByApp, Rank: 3}} }
func replaceReq() Request {
	return Request{Type: TypeReplace, Ranks: []uint32{3, 5}, By: Requester{Kind: ByTool, Name: "dynrc"}}
}

// state names used by the event matrix.
const (
	sFresh   = "NULL(fresh)"
	sDefined = "NULL(defined)"
	sPushed  = "NULL(pushed)"
	sAnn     = "ANNOUNCED"
	sPend    = "PENDING"
	sFin     = "FINALIZED"
	sAbort   = "ABORTED"
)

var states = []string{sFresh, sDefined, sPushed, sAnn, sPend, sFin, sAbort}

// build drives a fresh RC of type typ into state s using timestamps 1..9 ms.
// ADD is bound to setApp; SUB to setA and setB (PENDING = setA accepted).
func build(t *testing.T, typ Type, s string) *RC {
	t.Helper()
	req := addReq()
	bound := []string{setApp}
	switch typ {
	case TypeSub:
		req = subReq()
		bound = []string{setA, setB}
	case TypeReplace:
		req = replaceReq()
	}
	rc := mustNew(t, req)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("building %s %s: %v", typ, s, err)
		}
	}
	if s == sFresh {
		return rc
	}
	if typ == TypeReplace {
		must(rc.DefineReplace(at(1), []uint32{10, 11}, []uint32{3, 5}, setApp))
	} else {
		must(rc.DefineDelta(at(1), []uint32{10, 11}, bound))
	}
	if s == sDefined {
		return rc
	}
	must(rc.PushJobData(at(2)))
	if s == sPushed {
		return rc
	}
	must(rc.Announce(at(3)))
	switch s {
	case sAnn:
		return rc
	case sAbort:
		must(rc.Abort(at(4), "test"))
		return rc
	}
	if typ != TypeSub {
		_, err := rc.Accept(at(4), setApp)
		must(err)
		if s == sFin {
			must(rc.Confirm(at(5)))
		}
		return rc
	}
	_, err := rc.Accept(at(4), setA)
	must(err)
	if s == sFin {
		_, err = rc.Accept(at(5), setB)
		must(err)
	}
	return rc
}

type event struct {
	name string
	do   func(rc *RC, ts time.Time) error
}

var events = []event{
	{"DefineDelta", func(rc *RC, ts time.Time) error {
		if rc.Type() == TypeReplace {
			return rc.DefineReplace(ts, []uint32{10, 11}, []uint32{3, 5}, setApp)
		}
		b := []string{setApp}
		if rc.Type() == TypeSub {
			b = []string{setA, setB}
		}
		return rc.DefineDelta(ts, []uint32{10, 11}, b)
	}},
	{"PushJobData", (*RC).PushJobData},
	{"Announce", (*RC).Announce},
	{"AllStarted", (*RC).AllStarted},
	{"Accept", func(rc *RC, ts time.Time) error {
		from := setApp
		if rc.Type() == TypeSub {
			from = setB
		}
		_, err := rc.Accept(ts, from)
		return err
	}},
	{"Confirm", (*RC).Confirm},
	{"Enforce", (*RC).Enforce},
	{"AllExited", (*RC).AllExited},
	{"Abort", func(rc *RC, ts time.Time) error { return rc.Abort(ts, "why") }},
}

// TestEventMatrix tries every event in every state for both types. 'o' means
// the event succeeds, 'S' that it fails with wire.ErrState; the columns
// follow the order of events above. A failed event must leave the RC as it
// was.
func TestEventMatrix(t *testing.T) {
	want := map[Type]map[string]string{
		TypeAdd: {
			//          DPAsXCEXa
			sFresh:   "oSSSSSSSo",
			sDefined: "SoSSSSSSo",
			sPushed:  "SSoSSSSSo",
			sAnn:     "SSSooSSSo",
			sPend:    "SSSoSoSSo",
			sFin:     "SSSoSSSSS",
			sAbort:   "SSSSSSSSS",
		},
		TypeSub: {
			sFresh:   "oSSSSSSSo",
			sDefined: "SoSSSSSSo",
			sPushed:  "SSoSSSSSo",
			sAnn:     "SSSSoSSSo",
			sPend:    "SSSSoSooo",
			sFin:     "SSSSSSooS",
			sAbort:   "SSSSSSSSS",
		},
		// Like an ADD until FINALIZED, then its replaced processes
		// leave like a SUB's (Enforce, AllExited).
		TypeReplace: {
			sFresh:   "oSSSSSSSo",
			sDefined: "SoSSSSSSo",
			sPushed:  "SSoSSSSSo",
			sAnn:     "SSSooSSSo",
			sPend:    "SSSoSoSSo",
			sFin:     "SSSoSSooS",
			sAbort:   "SSSSSSSSS",
		},
	}
	for _, typ := range []Type{TypeAdd, TypeSub, TypeReplace} {
		for _, s := range states {
			row := want[typ][s]
			for i, ev := range events {
				t.Run(typ.String()+"/"+s+"/"+ev.name, func(t *testing.T) {
					rc := build(t, typ, s)
					before := rc.Info()
					err := ev.do(rc, at(100))
					switch row[i] {
					case 'o':
						if err != nil {
							t.Fatalf("want success, got %v", err)
						}
					case 'S':
						if !errors.Is(err, wire.ErrState) {
							t.Fatalf("want ErrState, got %v", err)
						}
						if !strings.Contains(err.Error(), delta0) {
							t.Errorf("error %q does not name the delta", err)
						}
						if after := rc.Info(); !reflect.DeepEqual(before, after) {
							t.Errorf("failed event changed the RC:\nbefore %+v\nafter  %+v", before, after)
						}
					}
				})
			}
		}
	}
}

// TestCheckTransition covers every (from, to) pair of statuses.
func TestCheckTransition(t *testing.T) {
	legal := map[[2]Status]bool{
		{StatusNull, StatusAnnounced}:    true,
		{StatusNull, StatusAborted}:      true,
		{StatusAnnounced, StatusPending}: true,
		{StatusAnnounced, StatusAborted}: true,
		{StatusPending, StatusFinalized}: true,
		{StatusPending, StatusAborted}:   true,
	}
	n := 0
	for _, from := range Statuses() {
		for _, to := range Statuses() {
			err := CheckTransition(from, to, delta0)
			if legal[[2]Status{from, to}] {
				n++
				if err != nil {
					t.Errorf("%s -> %s: want legal, got %v", from, to, err)
				}
				continue
			}
			if !errors.Is(err, wire.ErrState) {
				t.Errorf("%s -> %s: want ErrState, got %v", from, to, err)
				continue
			}
			for _, part := range []string{from.String(), to.String(), delta0} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("%s -> %s: error %q lacks %q", from, to, err, part)
				}
			}
		}
	}
	if n != len(legal) {
		t.Errorf("checked %d legal pairs, want %d", n, len(legal))
	}
}

func TestParseNames(t *testing.T) {
	for _, s := range Statuses() {
		for _, in := range []string{s.String(), strings.ToLower(s.String())} {
			got, err := ParseStatus(in)
			if err != nil || got != s {
				t.Errorf("ParseStatus(%q) = %v, %v", in, got, err)
			}
		}
	}
	if got := StatusPending.String(); got != "PENDING" {
		t.Errorf("String = %q", got)
	}
	for _, typ := range []Type{TypeNull, TypeAdd, TypeSub, TypeReplace} {
		got, err := ParseType(strings.ToLower(typ.String()))
		if err != nil || got != typ {
			t.Errorf("ParseType(%q) = %v, %v", typ, got, err)
		}
	}
	if got, err := ParseType("Sub"); err != nil || got != TypeSub {
		t.Errorf("ParseType(Sub) = %v, %v", got, err)
	}
	for _, k := range []RequesterKind{ByTool, ByApp, ByScheduler, ByRuntime} {
		got, err := ParseRequesterKind(strings.ToUpper(k.String()))
		if err != nil || got != k {
			t.Errorf("ParseRequesterKind(%q) = %v, %v", k, got, err)
		}
	}
	for _, bad := range []func() error{
		func() error { _, err := ParseStatus("done"); return err },
		func() error { _, err := ParseType("grow"); return err },
		func() error { _, err := ParseRequesterKind("user"); return err },
	} {
		if err := bad(); !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("want ErrInvalid, got %v", err)
		}
	}
	if got := (Requester{Kind: ByApp, Rank: 7}).String(); got != "app(rank 7)" {
		t.Errorf("requester = %q", got)
	}
	if got := (Requester{Kind: ByTool, Name: "dynrc"}).String(); got != "tool(dynrc)" {
		t.Errorf("requester = %q", got)
	}
	if got := DeltaName("jac", 12); got != "mpi://rte/jac/rc/12" {
		t.Errorf("DeltaName = %q", got)
	}
}

func TestNewValidation(t *testing.T) {
	tests := []struct {
		name  string
		job   string
		delta string
		req   Request
		want  *wire.Error
		n     int
	}{
		{"add", app, delta0, Request{Type: TypeAdd, N: 4}, nil, 4},
		{"sub count", app, delta0, Request{Type: TypeSub, N: 2}, nil, 2},
		{"sub named, n from ranks", app, delta0, Request{Type: TypeSub, Ranks: []uint32{3, 5}}, nil, 2},
		{"sub named, n matches", app, delta0, Request{Type: TypeSub, N: 2, Ranks: []uint32{3, 5}}, nil, 2},
		{"replace count", app, delta0, Request{Type: TypeReplace, N: 1}, nil, 1},
		{"replace named, n from ranks", app, delta0, Request{Type: TypeReplace, Ranks: []uint32{3, 7}}, nil, 2},
		{"replace zero", app, delta0, Request{Type: TypeReplace}, wire.ErrInvalid, 0},
		{"replace n mismatch", app, delta0, Request{Type: TypeReplace, N: 1, Ranks: []uint32{3, 7}}, wire.ErrInvalid, 0},
		{"replace duplicate rank", app, delta0, Request{Type: TypeReplace, Ranks: []uint32{3, 3}}, wire.ErrInvalid, 0},
		{"null type", app, delta0, Request{Type: TypeNull, N: 1}, wire.ErrInvalid, 0},
		{"add zero", app, delta0, Request{Type: TypeAdd}, wire.ErrInvalid, 0},
		{"add names ranks", app, delta0, Request{Type: TypeAdd, N: 1, Ranks: []uint32{1}}, wire.ErrInvalid, 0},
		{"sub zero", app, delta0, Request{Type: TypeSub}, wire.ErrInvalid, 0},
		{"sub n mismatch", app, delta0, Request{Type: TypeSub, N: 3, Ranks: []uint32{1}}, wire.ErrInvalid, 0},
		{"sub duplicate rank", app, delta0, Request{Type: TypeSub, Ranks: []uint32{1, 1}}, wire.ErrInvalid, 0},
		{"empty job", "", delta0, Request{Type: TypeAdd, N: 1}, wire.ErrInvalid, 0},
		{"empty delta", app, "", Request{Type: TypeAdd, N: 1}, wire.ErrInvalid, 0},
		{"bad requester", app, delta0, Request{Type: TypeAdd, N: 1, By: Requester{Kind: 9}}, wire.ErrInvalid, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc, err := New(tt.job, 0, tt.delta, tt.req, at(0))
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("want %v, got %v", tt.want.Code, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rc.Status() != StatusNull || rc.Info().N != tt.n || !rc.Times().Requested.Equal(at(0)) {
				t.Errorf("got %+v", rc.Info())
			}
		})
	}
	if _, err := New(app, 0, delta0, Request{Type: TypeAdd, N: 1}, time.Time{}); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("zero time: %v", err)
	}
}

func TestDefineDeltaValidation(t *testing.T) {
	named := Request{Type: TypeSub, Ranks: []uint32{4, 6}}
	tests := []struct {
		name  string
		req   Request
		ranks []uint32
		bound []string
		ok    bool
	}{
		{"add ok", addReq(), []uint32{8, 9}, []string{setApp}, true},
		{"add wrong count", addReq(), []uint32{8}, []string{setApp}, false},
		{"add two bound", addReq(), []uint32{8, 9}, []string{setA, setB}, false},
		{"add no bound", addReq(), []uint32{8, 9}, nil, false},
		{"dup rank", addReq(), []uint32{8, 8}, []string{setApp}, false},
		{"sub ok", subReq(), []uint32{8, 9}, []string{setA, setB}, true},
		{"sub no bound", subReq(), []uint32{8, 9}, nil, false},
		{"sub repeated bound", subReq(), []uint32{8, 9}, []string{setA, setA}, false},
		{"sub empty bound name", subReq(), []uint32{8, 9}, []string{""}, false},
		{"named ok", named, []uint32{6, 4}, []string{setA}, true},
		{"named other ranks", named, []uint32{4, 5}, []string{setA}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := mustNew(t, tt.req)
			err := rc.DefineDelta(at(1), tt.ranks, tt.bound)
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(rc.Ranks(), tt.ranks) || !reflect.DeepEqual(rc.Bound(), tt.bound) {
					t.Errorf("ranks %v bound %v", rc.Ranks(), rc.Bound())
				}
				return
			}
			if !errors.Is(err, wire.ErrInvalid) {
				t.Fatalf("want ErrInvalid, got %v", err)
			}
			if !rc.Times().DeltaDefined.IsZero() || rc.Ranks() != nil {
				t.Errorf("failed DefineDelta left traces: %+v", rc.Info())
			}
		})
	}
}

func TestADDLifecycleAndDurations(t *testing.T) {
	rc := mustNew(t, addReq())
	steps := []func() error{
		func() error { return rc.DefineDelta(at(2), []uint32{6, 7}, []string{setApp}) },
		func() error { return rc.PushJobData(at(5)) },
		func() error { return rc.Announce(at(6)) },
		func() error {
			st, err := rc.Accept(at(10), setApp)
			if st != StatusPending {
				t.Errorf("after accept: %s", st)
			}
			return err
		},
		// The launch report may lag behind the accept.
		func() error { return rc.AllStarted(at(30)) },
		func() error { return rc.Confirm(at(45)) },
	}
	for i, f := range steps {
		if err := f(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if rc.Status() != StatusFinalized {
		t.Fatalf("status %s", rc.Status())
	}
	if !rc.Includes(7) || rc.Includes(5) {
		t.Errorf("Includes wrong for delta %v", rc.Ranks())
	}
	type row struct {
		step         Step
		prev, fromRq int
	}
	want := []row{
		{StepRequested, 0, 0},
		{StepDeltaDefined, 2, 2},
		{StepJobDataPushed, 3, 5},
		{StepAnnounced, 1, 6},
		{StepAcceptPublished, 4, 10},
		{StepAllStarted, 20, 30},
		{StepConfirmed, 15, 45},
		{StepFinalized, 0, 45},
	}
	got := rc.Durations()
	if len(got) != len(want) {
		t.Fatalf("durations: %+v", got)
	}
	ms := time.Millisecond
	for i, w := range want {
		g := got[i]
		if g.Step != w.step || g.SincePrev != time.Duration(w.prev)*ms || g.SinceRequest != time.Duration(w.fromRq)*ms {
			t.Errorf("row %d: got %s prev=%v req=%v, want %s prev=%dms req=%dms",
				i, g.Step, g.SincePrev, g.SinceRequest, w.step, w.prev, w.fromRq)
		}
	}
	// The snapshot is plain data that survives JSON with readable names.
	b, err := json.Marshal(rc.Info())
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{`"type":"ADD"`, `"status":"FINALIZED"`, `"kind":"tool"`, `"confirmed":"2024-05-01T12:00:00.045Z"`} {
		if !strings.Contains(string(b), part) {
			t.Errorf("JSON %s lacks %s", b, part)
		}
	}
	if strings.Contains(string(b), "all_exited") {
		t.Errorf("JSON %s shows a step that was never reached", b)
	}
	var back Info
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, rc.Info()) {
		t.Errorf("JSON round trip:\n got %+v\nwant %+v", back, rc.Info())
	}
}

func announcedSub(t *testing.T, bound ...string) *RC {
	t.Helper()
	rc := mustNew(t, subReq())
	if err := rc.DefineDelta(at(1), []uint32{4, 5}, bound); err != nil {
		t.Fatal(err)
	}
	if err := rc.PushJobData(at(2)); err != nil {
		t.Fatal(err)
	}
	if err := rc.Announce(at(3)); err != nil {
		t.Fatal(err)
	}
	return rc
}

func TestSUBOneBoundSet(t *testing.T) {
	rc := announcedSub(t, setApp)
	st, err := rc.Accept(at(7), setApp)
	if err != nil || st != StatusFinalized {
		t.Fatalf("accept: %s, %v", st, err)
	}
	ts := rc.Times()
	if !ts.AcceptPublished.Equal(at(7)) || !ts.Finalized.Equal(at(7)) {
		t.Errorf("times %+v", ts)
	}
	if err := rc.Enforce(at(9)); err != nil {
		t.Fatal(err)
	}
	if err := rc.AllExited(at(12)); err != nil {
		t.Fatal(err)
	}
	d := rc.Durations()
	var names []string
	for _, r := range d {
		names = append(names, r.Step.String())
	}
	want := "requested delta_defined job_data_pushed announced accept_published finalized enforced all_exited"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("steps %q, want %q", got, want)
	}
	if last := d[len(d)-1]; last.SincePrev != 3*time.Millisecond || last.SinceRequest != 12*time.Millisecond {
		t.Errorf("last row %+v", last)
	}
}

func TestSUBTwoBoundSets(t *testing.T) {
	rc := announcedSub(t, setA, setB)
	if st, err := rc.Accept(at(5), setB); err != nil || st != StatusPending {
		t.Fatalf("first accept: %s, %v", st, err)
	}
	// Duplicate: an error that names the set, and the count does not move.
	_, err := rc.Accept(at(6), setB)
	if !errors.Is(err, wire.ErrState) || !strings.Contains(err.Error(), setB) {
		t.Errorf("duplicate accept: %v", err)
	}
	// Not bound: invalid, names the set.
	_, err = rc.Accept(at(6), unbound)
	if !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), unbound) {
		t.Errorf("unbound accept: %v", err)
	}
	if rc.Status() != StatusPending {
		t.Fatalf("status %s after rejected accepts", rc.Status())
	}
	if st, err := rc.Accept(at(8), setA); err != nil || st != StatusFinalized {
		t.Fatalf("second accept: %s, %v", st, err)
	}
	acc := rc.Accepted()
	if len(acc) != 2 || acc[0].From != setB || acc[1].From != setA || !acc[1].At.Equal(at(8)) {
		t.Errorf("accepts %+v", acc)
	}
	ts := rc.Times()
	if !ts.AcceptPublished.Equal(at(5)) || !ts.Finalized.Equal(at(8)) {
		t.Errorf("times %+v", ts)
	}
}

func TestADDAcceptFromUnboundSet(t *testing.T) {
	rc := build(t, TypeAdd, sAnn)
	if _, err := rc.Accept(at(10), setA); !errors.Is(err, wire.ErrInvalid) {
		t.Fatalf("want ErrInvalid, got %v", err)
	}
	if rc.Status() != StatusAnnounced {
		t.Errorf("status %s", rc.Status())
	}
}

func TestAbortFromEachStatus(t *testing.T) {
	for _, typ := range []Type{TypeAdd, TypeSub} {
		for _, s := range states {
			t.Run(typ.String()+"/"+s, func(t *testing.T) {
				rc := build(t, typ, s)
				err := rc.Abort(at(50), "launch failed on node n2")
				if s == sFin || s == sAbort {
					if !errors.Is(err, wire.ErrState) {
						t.Fatalf("want ErrState, got %v", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if rc.Status() != StatusAborted || rc.AbortReason() != "launch failed on node n2" || !rc.Times().Aborted.Equal(at(50)) {
					t.Errorf("after abort: %+v", rc.Info())
				}
			})
		}
	}
	rc := build(t, TypeAdd, sAnn)
	if err := rc.Abort(at(50), ""); !errors.Is(err, wire.ErrInvalid) || rc.Status() != StatusAnnounced {
		t.Errorf("abort without reason: %v, status %s", err, rc.Status())
	}
}

func TestTimestampsMustNotGoBack(t *testing.T) {
	rc := build(t, TypeAdd, sPushed) // last step at 2 ms
	if err := rc.Announce(at(1)); !errors.Is(err, wire.ErrInvalid) {
		t.Fatalf("announce in the past: %v", err)
	}
	if rc.Status() != StatusNull {
		t.Fatalf("status moved to %s", rc.Status())
	}
	if err := rc.Announce(time.Time{}); !errors.Is(err, wire.ErrInvalid) {
		t.Fatalf("zero time: %v", err)
	}
	if err := rc.Announce(at(2)); err != nil { // equal is fine
		t.Fatal(err)
	}
	if _, err := rc.Accept(at(1), setApp); !errors.Is(err, wire.ErrInvalid) || rc.Status() != StatusAnnounced {
		t.Fatalf("accept in the past: %v, %s", err, rc.Status())
	}
}

// TestExpire: only a PENDING SUB can be completed by the runtime.
func TestExpire(t *testing.T) {
	for _, typ := range []Type{TypeAdd, TypeSub} {
		for _, s := range states {
			rc := build(t, typ, s)
			err := rc.Expire(at(20), "setB did not accept within 1s")
			ok := typ == TypeSub && s == sPend
			if (err == nil) != ok {
				t.Errorf("%s %s: Expire: %v", typ, s, err)
				continue
			}
			if ok && (rc.Status() != StatusFinalized || rc.Times().Finalized != at(20) || rc.AbortReason() == "") {
				t.Errorf("%s %s: after Expire %s, %v, %q", typ, s, rc.Status(), rc.Times().Finalized, rc.AbortReason())
			}
		}
	}
	if err := build(t, TypeSub, sPend).Expire(at(20), ""); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("Expire without a reason: %v", err)
	}
}

// DefineReplace checks its two rank lists against the request; the other
// types cannot use it, nor a REPLACE DefineDelta.
func TestDefineReplace(t *testing.T) {
	tests := []struct {
		name    string
		req     Request
		in, out []uint32
		want    *wire.Error
	}{
		{"ok", replaceReq(), []uint32{10, 11}, []uint32{3, 5}, nil},
		{"ok, runtime's choice", Request{Type: TypeReplace, N: 2}, []uint32{10, 11}, []uint32{1, 2}, nil},
		{"fewer new", replaceReq(), []uint32{10}, []uint32{3, 5}, wire.ErrInvalid},
		{"fewer replaced", Request{Type: TypeReplace, N: 2}, []uint32{10, 11}, []uint32{3}, wire.ErrInvalid},
		{"named rank not replaced", replaceReq(), []uint32{10, 11}, []uint32{3, 6}, wire.ErrInvalid},
		{"rank new and replaced", replaceReq(), []uint32{5, 11}, []uint32{3, 5}, wire.ErrInvalid},
		{"not a replace", addReq(), []uint32{10, 11}, []uint32{3, 5}, wire.ErrState},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc := mustNew(t, tc.req)
			err := rc.DefineReplace(at(1), tc.in, tc.out, setApp)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if i := rc.Info(); !reflect.DeepEqual(i.Ranks, tc.in) || !reflect.DeepEqual(i.Out, tc.out) || !reflect.DeepEqual(i.Bound, []string{setApp}) {
					t.Errorf("info %+v", i)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if rc.Info().Times.DeltaDefined != (time.Time{}) {
				t.Errorf("a refused definition was recorded")
			}
		})
	}
	if err := mustNew(t, replaceReq()).DefineDelta(at(1), []uint32{10, 11}, []string{setApp}); !errors.Is(err, wire.ErrState) {
		t.Errorf("DefineDelta on a REPLACE: %v, want ErrState", err)
	}
}
