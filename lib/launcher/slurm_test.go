package launcher

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

func slurmSpecs(names ...string) []NodeSpec {
	specs := make([]NodeSpec, len(names))
	for i, n := range names {
		specs[i] = NodeSpec{Name: n, Slots: 4, DVM: "abcd2345", Master: "10.0.0.1:40123", Token: "secret"}
	}
	return specs
}

// The srun argv is the contract with Slurm: one golden line per argument.
func TestSrunCommandGolden(t *testing.T) {
	cases := []struct {
		name         string
		srun, remote []string
		job          string
		specs        []NodeSpec
	}{
		{name: "allocation of the environment", remote: []string{"/opt/dynrt/bin/dynrun", "daemon"}, specs: slurmSpecs("h1", "h2")},
		{name: "another job (dvm grow)", srun: []string{"/usr/bin/srun", "--quiet"}, remote: []string{"dynrun", "daemon"}, job: "42", specs: slurmSpecs("gpu07")},
	}
	var b strings.Builder
	for _, c := range cases {
		s, err := New(Options{Kind: Slurm, Srun: c.srun, Remote: c.remote, SlurmJob: c.job})
		if err != nil {
			t.Fatal(err)
		}
		o := s.(*slurmStarter).opts
		argv, err := SrunCommand(o.Srun, o.Remote, o.SlurmJob, c.specs)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		writeArgv(t, &b, c.name, argv)
	}
	checkGolden(t, "srun.golden", b.String())
}

func TestSrunCommandRejects(t *testing.T) {
	cases := []struct {
		name  string
		job   string
		specs func() []NodeSpec
		err   string
	}{
		{"no nodes", "", func() []NodeSpec { return nil }, "no nodes to start"},
		{"unix master", "", func() []NodeSpec { s := slurmSpecs("h1"); s[0].Master = "/tmp/m.sock"; return s }, "not host:port"},
		{"loopback master", "", func() []NodeSpec { s := slurmSpecs("h1"); s[0].Master = "127.0.0.1:9"; return s }, "--bind"},
		{"mixed masters", "", func() []NodeSpec { s := slurmSpecs("h1", "h2"); s[1].Master = "10.0.0.2:1"; return s }, "must share master"},
		{"host differs", "", func() []NodeSpec { s := slurmSpecs("h1"); s[0].Host = "h9"; return s }, "host h9 differs from the node name"},
		{"bad name", "", func() []NodeSpec { return slurmSpecs("h1;x") }, "character ';'"},
		{"twice", "", func() []NodeSpec { return slurmSpecs("h1", "h1") }, "node h1 given twice"},
		{"no slots", "", func() []NodeSpec { s := slurmSpecs("h1"); s[0].Slots = 0; return s }, "0 slots"},
		{"bad job", "4;2", func() []NodeSpec { return slurmSpecs("h1") }, `"4;2" is not a Slurm job id`},
	}
	for _, c := range cases {
		_, err := SrunCommand([]string{"srun"}, []string{"dynrun", "daemon"}, c.job, c.specs())
		if !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.err)
		}
	}
}

