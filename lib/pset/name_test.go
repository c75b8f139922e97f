package pset

import (
	"errors"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// wantErr fails unless err matches sentinel and its text contains every
// fragment.
func wantErr(t *testing.T, err error, sentinel *wire.Error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s error, got nil", sentinel.Code)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("want %s error, got %v (code %s)", sentinel.Code, err, wire.CodeOf(err))
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not mention %q", err, f)
		}
	}
}

func TestParseGood(t *testing.T) {
	cases := []struct {
		in   string
		want Name
		str  string
	}{
		{"mpi://WORLD", Name{Kind: KindWorld}, "mpi://WORLD"},
		{"mpi://world", Name{Kind: KindWorld}, "mpi://WORLD"},
		{"mpi://SELF", Name{Kind: KindSelf}, "mpi://SELF"},
		{"mpi://Shared", Name{Kind: KindShared}, "mpi://SHARED"},
		{"mpi://app/app1", Name{Kind: KindApp, App: "app1"}, "mpi://app/app1"},
		{"mpi://app/app1/mul", Name{Kind: KindApp, App: "app1", Sub: "mul"}, "mpi://app/app1/mul"},
		{"mpi://app/job-1.x_y/a/B/c.d", Name{Kind: KindApp, App: "job-1.x_y", Sub: "a/B/c.d"}, "mpi://app/job-1.x_y/a/B/c.d"},
		{"mpi://app/app1/rc", Name{Kind: KindApp, App: "app1", Sub: "rc"}, "mpi://app/app1/rc"},
		{"mpi://rte/app1/rc/0", Name{Kind: KindDelta, App: "app1", RC: 0}, "mpi://rte/app1/rc/0"},
		{"mpi://rte/app1/rc/42", Name{Kind: KindDelta, App: "app1", RC: 42}, "mpi://rte/app1/rc/42"},
		{"mpi://rte/app1/rc/42/out", Name{Kind: KindDelta, App: "app1", RC: 42, Out: true}, "mpi://rte/app1/rc/42/out"},
		{"mpi://rte/app1/rc/18446744073709551615", Name{Kind: KindDelta, App: "app1", RC: 1<<64 - 1}, "mpi://rte/app1/rc/18446744073709551615"},
		{"mpi://app/" + strings.Repeat("a", MaxAppLen), Name{Kind: KindApp, App: strings.Repeat("a", MaxAppLen)}, "mpi://app/" + strings.Repeat("a", MaxAppLen)},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("Parse(%q) = %+v, want %+v", c.in, got, c.want)
		}
		if got.String() != c.str {
			t.Errorf("Parse(%q).String() = %q, want %q", c.in, got.String(), c.str)
		}
	}
}

func TestParseBad(t *testing.T) {
	long := "mpi://app/a/" + strings.Repeat("x", MaxNameLen)
	cases := []struct{ in, frag string }{
		{"", "missing mpi:// scheme"},
		{"WORLD", "missing mpi:// scheme"},
		{"MPI://WORLD", "missing mpi:// scheme"},
		{"mpi:/WORLD", "missing mpi:// scheme"},
		{"mpi://", "segment 1 is empty"},
		{"mpi://WORLDS", "unknown domain \"WORLDS\""},
		{"mpi://foo/bar", "unknown domain \"foo\""},
		{"mpi://app", "missing application name"},
		{"mpi://app/", "segment 2 is empty"},
		{"mpi://app//x", "segment 2 is empty"},
		{"mpi://app/app1/", "segment 3 is empty"},
		{"mpi://app/app1//mul", "segment 3 is empty"},
		{"mpi://app/app1/mul/", "segment 4 is empty"},
		{"mpi://app/app 1", "character ' '"},
		{"mpi://app/app1/m@1", "character '@'"},
		{"mpi://app/app1/a:b", "character ':'"},
		{"mpi://app/app1/ü", "non-ASCII character"},
		{"mpi://app/app1/..", "dots only"},
		{"mpi://app/app1/.", "dots only"},
		{"mpi://app/" + strings.Repeat("a", MaxAppLen+1), "application name longer than 64"},
		{long, "longer than 255 bytes"},
		{"mpi://rte/app1", "mpi://rte/<app>/rc/<n>"},
		{"mpi://rte/app1/rc", "mpi://rte/<app>/rc/<n>"},
		{"mpi://rte/app1/delta/1", "mpi://rte/<app>/rc/<n>"},
		{"mpi://rte/app1/rc/1/x", "mpi://rte/<app>/rc/<n>"},
		{"mpi://rte/app1/rc/1/out/x", "mpi://rte/<app>/rc/<n>/out"},
		{"mpi://rte/app1/rc/x/out", "not a non-negative decimal"},
		{"mpi://rte/app1/rc/-1", "not a non-negative decimal"},
		{"mpi://rte/app1/rc/x1", "not a non-negative decimal"},
		{"mpi://rte/app1/rc/01", "leading zeros"},
		{"mpi://rte/app1/rc/18446744073709551616", "out of range"},
	}
	for _, c := range cases {
		_, err := Parse(c.in)
		if err == nil {
			t.Errorf("Parse(%q): want error", c.in)
			continue
		}
		if !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("Parse(%q): code %s, want invalid", c.in, wire.CodeOf(err))
		}
		msg := err.Error()
		for _, f := range []string{c.frag, "accepted: mpi://WORLD", "mpi://app/<app>[/<name>...]"} {
			if !strings.Contains(msg, f) {
				t.Errorf("Parse(%q) error %q does not mention %q", c.in, msg, f)
			}
		}
		if len(c.in) < 100 && !strings.Contains(msg, `"`+c.in+`"`) {
			t.Errorf("Parse(%q) error %q does not quote the name", c.in, msg)
		}
	}
}

