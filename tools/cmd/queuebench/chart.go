package main

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var palette = []color.Color{
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, // brown
}

// drawChart writes a PNG with two panels: dequeue throughput by consumers
// for each mode, and enqueue throughput by producers.
func drawChart(path string, deq []dequeueRow, enq []enqueueRow, o options) error {
	left := plot.New()
	left.Title.Text = fmt.Sprintf("Dequeue, queue kept non-empty (%s)", latencyName(o.latency))
	left.X.Label.Text = "consumers"
	left.Y.Label.Text = "items dequeued / s"
	var modes []string
	for _, r := range deq {
		if len(modes) == 0 || modes[len(modes)-1] != r.Mode {
			modes = append(modes, r.Mode)
		}
	}
	for i, m := range modes {
		var pts plotter.XYs
		for _, r := range deq {
			if r.Mode == m && r.ItemsPerSec > 0 {
				pts = append(pts, plotter.XY{X: float64(r.Consumers), Y: r.ItemsPerSec})
			}
		}
		if err := addLine(left, m, pts, palette[i%len(palette)]); err != nil {
			return err
		}
	}
	logAxes(left)

	right := plot.New()
	right.Title.Text = "Enqueue, one item per call"
	right.X.Label.Text = "producers"
	right.Y.Label.Text = "items enqueued / s"
	for i, kind := range []string{"recipe", "staged"} {
		var pts plotter.XYs
		for _, r := range enq {
			if r.Kind == kind && r.ItemsPerSec > 0 {
				pts = append(pts, plotter.XY{X: float64(r.Producers), Y: r.ItemsPerSec})
			}
		}
		if len(pts) == 0 {
			continue
		}
		if err := addLine(right, kind, pts, palette[(i+1)%len(palette)]); err != nil {
			return err
		}
	}
	logAxes(right)

	const width, height = 30 * vg.Centimeter, 12 * vg.Centimeter
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(120))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3,
		PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	canvases := plot.Align([][]*plot.Plot{{left, right}}, tiles, dc)
	left.Draw(canvases[0][0])
	right.Draw(canvases[0][1])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func addLine(p *plot.Plot, name string, pts plotter.XYs, c color.Color) error {
	if len(pts) == 0 {
		return nil
	}
	line, points, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	line.Color = c
	line.Width = vg.Points(1.5)
	points.Color = c
	points.Shape = draw.CircleGlyph{}
	p.Add(line, points)
	p.Legend.Add(name, line, points)
	p.Legend.Top = false
	p.Legend.Left = true
	return nil
}

func logAxes(p *plot.Plot) {
	// A single consumer or producer count (or one throughput) leaves an
	// axis without a range, which a log scale cannot draw: widen it.
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		if ax.Min >= ax.Max || ax.Min <= 0 {
			hi := max(ax.Max, 1)
			ax.Min, ax.Max = hi/2, hi*2
		}
	}
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = powersOfTwo{}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
}

// powersOfTwo labels 1, 2, 4, ... on the consumer/producer axis.
type powersOfTwo struct{}

func (powersOfTwo) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for x := 1.0; x <= hi*1.001; x *= 2 {
		if x >= lo*0.999 {
			ts = append(ts, plot.Tick{Value: x, Label: fmt.Sprintf("%.0f", x)})
		}
	}
	return ts
}
