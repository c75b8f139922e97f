package proc

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func collect(t *testing.T, r io.Reader, max int) []string {
	t.Helper()
	var got []string
	if err := splitLines(r, max, func(b []byte) { got = append(got, string(b)) }); err != nil {
		t.Fatalf("splitLines: %v", err)
	}
	return got
}

func TestSplitLines(t *testing.T) {
	long := strings.Repeat("x", 25)
	tests := []struct {
		name string
		in   string
		max  int
		want []string
	}{
		{"empty", "", 16, nil},
		{"one", "a\n", 16, []string{"a"}},
		{"partial last", "a\nb", 16, []string{"a", "b"}},
		{"empty lines", "\n\nx\n", 16, []string{"", "", "x"}},
		{"carriage return kept", "a\r\n", 16, []string{"a\r"}},
		{"long split", long + "\n", 10, []string{long[:10], long[10:20], long[20:]}},
		{"exact max", strings.Repeat("y", 10) + "\nz\n", 10, []string{strings.Repeat("y", 10), "z"}},
		{"exact max then empty line", strings.Repeat("y", 10) + "\n\n", 10, []string{strings.Repeat("y", 10), ""}},
		{"twice max", strings.Repeat("w", 20) + "\n", 10, []string{strings.Repeat("w", 10), strings.Repeat("w", 10)}},
		{"long no newline", long, 10, []string{long[:10], long[10:20], long[20:]}},
		{"grows past initial buffer", strings.Repeat("q", 3*initialLineBuf) + "\n", 4 * initialLineBuf,
			[]string{strings.Repeat("q", 3*initialLineBuf)}},
		{"split at max above initial", strings.Repeat("r", 5*initialLineBuf) + "\n", 4 * initialLineBuf,
			[]string{strings.Repeat("r", 4*initialLineBuf), strings.Repeat("r", initialLineBuf)}},
	}
	readers := map[string]func(io.Reader) io.Reader{
		"whole":   func(r io.Reader) io.Reader { return r },
		"onebyte": iotest.OneByteReader,
		"half":    iotest.HalfReader,
		"dataerr": iotest.DataErrReader,
	}
	for _, tc := range tests {
		for rname, wrap := range readers {
			t.Run(tc.name+"/"+rname, func(t *testing.T) {
				got := collect(t, wrap(strings.NewReader(tc.in)), tc.max)
				if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
					t.Fatalf("got %q, want %q", got, tc.want)
				}
			})
		}
	}
}

func TestSplitLinesError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("a\npart"), iotest.ErrReader(boom))
	var got []string
	err := splitLines(r, 16, func(b []byte) { got = append(got, string(b)) })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if strings.Join(got, "|") != "a|part" {
		t.Fatalf("got %q: the partial line must still be delivered", got)
	}
}

func TestExitStatus(t *testing.T) {
	tests := []struct {
		st     ExitStatus
		str    string
		code   int
		exited bool
		ok     bool
	}{
		{ExitStatus{}, "exited with code 0", 0, true, true},
		{ExitStatus{ExitCode: 3}, "exited with code 3", 3, true, false},
		{ExitStatus{Signal: 9}, "killed by signal 9 (killed)", 137, false, false},
		{ExitStatus{Signal: 15}, "killed by signal 15 (terminated)", 143, false, false},
		{ExitStatus{Signal: 6, CoreDump: true}, "killed by signal 6 (aborted, core dumped)", 134, false, false},
		{ExitStatus{ExitCode: -1}, "exit status unknown", 255, false, false},
	}
	for _, tc := range tests {
		if got := tc.st.String(); got != tc.str {
			t.Errorf("%#v.String() = %q, want %q", tc.st, got, tc.str)
		}
		if got := tc.st.Code(); got != tc.code {
			t.Errorf("%#v.Code() = %d, want %d", tc.st, got, tc.code)
		}
		if tc.st.Exited() != tc.exited || tc.st.Success() != tc.ok {
			t.Errorf("%#v: Exited/Success = %v/%v", tc.st, tc.st.Exited(), tc.st.Success())
		}
	}
}

func TestEnvValue(t *testing.T) {
	env := []string{"PATHX=no", "PATH=/first", "PATH=/second", "EMPTY="}
	if v, ok := envValue(env, "PATH"); !ok || v != "/first" {
		t.Errorf("PATH = %q %v, want the first entry like getenv", v, ok)
	}
	if v, ok := envValue(env, "EMPTY"); !ok || v != "" {
		t.Errorf("EMPTY = %q %v", v, ok)
	}
	if _, ok := envValue(env, "PAT"); ok {
		t.Error("PAT matched a longer key")
	}
}