func TestParseRef(t *testing.T) {
	cases := []struct {
		in   string
		name string
		ver  int
		frag string // error fragment, "" for success
	}{
		{"mpi://app/a/x", "mpi://app/a/x", Latest, ""},
		{"mpi://app/a/x@0", "mpi://app/a/x", 0, ""},
		{"mpi://app/a/x@17", "mpi://app/a/x", 17, ""},
		{"mpi://world@0", "mpi://WORLD", 0, ""},
		{"mpi://app/a/x@", "", 0, "version is empty"},
		{"mpi://app/a/x@-1", "", 0, "not a non-negative"},
		{"mpi://app/a/x@07", "", 0, "leading zeros"},
		{"mpi://app/a/x@99999999999", "", 0, "out of range"},
		{"mpi://app/a/x@1@2", "", 0, "not a non-negative"},
		{"mpi://app/a//x@1", "", 0, "segment 3 is empty"},
	}
	for _, c := range cases {
		n, v, err := ParseRef(c.in)
		if c.frag != "" {
			if err == nil || !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), c.frag) {
				t.Errorf("ParseRef(%q) = %v, want invalid error with %q", c.in, err, c.frag)
			}
			continue
		}
		if err != nil || n.String() != c.name || v != c.ver {
			t.Errorf("ParseRef(%q) = %s, %d, %v; want %s, %d", c.in, n, v, err, c.name, c.ver)
		}
	}
}

func TestKindAndOpText(t *testing.T) {
	for k := KindWorld; k <= KindDelta; k++ {
		b, _ := k.MarshalText()
		var got Kind
		if err := got.UnmarshalText(b); err != nil || got != k {
			t.Errorf("kind %d: round trip via %q gave %d, %v", k, b, got, err)
		}
	}
	var k Kind
	wantErr(t, k.UnmarshalText([]byte("bogus")), wire.ErrInvalid, "bogus")
	for o := OpNull; o <= OpIntersection; o++ {
		b, _ := o.MarshalText()
		var got Op
		if err := got.UnmarshalText([]byte(strings.ToUpper(string(b)))); err != nil || got != o {
			t.Errorf("op %d: round trip via %q gave %d, %v", o, b, got, err)
		}
	}
	_, err := ParseOp("xor")
	wantErr(t, err, wire.ErrInvalid, `"xor"`, "union, difference, intersection, null or split")
}

func TestHelpers(t *testing.T) {
	if got := AppName("app1"); got != "mpi://app/app1" {
		t.Errorf("AppName = %q", got)
	}
	if got := DeltaName("app1", 3); got != "mpi://rte/app1/rc/3" {
		t.Errorf("DeltaName = %q", got)
	}
	if !(Name{Kind: KindApp, App: "a"}).IsRoot() || (Name{Kind: KindApp, App: "a", Sub: "x"}).IsRoot() {
		t.Error("IsRoot wrong")
	}
}