// The slurm starter runs srun (here the test binary) once for all nodes,
// the token in its environment, and records its last output lines.
func TestSlurmStarterRuns(t *testing.T) {
	var c capture
	env := []string{roleEnv + "=echo", "SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=h[1-3]", "SLURM_CONF=/etc/x.conf"}
	s, err := New(Options{Kind: Slurm, Srun: []string{self(t)}, Command: []string{"/bin/dynrun", "daemon"}, Env: env, Output: c.out})
	if err != nil {
		t.Fatal(err)
	}
	gs, ok := s.(GroupStarter)
	if !ok || s.Kind() != Slurm {
		t.Fatalf("slurm starter %T is not a GroupStarter", s)
	}
	d, err := gs.StartGroup(context.Background(), slurmSpecs("h2", "h3"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Node != "h2,h3" {
		t.Fatalf("Node %q", d.Node)
	}
	if st := d.Wait(); st.Code() != 3 {
		t.Fatalf("exit %v", st)
	}
	got := c.get()
	for _, l := range []string{"h2,h3/1/arg:--nodelist=h2,h3", "h2,h3/1/arg:/bin/dynrun", "h2,h3/1/arg:--node-env", "h2,h3/2/token:secret"} {
		if !slices.Contains(got, l) {
			t.Errorf("missing %q in %q", l, got)
		}
	}
	if out := d.Output(); !slices.Contains(out, "stdin:") {
		t.Errorf("output %q", d.Output())
	}
}

// A step in another job drops the surrounding allocation's variables
// (srun would read them) but keeps SLURM_CONF.
func TestWithoutSlurmJob(t *testing.T) {
	env := []string{"PATH=/bin", "SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=h[1-3]", "SLURM_NNODES=3", "SLURM_CONF=/etc/x.conf"}
	if got := withoutSlurmJob(env, ""); !slices.Equal(got, env) {
		t.Errorf("same job: %q", got)
	}
	if got, want := withoutSlurmJob(env, "9"), []string{"PATH=/bin", "SLURM_CONF=/etc/x.conf"}; !slices.Equal(got, want) {
		t.Errorf("other job: %q, want %q", got, want)
	}
}

func TestParseSqueueJob(t *testing.T) {
	cases := []struct {
		line          string
		state, reason string
		want          nodes
		err           string
	}{
		{line: "PENDING|Resources|||1\n", state: "PENDING", reason: "Resources"},
		{line: "RUNNING|None|h3|4|1", state: "RUNNING", reason: "None", want: nodes{nd("h3", 4)}},
		{line: "RUNNING|None|n[01-02]|16|2", state: "RUNNING", reason: "None", want: nodes{nd("n01", 8), nd("n02", 8)}},
		{line: "RUNNING|None|h3", err: "want state|reason|nodes|cpus|count"},
		{line: "RUNNING|None|h[3|4|1", err: "never closed"},
		{line: "RUNNING|None|h[3-4]|4|1", err: `"4" CPUs on "1" nodes do not fit the 2 hosts`},
		{line: "RUNNING|None|h3|x|1", err: "do not fit"},
	}
	for _, c := range cases {
		state, reason, got, err := ParseSqueueJob(c.line)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: got %v; want error %q", c.line, err, c.err)
			}
			continue
		}
		if err != nil || state != c.state || reason != c.reason || !slices.Equal(got, c.want) {
			t.Errorf("%q: got %s %s %v %v; want %s %s %v", c.line, state, reason, got, err, c.state, c.reason, c.want)
		}
	}
}

// The grow job's argv: a held batch job of k nodes whose script waits
// for the daemons' steps (the script is run by a real Slurm in
// internal/slurmhosts' TestSlurm).
func TestSbatchCommand(t *testing.T) {
	got := SbatchCommand([]string{"sbatch"}, 2, "dynrt-x-grow")
	want := []string{"sbatch", "--parsable", "--nodes=2", "--job-name=dynrt-x-grow", "--output=/dev/null", "--wrap=" + HoldScript()}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q", got)
	}
	for _, w := range []string{`-j "$SLURM_JOB_ID"`, `\.batch$`, "-gt 150", "sleep 2", "-o %k)\" = " + StartedComment} {
		if !strings.Contains(HoldScript(), w) {
			t.Errorf("hold script lacks %q: %s", w, HoldScript())
		}
	}
}

// The hold script against a stand-in squeue: a job whose daemons' step
// came and went between two polls ends as soon as the master has marked it
// (StartedComment), instead of holding its nodes for holdFirstStep. Seen
// in CI: a master killed right after `dvm grow` left the grow job running.
func TestHoldScriptEnds(t *testing.T) {
	tests := []struct {
		name   string
		squeue string // body of the stand-in; $calls counts its runs
	}{
		{"marked, step never seen", `case "$*" in *%k*) echo ` + StartedComment + `;; *) echo 7.batch;; esac`},
		{"step seen, then gone", `case "$*" in *%k*) echo;; *) if [ "$n" -le 2 ]; then echo 7.0; fi; echo 7.batch;; esac`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			stub := "#!/bin/sh\nn=$(cat " + dir + "/n 2>/dev/null || echo 0); n=$((n+1)); echo $n >" + dir + "/n\n" + tt.squeue + "\n"
			if err := os.WriteFile(filepath.Join(dir, "squeue"), []byte(stub), 0o755); err != nil {
				t.Fatal(err)
			}
			// Without the mark the first case polls for 5 minutes.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "sh", "-c", HoldScript())
			cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "SLURM_JOB_ID=7")
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("the hold script still ran after 30 s (it holds the grow job's nodes):\n%s", out)
			}
			if err != nil {
				t.Fatalf("hold script: %v\n%s", err, out)
			}
		})
	}
}
