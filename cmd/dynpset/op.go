package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/lib/psetview"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// opJSON is `op --json`.
type opJSON struct {
	Job     string      `json:"job"`
	Op      string      `json:"op"`
	A       operandJSON `json:"a"`
	B       operandJSON `json:"b"`
	Size    int         `json:"size"`
	Members string      `json:"members"`
	Defined *definedRef `json:"defined,omitempty"` // with --define: what the master stored
}

type operandJSON struct {
	Name    string `json:"name"`
	Version uint32 `json:"version"`
	Size    uint32 `json:"size"`
}

type definedRef struct {
	Name    string    `json:"name"`
	Version uint32    `json:"version"`
	Size    uint32    `json:"size"`
	Active  bool      `json:"active"`
	Updated []refJSON `json:"updated,omitempty"` // sets updated recursively (Def. 4)
}

type refJSON struct {
	Name    string `json:"name"`
	Version uint32 `json:"version"`
}

func runOp(e *env, c *cli.Context) error {
	if strings.EqualFold(c.Args().First(), wire.OpSplit) {
		return runSplit(e, c)
	}
	for _, f := range []string{"parts", "ranks", "by-node", "prefix"} {
		if c.IsSet(f) {
			return cliutil.Usagef("--%s is an option of op split", f)
		}
	}
	a, err := args(c, 3, "union|difference|intersection A B")
	if err != nil {
		return err
	}
	op := strings.ToLower(a[0])
	if op != wire.OpUnion && op != wire.OpDifference && op != wire.OpIntersection {
		return cliutil.Usagef("unknown operation %q: want union, difference, intersection or split", a[0])
	}
	if len(c.StringSlice("name")) > 1 {
		return cliutil.Usagef("--name given %d times: %s makes one set", len(c.StringSlice("name")), op)
	}
	type operand struct {
		name string
		ver  int
	}
	var ops [2]operand
	for i, ref := range a[1:] {
		name, v, err := parseRef(ref)
		if err != nil {
			return err
		}
		ops[i] = operand{name, v}
	}
	define := c.Bool("define")
	name := strings.Join(c.StringSlice("name"), "")
	if name != "" && !define {
		return cliutil.Usagef("--name only names a set defined with --define")
	}
	if define && name == "" {
		return cliutil.Usagef("--define needs --name N for the new set")
	}

	cl, err := e.attach(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	j, err := e.jobForName(c, cl, ops[0].name, ops[1].name)
	if err != nil {
		return err
	}
	sets, err := e.psets(cl, j.Job)
	if err != nil {
		return err
	}
	var in [2]wire.PsetInfo
	for i, o := range ops {
		k := slices.IndexFunc(sets, func(s wire.PsetInfo) bool { return s.Name == o.name })
		if k < 0 {
			return failf("job %s (%s) has no process set %s; it has: %s", j.Job, j.App, o.name, setNames(sets))
		}
		in[i] = sets[k]
		if o.ver >= 0 && uint32(o.ver) != in[i].Version {
			if uint32(o.ver) > in[i].Version {
				return failf("%s has versions 0 to %d; there is no version %d", o.name, in[i].Version, o.ver)
			}
			if in[i], err = getVersion(e, cl, j.Job, o.name, uint32(o.ver)); err != nil {
				if errors.Is(err, wire.ErrNotFound) {
					return failf("version %d of %s is no longer kept", o.ver, o.name)
				}
				return fail(err)
			}
		}
	}
	res, err := psetview.Apply(op, in[0].Members, in[1].Members)
	if err != nil {
		return cliutil.Usagef("%v", err)
	}
	out := opJSON{
		Job: j.Job, Op: op, Size: res.Count(), Members: res.String(),
		A: operandJSON{in[0].Name, in[0].Version, in[0].Size}, B: operandJSON{in[1].Name, in[1].Version, in[1].Size},
	}
	if define {
		d, err := definePset(e, c, cl, j, sets, op, ops[0].name+"@"+fmt.Sprint(in[0].Version), ops[1].name+"@"+fmt.Sprint(in[1].Version), name)
		if err != nil {
			return err
		}
		out.Defined = d
	}
	if c.Bool("json") {
		return e.writeJSON(out)
	}
	fmt.Fprintf(e.out, "%s(%s@%d, %s@%d) = %s (%s)\n", op, in[0].Name, in[0].Version, in[1].Name, in[1].Version,
		psetview.Short(res, 0), plural(out.Size, "rank", "ranks"))
	if out.Size == 0 && !define {
		fmt.Fprintln(e.out, "the result is empty: the runtime would refuse to define it")
	}
	if d := out.Defined; d != nil {
		state := "inactive"
		if d.Active {
			state = "active"
		}
		fmt.Fprintf(e.out, "defined %s version %d (%s, %s)\n", d.Name, d.Version, plural(int(d.Size), "member", "members"), state)
		for _, u := range d.Updated {
			fmt.Fprintf(e.out, "updated %s to version %d (recursively affected)\n", u.Name, u.Version)
		}
	}
	return nil
}

// definePset stores the result through the master. Sets defined from the
// shell are inactive unless --active: an active set would join X_m and
// could be chosen to bind resource changes that nobody in the application
// answers. Touching the active sets of a running application (or adding an
// active one) needs --force, since the application owns those.
func definePset(e *env, c *cli.Context, cl *tool.Client, j wire.JobInfo, sets []wire.PsetInfo, op, p1, p2, name string) (*definedRef, error) {
	target, err := fullName("--name", name, j.App)
	if err != nil {
		return nil, err
	}
	running := j.State == wire.JobStateRunning || j.State == wire.JobStateLaunching
	active := c.Bool("active")
	if running && !c.Bool("force") {
		if k := slices.IndexFunc(sets, func(s wire.PsetInfo) bool { return s.Name == target }); k >= 0 && sets[k].Active {
			return nil, failf("%s is an active set of running application %s: the application manages it (--force overrides)", target, j.App)
		}
		if active {
			return nil, failf("an active set in running application %s takes part in its resource changes (Def. 2); --force defines it anyway", j.App)
		}
	}
	ctx, cancel := e.call()
	defer cancel()
	rep, err := cl.PsetOp(ctx, wire.PsetOpReq{Job: j.Job, Op: op, P1: p1, P2: p2, Target: target, Active: &active})
	if err != nil {
		if errors.Is(err, wire.ErrUnknownKind) {
			return nil, failf("DVM %s does not accept set operations from tools (%v)", cl.Info().ID, err)
		}
		return nil, fail(err)
	}
	d := &definedRef{Name: rep.Name, Version: rep.Version, Size: rep.Size, Active: active}
	for _, u := range rep.Updated {
		d.Updated = append(d.Updated, refJSON{u.Name, u.Version})
	}
	return d, nil
}
