package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/dynrt/dynrt/examples/synthetic/report"
	"github.com/dynrt/dynrt/wire"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// Main runs rcplot with args (args[0] is the program name) and returns the
// exit status: 0, 1 on a failure, 2 on a usage error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rcplot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("o", ".", "directory for the figures")
	tables := fs.Bool("tables", false, "print the summary tables over all runs")
	phases := fs.Bool("phases", true, "draw the per-phase figures over all runs")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rcplot [-o DIR] [-tables] [-phases=false] RUN.jsonl...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	if err := run(ctx, *dir, fs.Args(), *tables, *phases, stdout); err != nil {
		fmt.Fprintln(stderr, "rcplot:", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, dir string, files []string, tables, phases bool, stdout io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var all []report.Change
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := readRun(f)
		if err != nil {
			return err
		}
		all = append(all, r.Changes...)
		if len(r.Iters) == 0 {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
		p, err := iterPlot(iterTitle(name, r), report.Iterations(r.Iters).WithFailures(r.Changes))
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := save(filepath.Join(dir, name+"-iterations"), [][]*plot.Plot{{p}}, 24*vg.Centimeter, 12*vg.Centimeter, stdout); err != nil {
			return err
		}
	}
	if phases {
		for _, typ := range []string{wire.RCAdd, wire.RCSub} {
			for _, blocking := range []bool{false, true} {
				s := report.PhasesOf(all, typ, blocking)
				if s.Empty() {
					continue
				}
				ps, err := phasePlots(s)
				if err != nil {
					return err
				}
				name := "phases-" + strings.ToLower(typ)
				if blocking {
					name += "-b"
				}
				grid := [][]*plot.Plot{{ps[0], ps[1]}, {ps[2], ps[3]}}
				if err := save(filepath.Join(dir, name), grid, 24*vg.Centimeter, 18*vg.Centimeter, stdout); err != nil {
					return err
				}
			}
		}
	}
	if tables {
		return report.Tables(stdout, all, "")
	}
	return nil
}

func readRun(path string) (report.Run, error) {
	f, err := os.Open(path)
	if err != nil {
		return report.Run{}, err
	}
	defer f.Close()
	r, err := report.Read(f)
	if err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

func iterTitle(name string, r report.Run) string {
	if r.End == nil {
		return name
	}
	e := r.End
	b := "non-blocking"
	if e.Blocking {
		b = "blocking"
	}
	if e.Trigger == "external" {
		failures := 0
		for _, c := range r.Changes {
			if c.Requester == wire.ByRuntime {
				failures++
			}
		}
		if failures > 0 {
			return fmt.Sprintf("%s: %d failure change(s) of lost processes, %d change(s) sent from outside, %s accept, problem size %d",
				name, failures, e.Changes-failures, b, e.Problem)
		}
		return fmt.Sprintf("%s: %d changes sent from outside, %s accept, problem size %d", name, e.Changes, b, e.Problem)
	}
	return fmt.Sprintf("%s: %s mode, %d → %d by %d, f=%d, %s accept, problem size %d", name, e.Mode, e.Start, e.Limit, e.Delta, e.Freq, b, e.Problem)
}

// save writes base.png and base.svg and prints their names.
func save(base string, plots [][]*plot.Plot, w, h vg.Length, stdout io.Writer) error {
	for _, f := range []format{formatPNG, formatSVG} {
		var buf bytes.Buffer
		if err := writeTiles(&buf, f, plots, w, h); err != nil {
			return fmt.Errorf("%s.%s: %w", base, f, err)
		}
		if buf.Len() == 0 {
			return errors.New(base + ": empty figure")
		}
		path := base + "." + string(f)
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "wrote", path)
	}
	return nil
}
