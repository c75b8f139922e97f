package pmi

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

func reader(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }

func TestReadFrame(t *testing.T) {
	tests := []struct {
		name, in, want string
		err            *wire.Error
	}{
		// MPICH 4.0.x: left-aligned length, 6 bytes more than the payload,
		// filled with NULs or garbage (pmi-wire.md §3.1).
		// The 6 junk bytes are dropped: junk beginning with ';' would
		// otherwise make the last value's ';' an escaped ";;".
		{name: "4.0.x NULs", in: "20    cmd=job-getid;\x00\x00\x00\x00\x00\x00", want: "cmd=job-getid;"},
		{name: "4.0.x junk after ;", in: "27    cmd=spawn;infoval0=.;;\x00\xa2lG\x95", want: "cmd=spawn;infoval0=.;"},
		{name: "left-aligned, no junk", in: "14    cmd=job-getid;", want: "cmd=job-getid;"},
		{name: "Hydra right-aligned", in: "    14cmd=job-getid;", want: "cmd=job-getid;"},
		{name: "centered", in: "  14  cmd=job-getid;", want: "cmd=job-getid;"},
		{name: "empty payload", in: "0     ", want: ""},
		{name: "letters", in: "abcdef", err: wire.ErrMalformed},
		{name: "sign", in: "+14   cmd=job-getid;", err: wire.ErrMalformed},
		{name: "inner space", in: "1 4   cmd=job-getid;", err: wire.ErrMalformed},
		{name: "blank", in: "      ", err: wire.ErrMalformed},
		{name: "too large", in: "999999", err: wire.ErrTooLarge},
		{name: "short payload", in: "20    cmd=job", err: wire.ErrMalformed},
		{name: "short header", in: "20", err: wire.ErrMalformed},
	}
	for _, tt := range tests {
		got, err := ReadFrame(reader(tt.in))
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("%s: ReadFrame = %q, %v; want %v", tt.name, got, err, tt.err)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: ReadFrame = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
	if _, err := ReadFrame(reader("")); err != io.EOF {
		t.Errorf("ReadFrame at EOF = %v, want io.EOF", err)
	}
}

func TestParseFrame(t *testing.T) {
	tests := []struct {
		name, in string
		want     Command
		bad      bool
	}{
		{name: "fullinit", in: "cmd=fullinit;pmirank=3;threaded=FALSE;",
			want: Command{Cmd: "fullinit", Pairs: []Pair{{"pmirank", "3"}, {"threaded", "FALSE"}}}},
		{name: "NUL junk", in: "cmd=job-getid;\x00\x00\x00\x00\x00\x00", want: Command{Cmd: "job-getid"}},
		{name: "stack junk", in: "cmd=kvs-fence;d;\x1c\xfd\x7f\x00\x00\xd8", want: Command{Cmd: "kvs-fence"}},
		{name: "junk pair-like tail", in: "cmd=kvs-fence;x=1", want: Command{Cmd: "kvs-fence"}},
		{name: "escaped semicolons", in: "cmd=kvs-put;key=k;value=a;;b;;;",
			want: Command{Cmd: "kvs-put", Pairs: []Pair{{"key", "k"}, {"value", "a;b;"}}}},
		{name: "value with =", in: "cmd=kvs-put;key=k;value=segments=3;",
			want: Command{Cmd: "kvs-put", Pairs: []Pair{{"key", "k"}, {"value", "segments=3"}}}},
		{name: "duplicate keys kept in order", in: "cmd=x;a=1;a=2;",
			want: Command{Cmd: "x", Pairs: []Pair{{"a", "1"}, {"a", "2"}}}},
		{name: "no cmd", in: "key=x;", bad: true},
		{name: "empty", in: "", bad: true},
		{name: "empty cmd", in: "cmd=;", bad: true},
		{name: "unterminated cmd", in: "cmd=fullinit", bad: true},
		{name: "garbage first", in: "xx;cmd=a;", bad: true},
	}
	for _, tt := range tests {
		got, err := ParseFrame([]byte(tt.in))
		if tt.bad {
			if !errors.Is(err, wire.ErrMalformed) {
				t.Errorf("%s: ParseFrame = %+v, %v; want ErrMalformed", tt.name, got, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: ParseFrame = %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
	c, _ := ParseFrame([]byte("cmd=x;a=1;a=2;w=TRUE;n=5;"))
	if v, _ := c.Get("a"); v != "1" {
		t.Errorf("Get(a) = %q, want the first occurrence", v)
	}
	if w, ok := c.Bool("w"); !w || !ok {
		t.Errorf("Bool(w) = %v, %v", w, ok)
	}
	if _, ok := c.Bool("a"); ok {
		t.Error("Bool(a=1) accepted a non-boolean")
	}
	if n, ok := c.Int("n"); n != 5 || !ok {
		t.Errorf("Int(n) = %d, %v", n, ok)
	}
}

func TestAppendFrame(t *testing.T) {
	b, err := AppendFrame(nil, "kvs-get-response", "found", "TRUE", "value", "a;b", "rc", "0")
	want := "    48cmd=kvs-get-response;found=TRUE;value=a;;b;rc=0;"
	if err != nil || string(b) != want {
		t.Fatalf("AppendFrame = %q, %v; want %q", b, err, want)
	}
	c, err := ParseFrame(b[HeaderLen:])
	if err != nil || c.Cmd != "kvs-get-response" {
		t.Fatal(c, err)
	}
	if v, _ := c.Get("value"); v != "a;b" {
		t.Errorf("value after round trip = %q", v)
	}
	if _, err := AppendFrame(nil, "x", "k;", "v"); err == nil {
		t.Error("a key with ';' was accepted")
	}
	if _, err := AppendFrame(nil, "x", "k", strings.Repeat("v", MaxFrame)); !errors.Is(err, wire.ErrTooLarge) {
		t.Errorf("oversized frame: %v", err)
	}
}

// FuzzPMI2Frame: framing and parsing never panic and fail with coded
// errors; parsed commands survive AppendFrame and parsing again.
func FuzzPMI2Frame(f *testing.F) {
	for _, s := range []string{
		"20    cmd=job-getid;\x00\x00\x00\x00\x00\x00",
		"44    cmd=fullinit;pmirank=0;threaded=FALSE;\x00\x00\x00\x00\x00\x00",
		"130   cmd=spawn;ncmds=1;preputcount=1;ppkey0=PARENT_ROOT_PORT_NAME;ppval0=fakeport;subcmd=./drv2;maxprocs=2;argc=0;infokeycount=0;d;\x1c\xfd\x7f\x00\x00\xd8",
		"    30cmd=kvs-put;key=k;value=a;;b;",
		"999999", "      ", "1     ;",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bufio.NewReader(bytes.NewReader(in))
		for range 4 {
			p, err := ReadFrame(r)
			if err != nil {
				if err != io.EOF && wire.CodeOf(err) == wire.CodeInternal {
					t.Fatalf("uncoded ReadFrame error: %v", err)
				}
				return
			}
			c, err := ParseFrame(p)
			if err != nil {
				if !errors.Is(err, wire.ErrMalformed) {
					t.Fatalf("ParseFrame error without ErrMalformed: %v", err)
				}
				continue
			}
			if c.Cmd == "" {
				t.Fatal("command without a name")
			}
			if c.Cmd == "spawn" {
				_, _ = ParseSpawn2(&c)
			}
			kv := make([]string, 0, 2*len(c.Pairs))
			for _, p := range c.Pairs {
				kv = append(kv, p.Key, p.Value)
			}
			b, err := AppendFrame(nil, c.Cmd, kv...)
			if err != nil {
				continue
			}
			p2, err := ReadFrame(bufio.NewReader(bytes.NewReader(b)))
			if err != nil {
				t.Fatalf("reread of %q: %v", b, err)
			}
			c2, err := ParseFrame(p2)
			if err != nil || !reflect.DeepEqual(c, c2) {
				t.Fatalf("round trip changed %+v into %+v (%v)", c, c2, err)
			}
		}
	})
}
