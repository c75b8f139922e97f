package main

import (
	"os"
	"strings"
	"testing"
)

// Inside an allocation whose environment is wrong, `dvm start` and a
// plain launch fail at once, naming the variable; --nodes keeps a launch
// on this host whatever the allocation says.
func TestSlurmBadAllocation(t *testing.T) {
	dynDir(t)
	host, _ := os.Hostname()
	cases := []struct {
		name string
		env  map[string]string
		args []string
		err  string
	}{
		{name: "bad node list", env: map[string]string{"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "h[1-"},
			args: []string{"dvm", "start"}, err: `slurm: SLURM_JOB_NODELIST: host list "h[1-": '[' is never closed`},
		{name: "bad node list, launch", env: map[string]string{"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "h[1-"},
			args: []string{"-n", "1", "true"}, err: "slurm: SLURM_JOB_NODELIST: host list"},
		{name: "no node list", env: map[string]string{"SLURM_JOB_ID": "12"},
			args: []string{"dvm", "start"}, err: "job 12: neither SLURM_JOB_NODELIST nor SLURM_NODELIST is set"},
		{name: "tasks do not cover the nodes", env: map[string]string{"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": host + ",zz1", "SLURM_TASKS_PER_NODE": "2"},
			args: []string{"dvm", "start"}, err: `SLURM_TASKS_PER_NODE="2" gives 1 counts for the 2 hosts`},
		{name: "explicit launcher", env: map[string]string{"SLURM_JOB_NODELIST": "zz1"},
			args: []string{"dvm", "start", "--launcher", "slurm"}, err: "SLURM_JOB_ID is not set; run inside a Slurm allocation"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range []string{"SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_TASKS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE", "SLURM_CPUS_ON_NODE", "SLURMD_NODENAME"} {
				t.Setenv(k, c.env[k])
			}
			code, out, errOut := run(c.args...)
			if code != 1 || out != "" || !strings.Contains(errOut, c.err) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errOut, c.err)
			}
		})
	}
	t.Run("virtual nodes inside an allocation", func(t *testing.T) {
		t.Setenv("SLURM_JOB_ID", "12")
		t.Setenv("SLURM_JOB_NODELIST", "h[1-")
		code, out, errOut := run("--nodes", "1", "-n", "1", "echo", "here")
		if code != 0 || out != "here\n" {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
}
