package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// series are the costs drawn and fitted, by name.
var series = []struct {
	name string
	get  func(row) float64
}{
	{"DVM start", func(r row) float64 { return r.start }},
	{"launch filling the DVM", func(r row) float64 { return r.launch }},
	{"ADD 1: announced", func(r row) float64 { return r.announce }},
	{"ADD 1: rc.push round", func(r row) float64 { return r.rcPush }},
	{"ADD 1", func(r row) float64 { return r.add1 }},
	{"SUB 1", func(r row) float64 { return r.sub1 }},
	{"ADD k", func(r row) float64 { return r.addK }},
	{"SUB k", func(r row) float64 { return r.subK }},
	{"ADD 1, one-process job", func(r row) float64 { return r.smallAdd }},
	{"SUB 1, one-process job", func(r row) float64 { return r.smallSub }},
	{"set op on the filling job", func(r row) float64 { return r.psetop }},
	{"floor: ping round", func(r row) float64 { return r.ping }},
	{"floor: ping round down the tree", func(r row) float64 { return r.treePing }},
	{"fence", func(r row) float64 { return r.fence }},
	{"fence with collect (wire-up)", func(r row) float64 { return r.modex }},
	{"master CPU per change", func(r row) float64 { return r.cpuPerChange }},
	{"master CPU of the launch", func(r row) float64 { return r.launchCPU }},
	{"master CPU per fence", func(r row) float64 { return r.fenceEachCPU }},
	{"all daemons' CPU per change", func(r row) float64 { return r.hostCPUPerChange }},
}

// exponent is the least-squares slope of log y on log x.
func exponent(xs, ys []float64) float64 {
	var n, sx, sy, sxx, sxy float64
	for i := range xs {
		if xs[i] <= 0 || ys[i] <= 0 {
			continue
		}
		x, y := math.Log(xs[i]), math.Log(ys[i])
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	if n < 2 || n*sxx-sx*sx == 0 {
		return math.NaN()
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

func writeResults(dir string, rows []row, stdout io.Writer) error {
	var b strings.Builder
	b.WriteString(header() + "\n")
	for _, r := range rows {
		b.WriteString(r.line() + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "scale.tsv"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	xs := make([]float64, len(rows))
	for i, r := range rows {
		xs[i] = float64(r.nodes)
	}
	fmt.Fprintln(stdout, "\ngrowth exponents (cost ~ nodes^e, least squares over the sizes run):")
	p := plot.New()
	p.Title.Text = "dynrt on a simulated DVM: cost against nodes"
	p.X.Label.Text = "nodes"
	p.Y.Label.Text = "ms"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	for i, s := range series {
		ys := make([]float64, len(rows))
		var pts plotter.XYs
		for j, r := range rows {
			ys[j] = s.get(r)
			if ys[j] > 0 {
				pts = append(pts, plotter.XY{X: xs[j], Y: ys[j]})
			}
		}
		e := exponent(xs, ys)
		fmt.Fprintf(stdout, "  %-28s %5.2f\n", s.name, e)
		if len(pts) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		c := palette[i%len(palette)]
		l.Color, sc.Color = c, c
		if i >= len(palette) { // the second round of colours is dashed
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		sc.Shape = draw.CircleGlyph{}
		p.Add(l, sc)
		p.Legend.Add(fmt.Sprintf("%s (e=%.2f)", s.name, e), l, sc)
	}
	for _, ext := range []string{"svg", "png"} {
		if err := p.Save(9*vg.Inch, 6*vg.Inch, filepath.Join(dir, "scale."+ext)); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "\nwrote %s, %s, %s\n", filepath.Join(dir, "scale.tsv"), filepath.Join(dir, "scale.svg"), filepath.Join(dir, "scale.png"))
	return nil
}

var palette = []color.Color{
	color.RGBA{0x4c, 0x72, 0xb0, 0xff}, color.RGBA{0xdd, 0x84, 0x52, 0xff}, color.RGBA{0x55, 0xa8, 0x68, 0xff},
	color.RGBA{0xc4, 0x4e, 0x52, 0xff}, color.RGBA{0x81, 0x72, 0xb2, 0xff}, color.RGBA{0x93, 0x78, 0x60, 0xff},
	color.RGBA{0xda, 0x8b, 0xc3, 0xff}, color.RGBA{0x8c, 0x8c, 0x8c, 0xff}, color.RGBA{0xcc, 0xb9, 0x74, 0xff},
	color.RGBA{0x64, 0xb5, 0xcd, 0xff},
}
