package main

import (
	"reflect"
	"testing"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		line           string
		ok             bool
		name           string
		n              int
		env, argv, thn []string
	}{
		{line: "hydra\t8\t/usr/bin/mpiexec.hydra\t-n\t8\t/bin/true", ok: true, name: "hydra", n: 8,
			argv: []string{"/usr/bin/mpiexec.hydra", "-n", "8", "/bin/true"}},
		{line: "warm\t8\tDYNRT_DIR=/d\tA=b\tdynrun\t-n\t8\tx=y", ok: true, name: "warm", n: 8,
			env: []string{"DYNRT_DIR=/d", "A=b"}, argv: []string{"dynrun", "-n", "8", "x=y"}},
		{line: "start\t3\tdynrun\tdvm\tstart\t@then\tdynrun\tdvm\tstop", ok: true, name: "start", n: 3,
			argv: []string{"dynrun", "dvm", "start"}, thn: []string{"dynrun", "dvm", "stop"}},
		{line: "a\t1\tX=1\t@then\tstop", ok: false, name: "a", n: 1, env: []string{"X=1"}, argv: []string{}, thn: []string{"stop"}},
		{line: "short\t1", ok: false},
		{line: "", ok: false},
	}
	for _, tt := range tests {
		v, ok := parseSpec(tt.line)
		if ok != tt.ok {
			t.Errorf("parseSpec(%q) ok = %v, want %v", tt.line, ok, tt.ok)
			continue
		}
		if v == nil {
			if tt.name != "" {
				t.Errorf("parseSpec(%q) = nil, want variant %q", tt.line, tt.name)
			}
			continue
		}
		got := []any{v.name, v.n, v.env, v.argv, v.then}
		want := []any{tt.name, tt.n, tt.env, tt.argv, tt.thn}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("parseSpec(%q) = %#v, want %#v", tt.line, got, want)
		}
	}
}
