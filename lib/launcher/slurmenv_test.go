package launcher

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

func TestExpandHostlist(t *testing.T) {
	cases := []struct {
		expr string
		want []string
		err  string // substring of the error, "" = success
	}{
		{expr: "x", want: []string{"x"}},
		{expr: "a,b,c", want: []string{"a", "b", "c"}},
		{expr: "h[1-3,5],gpu[01-02],x", want: []string{"h1", "h2", "h3", "h5", "gpu01", "gpu02", "x"}},
		{expr: "n[8-11]", want: []string{"n8", "n9", "n10", "n11"}},
		{expr: "n[008-011]", want: []string{"n008", "n009", "n010", "n011"}},
		{expr: "n[098-101]", want: []string{"n098", "n099", "n100", "n101"}},
		{expr: "n[7]", want: []string{"n7"}},
		{expr: "n[07,9]", want: []string{"n07", "n9"}},
		{expr: "rack[1-2]-n[01-02]", want: []string{"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}},
		{expr: "h[1-2].cluster,login", want: []string{"h1.cluster", "h2.cluster", "login"}},
		{expr: "dyn-slurm-h[0-2]", want: []string{"dyn-slurm-h0", "dyn-slurm-h1", "dyn-slurm-h2"}},
		{expr: "a,a", want: []string{"a", "a"}}, // duplicates are the caller's business
		{expr: "", err: "empty host list"},
		{expr: "a,,b", err: "empty entry"},
		{expr: "a,", err: "empty entry"},
		{expr: "h[1-3", err: "'[' is never closed"},
		{expr: "h1-3]", err: "']' without '['"},
		{expr: "h[1-[2]]", err: "nested '['"},
		{expr: "h[]", err: "empty brackets"},
		{expr: "h[3-1]", err: `range "3-1" runs backwards`},
		{expr: "h[a-b]", err: `"a" is not a number`},
		{expr: "h[1-]", err: `"" is not a number`},
		{expr: "h[-1]", err: `"" is not a number`},
		{expr: "h[1,,2]", err: `"" is not a number`},
		{expr: "h[+1]", err: `"+1" is not a number`},
		{expr: "h[0-99999999]", err: "more than 65536 hosts"},
		{expr: "h[0-99999999999]", err: "too large"},
		{expr: "a[0-999]b[0-999]", err: "more than 65536 hosts"},
		{expr: "[1-2]", err: "cannot start with '['"},
		{expr: "h;rm[1-2]", err: "character ';'"},
		{expr: "-x", err: "starts with '-'"},
	}
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			got, err := ExpandHostlist(c.expr)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, %v; want error containing %q", got, err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestParseCountList(t *testing.T) {
	cases := []struct {
		in   string
		want []int
		err  string
	}{
		{in: "4", want: []int{4}},
		{in: "2(x3),1", want: []int{2, 2, 2, 1}},
		{in: "1,2,3", want: []int{1, 2, 3}},
		{in: "8(x2),4(x1),16", want: []int{8, 8, 4, 16}},
		{in: "", err: "empty count list"},
		{in: "0", err: `count "0" is not a number`},
		{in: "-1", err: `count "-1"`},
		{in: "x", err: `count "x"`},
		{in: "2(x0)", err: `repeat "0"`},
		{in: "2(x3", err: "want N or N(xR)"},
		{in: "2(y3)", err: `count "2(y3)"`},
		{in: "2(x+3)", err: `repeat "+3"`},
		{in: "1,,2", err: `count ""`},
		{in: "70000", err: "between 1 and 65536"},
		{in: "1(x70000)", err: "more than 65536 entries"},
		{in: "1(x99999999999999999999)", err: `repeat "99999999999999999999"`},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseCountList(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, %v; want error containing %q", got, err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

func TestReadSlurmAllocation(t *testing.T) {
	scontrol := func(expr string) ([]string, error) {
		switch expr {
		case "weird{1..2}":
			return []string{"weird1", "weird2"}, nil
		case "h[0-":
			return []string{"h]"}, nil // what Slurm 22.05's scontrol answers
		}
		return nil, fmt.Errorf("scontrol: invalid hostlist")
	}
	cases := []struct {
		name string
		env  map[string]string
		sc   func(string) ([]string, error)
		want nodes
		from string
		err  string
	}{
		{name: "tasks per node", env: map[string]string{"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "h[0-2]", "SLURM_TASKS_PER_NODE": "4(x2),2", "SLURM_JOB_CPUS_PER_NODE": "8(x3)"},
			want: nodes{nd("h0", 4), nd("h1", 4), nd("h2", 2)}, from: "SLURM_TASKS_PER_NODE"},
		{name: "cpus per node when no tasks", env: map[string]string{"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "h[0-1]", "SLURM_JOB_CPUS_PER_NODE": "8,6"},
			want: nodes{nd("h0", 8), nd("h1", 6)}, from: "SLURM_JOB_CPUS_PER_NODE"},
		{name: "cpus on node", env: map[string]string{"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "a,b", "SLURM_CPUS_ON_NODE": "3"},
			want: nodes{nd("a", 3), nd("b", 3)}, from: "SLURM_CPUS_ON_NODE"},
		{name: "default one slot", env: map[string]string{"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "a,b"},
			want: nodes{nd("a", 1), nd("b", 1)}, from: "default"},
		{name: "old node list name", env: map[string]string{"SLURM_JOB_ID": "7", "SLURM_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "1(x2)"},
			want: nodes{nd("n1", 1), nd("n2", 1)}, from: "SLURM_TASKS_PER_NODE"},
		{name: "more counts than hosts", env: map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n1", "SLURM_TASKS_PER_NODE": "4(x30)"},
			want: nodes{nd("n1", 4)}, from: "SLURM_TASKS_PER_NODE"},
		{name: "scontrol fallback", sc: scontrol, env: map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "weird{1..2}", "SLURM_TASKS_PER_NODE": "2(x2)"},
			want: nodes{nd("weird1", 2), nd("weird2", 2)}, from: "SLURM_TASKS_PER_NODE"},
		{name: "scontrol refuses too", sc: scontrol, env: map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "h[1-"},
			err: "SLURM_JOB_NODELIST: host list \"h[1-\": '[' is never closed"},
		{name: "scontrol answers junk", sc: scontrol, env: map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "h[0-"},
			err: "SLURM_JOB_NODELIST: host list \"h[0-\": '[' is never closed"},
		{name: "no job", env: map[string]string{"SLURM_JOB_NODELIST": "h1"}, err: "SLURM_JOB_ID is not set; run inside a Slurm allocation"},
		{name: "bad job id", env: map[string]string{"SLURM_JOB_ID": "12;x", "SLURM_JOB_NODELIST": "h1"}, err: "SLURM_JOB_ID=\"12;x\" is not a job id"},
		{name: "no node list", env: map[string]string{"SLURM_JOB_ID": "12"}, err: "job 12: neither SLURM_JOB_NODELIST nor SLURM_NODELIST is set"},
		{name: "bad node list", env: map[string]string{"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "h[2-1]"}, err: "SLURM_JOB_NODELIST: host list \"h[2-1]\": \"h[2-1]\": range \"2-1\" runs backwards"},
		{name: "duplicate host", env: map[string]string{"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "h[1-2],h1"}, err: "names host h1 twice"},
		{name: "bad tasks", env: map[string]string{"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "h1", "SLURM_TASKS_PER_NODE": "2(x"}, err: "SLURM_TASKS_PER_NODE: count list \"2(x\""},
		{name: "too few counts", env: map[string]string{"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "h[1-3]", "SLURM_TASKS_PER_NODE": "2(x2)"},
			err: "SLURM_TASKS_PER_NODE=\"2(x2)\" gives 2 counts for the 3 hosts of SLURM_JOB_NODELIST=\"h[1-3]\""},
		{name: "bad cpus on node", env: map[string]string{"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "h1", "SLURM_CPUS_ON_NODE": "many"}, err: "SLURM_CPUS_ON_NODE=\"many\" is not a number"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			get := func(k string) string { return c.env[k] }
			got, err := ReadSlurmAllocation(get, c.sc)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, wire.ErrInvalid) {
					t.Fatalf("got %v, %v; want error containing %q (invalid)", got, err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got.Nodes, c.want) || got.SlotsFrom != c.from || got.JobID != c.env["SLURM_JOB_ID"] {
				t.Fatalf("got %+v, %v; want %v from %s", got, err, c.want, c.from)
			}
		})
	}
}

func TestSlurmSelf(t *testing.T) {
	a := SlurmAllocation{JobID: "5", Nodes: nodes{nd("h0", 1), nd("h1", 2), nd("h2", 3)}}
	cases := []struct {
		nodeName, hostname string
		want               int
		nodes              nodes
	}{
		{nodeName: "h1", hostname: "whatever", want: 1, nodes: nodes{nd("h1", 2), nd("h0", 1), nd("h2", 3)}},
		{hostname: "h2", want: 2, nodes: nodes{nd("h2", 3), nd("h0", 1), nd("h1", 2)}},
		{hostname: "h2.cluster.example", want: 2, nodes: nodes{nd("h2", 3), nd("h0", 1), nd("h1", 2)}},
		{hostname: "h0", want: 0, nodes: a.Nodes},
		// Outside the allocation: this host with no slots, then every node.
		{nodeName: "h9", hostname: "h0", want: -1, nodes: nodes{nd("h0", 0), nd("h0", 1), nd("h1", 2), nd("h2", 3)}},
		{hostname: "login1", want: -1, nodes: nodes{nd("login1", 0), nd("h0", 1), nd("h1", 2), nd("h2", 3)}},
		{want: -1, nodes: nodes{nd("localhost", 0), nd("h0", 1), nd("h1", 2), nd("h2", 3)}},
	}
	for _, c := range cases {
		t.Run(c.nodeName+"/"+c.hostname, func(t *testing.T) {
			got := SlurmSelf(a, c.nodeName, c.hostname)
			if got != c.want {
				t.Fatalf("SlurmSelf %d, want %d", got, c.want)
			}
			if n := SlurmNodes(a, got, c.hostname); !reflect.DeepEqual(n, c.nodes) {
				t.Fatalf("SlurmNodes %v, want %v", n, c.nodes)
			}
		})
	}
}
