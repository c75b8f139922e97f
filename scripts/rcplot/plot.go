package main

import (
	"fmt"
	"image/color"
	"io"
	"strconv"

	"github.com/dynrt/dynrt/examples/synthetic/report"
	"github.com/dynrt/dynrt/wire"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Colours of the stacked parts and of the pending spans.
var (
	colWork    = color.RGBA{R: 0x4c, G: 0x72, B: 0xb0, A: 0xff}
	colSync    = color.RGBA{R: 0xdd, G: 0x84, B: 0x52, A: 0xff}
	colRC      = color.RGBA{R: 0xc4, G: 0x4e, B: 0x52, A: 0xff}
	colPending = color.NRGBA{R: 0xf2, G: 0xd0, B: 0x4b, A: 0x80}
	colSizes   = []color.Color{
		color.RGBA{R: 0x4c, G: 0x72, B: 0xb0, A: 0xff},
		color.RGBA{R: 0x55, G: 0xa8, B: 0x68, A: 0xff},
		color.RGBA{R: 0xc4, G: 0x4e, B: 0x52, A: 0xff},
		color.RGBA{R: 0x81, G: 0x72, B: 0xb2, A: 0xff},
		color.RGBA{R: 0x93, G: 0x78, B: 0x60, A: 0xff},
	}
)

// iterPlot is thesis fig. 8.1 for one run: a stacked bar per iteration
// (work, sync, resource-change step) over a shaded span for every change in
// flight, with the process count written where it changes.
func iterPlot(title string, s report.IterSeries) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "iteration"
	p.Y.Label.Text = "time per iteration (ms)"
	p.Legend.Top = true
	n := len(s.Iter)
	if n == 0 {
		return nil, fmt.Errorf("no iterations to draw")
	}
	width := vg.Points(200 / float64(max(n, 20)))
	bars := func(vs []float64, c color.Color) (*plotter.BarChart, error) {
		b, err := plotter.NewBarChart(plotter.Values(vs), width)
		if err != nil {
			return nil, err
		}
		b.Color = c
		b.LineStyle.Width = 0
		return b, nil
	}
	work, err := bars(s.Work, colWork)
	if err != nil {
		return nil, err
	}
	sync, err := bars(s.Sync, colSync)
	if err != nil {
		return nil, err
	}
	rc, err := bars(s.RC, colRC)
	if err != nil {
		return nil, err
	}
	sync.StackOn(work)
	rc.StackOn(sync)
	high := 0.0
	for i := range s.Iter {
		high = max(high, s.Work[i]+s.Sync[i]+s.RC[i])
	}
	// Room above the bars for the process counts and the legend.
	top := high * 1.6
	pos := map[int]int{}
	for i, it := range s.Iter {
		pos[it] = i
	}
	for k, sp := range s.Spans {
		a, b := float64(pos[sp[0]])-0.5, float64(pos[sp[1]])+0.5
		poly, err := plotter.NewPolygon(plotter.XYs{{X: a, Y: 0}, {X: b, Y: 0}, {X: b, Y: top}, {X: a, Y: top}})
		if err != nil {
			return nil, err
		}
		poly.Color = colPending
		poly.LineStyle.Width = 0
		p.Add(poly)
		if k == 0 {
			p.Legend.Add("resource change in flight", poly)
		}
	}
	p.Add(work, sync, rc)
	p.Legend.Add("work (slowest process) + rebalance", work)
	p.Legend.Add("sync (barrier)", sync)
	p.Legend.Add("resource-change step", rc)

	// Pending iterations get a marker on top of their bar as well, so that
	// they show without colour.
	var pend plotter.XYs
	var lxy plotter.XYs
	var ltext []string
	for i := range s.Iter {
		h := s.Work[i] + s.Sync[i] + s.RC[i]
		if s.Pending[i] {
			pend = append(pend, plotter.XY{X: float64(i), Y: h + high*0.03})
		}
		if i == 0 || s.Procs[i] != s.Procs[i-1] {
			lxy = append(lxy, plotter.XY{X: float64(i), Y: high * 1.08})
			ltext = append(ltext, "n="+strconv.Itoa(s.Procs[i]))
		}
	}
	for _, f := range s.Failures {
		if i, ok := pos[f.Iter]; ok {
			lxy = append(lxy, plotter.XY{X: float64(i), Y: high * 1.22})
			ltext = append(ltext, fmt.Sprintf("x %d lost (failure change)", f.Lost))
		}
	}
	if len(pend) > 0 {
		sc, err := plotter.NewScatter(pend)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Shape = draw.TriangleGlyph{}
		sc.GlyphStyle.Radius = vg.Points(3)
		sc.GlyphStyle.Color = color.Black
		p.Add(sc)
		p.Legend.Add("PENDING after the step", sc)
	}
	labels, err := plotter.NewLabels(plotter.XYLabels{XYs: lxy, Labels: ltext})
	if err != nil {
		return nil, err
	}
	p.Add(labels)
	p.Y.Min, p.Y.Max = 0, top
	p.X.Min, p.X.Max = -1, float64(n)
	p.X.Tick.Marker = iterTicks{iters: s.Iter}
	return p, nil
}

