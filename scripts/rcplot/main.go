// Command rcplot draws the JSON lines of examples/synthetic: for every run
// the per-iteration time (thesis fig. 8.1: work, sync and resource-change
// step stacked, changes in flight shaded, PENDING iterations marked), and
// over all runs the per-phase overheads against n_delta (figs. 8.2/8.3).
// Every figure is written as PNG and SVG.
//
//	rcplot [-o DIR] [-tables] [-phases=false] RUN.jsonl...
//
// writes DIR/<run>-iterations.{png,svg} per run, DIR/phases-add.{png,svg}
// and DIR/phases-sub.{png,svg} (non-blocking accept; with a -b suffix:
// blocking) when the runs hold such changes, prints the
// names of the files it wrote, and with -tables the summary tables (thesis
// tables 8.2/8.3, figs. 8.2/8.3 as text) over all runs.
package main

import "github.com/dynrt/dynrt/lib/cliutil"

func main() { cliutil.RunMain(Main) }
