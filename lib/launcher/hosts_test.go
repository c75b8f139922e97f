package launcher

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/wire"
)

type nodes = []alloc.Node

func nd(name string, slots int) alloc.Node { return alloc.Node{Name: name, Slots: slots} }

func TestParseHostfile(t *testing.T) {
	cases := []struct {
		name, text string
		def        int
		want       nodes
		err        string // substring of the error, "" = success
	}{
		{name: "openmpi form", text: "a slots=4\nb slots=8\n", want: nodes{nd("a", 4), nd("b", 8)}},
		{name: "colon form", text: "a:2\nb:3", want: nodes{nd("a", 2), nd("b", 3)}},
		{name: "bare host gets default", text: "a\nb slots=2\n", def: 6, want: nodes{nd("a", 6), nd("b", 2)}},
		{name: "bare host default 1", text: "a\n", want: nodes{nd("a", 1)}},
		{name: "comments and blanks", text: "# cluster\n\n  a slots=2   # rack 1\n\t\n#b\n10.0.0.7:3\n", want: nodes{nd("a", 2), nd("10.0.0.7", 3)}},
		{name: "duplicates summed in first-seen order", text: "a:2\nb:1\na slots=3\n", want: nodes{nd("a", 5), nd("b", 1)}},
		{name: "bare duplicates", text: "a\na\na\n", want: nodes{nd("a", 3)}},
		{name: "empty", text: "# nothing\n\n", err: "hosts: no hosts"},
		{name: "unknown attribute", text: "a slots=2\nb max_slots=4\n", err: "hosts:2: unsupported attribute \"max_slots=4\""},
		{name: "bad count", text: "a slots=x\n", err: "hosts:1: slot count \"x\""},
		{name: "zero count", text: "\n\na:0\n", err: "hosts:3: slot count \"0\""},
		{name: "negative count", text: "a slots=-1", err: "hosts:1: slot count \"-1\""},
		{name: "too many", text: "a slots=70000", err: "hosts:1: slot count"},
		{name: "sum too large", text: "a slots=65536\na slots=1\n", err: "hosts:2: host \"a\": slots add up"},
		{name: "slots twice", text: "a:2 slots=3", err: "hosts:1: \"a:2\": slots given twice"},
		{name: "option-like host", text: "-oProxyCommand=x", err: "hosts:1: host name \"-oProxyCommand=x\" starts with '-'"},
		{name: "shell chars", text: "a;b", err: "hosts:1: host name \"a;b\": character ';'"},
		{name: "empty host", text: ":4", err: "hosts:1: empty host name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseHostfile("hosts", strings.NewReader(c.text), c.def)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, wire.ErrInvalid) {
					t.Fatalf("got %v, %v; want error containing %q (invalid)", got, err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

func TestReadHostfile(t *testing.T) {
	got, err := ReadHostfile(filepath.Join("testdata", "hostfile"), 1)
	want := nodes{nd("n01", 28), nd("n02", 28), nd("n03", 4), nd("n04", 1)}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
	_, err = ReadHostfile(filepath.Join(t.TempDir(), "missing"), 1)
	if !errors.Is(err, wire.ErrNotFound) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestParseHosts(t *testing.T) {
	cases := []struct {
		in   string
		def  int
		want nodes
		err  string
	}{
		{in: "h1:4,h2:8", want: nodes{nd("h1", 4), nd("h2", 8)}},
		{in: "h1, h2:2", def: 3, want: nodes{nd("h1", 3), nd("h2", 2)}},
		{in: "h1,h1,h2", want: nodes{nd("h1", 2), nd("h2", 1)}},
		{in: "h1:2,h1:2", want: nodes{nd("h1", 4)}},
		{in: "", err: "entry 1 is empty"},
		{in: "h1,,h2", err: "entry 2 is empty"},
		{in: "h1:x", err: "slot count \"x\""},
		{in: "h1:2:3", err: "slot count \"2:3\""},
		{in: "h$1", err: "character '$'"},
	}
	for _, c := range cases {
		got, err := ParseHosts(c.in, c.def)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, wire.ErrInvalid) {
				t.Errorf("%q: got %v, %v; want error containing %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestVirtualNodes(t *testing.T) {
	got, err := VirtualNodes(3, 2)
	if want := (nodes{nd("node0", 2), nd("node1", 2), nd("node2", 2)}); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range [][2]int{{0, 1}, {-1, 1}, {1, 0}, {1, MaxSlots + 1}} {
		if _, err := VirtualNodes(bad[0], bad[1]); !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("VirtualNodes(%d, %d): %v", bad[0], bad[1], err)
		}
	}
}