// iterTicks labels bar positions with their iteration numbers, about ten of
// them.
type iterTicks struct{ iters []int }

func (t iterTicks) Ticks(lo, hi float64) []plot.Tick {
	step := max(1, len(t.iters)/10)
	var ts []plot.Tick
	for i := 0; i < len(t.iters); i++ {
		if float64(i) < lo || float64(i) > hi {
			continue
		}
		tk := plot.Tick{Value: float64(i)}
		if i%step == 0 {
			tk.Label = strconv.Itoa(t.iters[i])
		}
		ts = append(ts, tk)
	}
	return ts
}

// phasePlots are the four parts of thesis fig. 8.2 (ADD) or 8.3 (SUB): per
// phase, grouped bars over n_delta with one bar per n_start (n_dest).
func phasePlots(s report.PhaseSeries) ([]*plot.Plot, error) {
	sizeName := "n_start"
	if s.Type == wire.RCSub {
		sizeName = "n_dest"
	}
	var out []*plot.Plot
	w := vg.Points(14)
	for ph, name := range report.Phases {
		p := plot.New()
		acc := "non-blocking"
		if s.Blocking {
			acc = "blocking"
		}
		p.Title.Text = fmt.Sprintf("%s: %s (%s accept)", s.Type, name, acc)
		p.X.Label.Text = "n_delta"
		p.Y.Label.Text = "ms"
		p.Legend.Top = true
		for si, size := range s.Sizes {
			b, err := plotter.NewBarChart(plotter.Values(s.Values[ph][si]), w)
			if err != nil {
				return nil, err
			}
			b.Color = colSizes[si%len(colSizes)]
			b.LineStyle.Width = 0
			b.Offset = vg.Length(float64(si)-float64(len(s.Sizes)-1)/2) * w
			p.Add(b)
			p.Legend.Add(sizeName+"="+strconv.Itoa(size), b)
		}
		names := make([]string, len(s.Deltas))
		for i, d := range s.Deltas {
			names[i] = strconv.Itoa(d)
		}
		p.NominalX(names...)
		high := 0.0
		for _, vs := range s.Values[ph] {
			for _, v := range vs {
				high = max(high, v)
			}
		}
		// Room above the bars for the legend.
		p.Y.Min, p.Y.Max = 0, max(high, 0.001)*(1.2+0.1*float64(len(s.Sizes)))
		out = append(out, p)
	}
	return out, nil
}

// format is an output file format.
type format string

const (
	formatPNG format = "png"
	formatSVG format = "svg"
)

// writeTiles draws plots in a grid of rows × cols into w.
func writeTiles(w io.Writer, f format, plots [][]*plot.Plot, width, height vg.Length) error {
	var c vg.CanvasWriterTo
	switch f {
	case formatPNG:
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(96))}
	case formatSVG:
		c = vgsvg.New(width, height)
	default:
		return fmt.Errorf("unknown format %q", f)
	}
	dc := draw.New(c)
	rows, cols := len(plots), len(plots[0])
	if rows == 1 && cols == 1 {
		plots[0][0].Draw(dc)
	} else {
		t := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
			PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
		canvases := plot.Align(plots, t, dc)
		for i := range plots {
			for j := range plots[i] {
				if plots[i][j] != nil {
					plots[i][j].Draw(canvases[i][j])
				}
			}
		}
	}
	_, err := c.WriteTo(w)
	return err
}
