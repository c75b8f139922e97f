package ompiref

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []Job
		err        string
	}{
		{"one job", "# mpirun.openmpi -n 4 ./abort 7\nexit 7\nabort rank=0 code=7\n",
			[]Job{{Cmd: "mpirun.openmpi -n 4 ./abort 7", Exit: 7, Lines: []string{"abort rank=0 code=7"}}}, ""},
		{"two jobs, one silent", "# a\nexit 0\nx\ny\n# b\nexit 3\n",
			[]Job{{Cmd: "a", Lines: []string{"x", "y"}}, {Cmd: "b", Exit: 3}}, ""},
		{"line before a command", "exit 0\n", nil, `"exit 0" before the first`},
		{"bad exit", "# a\nexit x\n", nil, `"exit x"`},
		{"empty", "", nil, "no job"},
	} {
		got, err := Parse("f", tc.text)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

// TestReferences: every recorded reference parses.
func TestReferences(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/openmpi/*.golden")
	if len(files) == 0 {
		t.Fatal("no reference in testdata/openmpi")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".golden")
		if _, err := Read("../../testdata/openmpi", name); err != nil {
			t.Error(err)
		}
	}
}
