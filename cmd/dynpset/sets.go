package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// jobRowJSON is one line of `sets --json`: a job of a live DVM, as in
// the `mpc_sets sets` listing (seed 002 §6) plus dynrt's names.
type jobRowJSON struct {
	DVM       string   `json:"dvm"`
	DVMName   string   `json:"dvm_name,omitempty"`
	Job       string   `json:"job"`
	App       string   `json:"app"`
	UIDPrefix uint64   `json:"uid_prefix"` // the job's number: process UIDs are uid_prefix<<32 | rank
	UIDHex    string   `json:"uid_hex"`    // the same as 0x%08x
	Size      uint32   `json:"size"`
	State     string   `json:"state"`
	Argv      []string `json:"argv"`
}

func runSets(e *env, c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	dir, err := dvmdir.Path(e.getenv)
	if err != nil {
		return fail(err)
	}
	live, _, err := dvmdir.List(dir)
	if err != nil {
		return fail(err)
	}
	rows := []jobRowJSON{}
	var failed []string
	for _, info := range live {
		js, err := dvmJobs(e.ctx, info)
		if err != nil {
			failed = append(failed, info.ID)
			fmt.Fprintf(e.errw, "dynpset: DVM %s: %v\n", info.ID, err)
			continue
		}
		for _, j := range js {
			argv := j.Argv
			if argv == nil {
				argv = []string{}
			}
			rows = append(rows, jobRowJSON{
				DVM: info.ID, DVMName: info.Name, Job: j.Job, App: j.App, UIDPrefix: uint64(j.ID),
				UIDHex: fmt.Sprintf("0x%08x", j.ID), Size: j.Size, State: j.State, Argv: argv,
			})
		}
	}
	if c.Bool("json") {
		if err := e.writeJSON(rows); err != nil {
			return err
		}
	} else if len(live) == 0 {
		fmt.Fprintf(e.out, "no running DVM in %s\n", dir)
	} else {
		tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DVM\tJOB\tAPP\tUID PREFIX\tSIZE\tSTATE\tCMD")
		for _, r := range rows {
			dvm := r.DVM
			if r.DVMName != "" {
				dvm += " (" + r.DVMName + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", dvm, r.Job, r.App, r.UIDHex, r.Size, r.State, shellJoin(r.Argv))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(rows) == 0 {
			fmt.Fprintf(e.out, "no live job in %s\n", plural(len(live), "DVM", "DVMs"))
		}
	}
	if len(failed) > 0 {
		return failf("could not list the jobs of %s", strings.Join(failed, ", "))
	}
	return nil
}

func dvmJobs(ctx context.Context, info dvmdir.Info) ([]wire.JobInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cl, err := tool.Dial(ctx, info, tool.Options{Name: "dynpset"})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return cl.Jobs(ctx, false)
}

// shellJoin quotes arguments that a shell would split or expand.
func shellJoin(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
			parts[i] = a
			continue
		}
		parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(parts, " ")
}
