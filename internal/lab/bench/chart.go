package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// chart is a line chart written as SVG: one series per line, x on a
// logarithmic axis when asked, y from 0 to yMax.
type chart struct {
	title, xLabel, yLabel string
	logX                  bool
	yMax                  float64
	series                []series
}

type series struct {
	name   string
	points [][2]float64 // x, y
}

var chartColours = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// writeSVG draws the chart, 640 by 400.
func (c chart) writeSVG(w io.Writer) error {
	const width, height, left, right, top, bottom = 640.0, 400.0, 70.0, 170.0, 40.0, 50.0
	xMin, xMax := math.Inf(1), math.Inf(-1)
	for _, s := range c.series {
		for _, p := range s.points {
			xMin, xMax = math.Min(xMin, c.x(p[0])), math.Max(xMax, c.x(p[0]))
		}
	}
	if xMax <= xMin {
		xMax = xMin + 1
	}
	px := func(x float64) float64 { return left + (c.x(x)-xMin)/(xMax-xMin)*(width-left-right) }
	py := func(y float64) float64 { return height - bottom - y/c.yMax*(height-top-bottom) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="20" font-size="14">%s</text>`+"\n", left, c.title)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`, left, py(0), width-right, py(0))
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, py(0), left, py(c.yMax))
	for i := 0; i <= 4; i++ {
		y := c.yMax * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%g</text>`, left-5, py(y)+4, y)
	}
	for _, s := range c.series[:1] {
		for _, p := range s.points {
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`, px(p[0]), py(0)+15, shortNumber(p[0]))
		}
	}
	fmt.Fprintf(&b, "\n"+`<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`, (left+width-right)/2, height-10, c.xLabel)
	fmt.Fprintf(&b, `<text transform="translate(18 %.0f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (top+height-bottom)/2, c.yLabel)
	for i, s := range c.series {
		colour := chartColours[i%len(chartColours)]
		var path []string
		for _, p := range s.points {
			path = append(path, fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1])))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", colour, strings.Join(path, " "))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="%s">%s</text>`+"\n", width-right+10, top+20+18*float64(i), colour, s.name)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func (c chart) x(v float64) float64 {
	if c.logX {
		return math.Log10(math.Max(v, 1))
	}
	return v
}

// shortNumber writes 1500000 as 1.5M and 50000 as 50k.
func shortNumber(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// writeSlicingCharts draws, into dir, the share of each class's packets
// forwarded and offloaded against the offered load at the largest frame
// size, one chart per setup (as Fig. 4 of "XDP-Based SmartNIC Hardware Performance Acceleration for Next-Generation Networks"),
// and the jitter of the prioritised slices against the number of slices
// (as Figs. 3–8 of the paper on XDP-based 6G backbone network slicing).
// It returns the files' names.
func writeSlicingCharts(dir string, points []prioPoint, delays []delayRow) ([]string, error) {
	var names []string
	write := func(name string, c chart) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		names = append(names, name)
		return errors.Join(c.writeSVG(f), f.Close())
	}
	size := prioFrameSizes[len(prioFrameSizes)-1]
	for i, setup := range prioSetups {
		c := chart{title: fmt.Sprintf("%s, %d-octet frames", setup.name, size), xLabel: "offered packets/s",
			yLabel: "% of the class sent", logX: true, yMax: 100}
		for _, s := range []struct {
			name string
			pick func(p prioPoint) (part, whole uint64)
		}{
			{"prioritised, local", func(p prioPoint) (uint64, uint64) { return p.prio.local, p.prio.sent }},
			{"prioritised, offloaded", func(p prioPoint) (uint64, uint64) { return p.prio.offloaded, p.prio.sent }},
			{"other, local", func(p prioPoint) (uint64, uint64) { return p.other.local, p.other.sent }},
			{"other, offloaded", func(p prioPoint) (uint64, uint64) { return p.other.offloaded, p.other.sent }},
		} {
			line := series{name: s.name}
			for _, p := range points {
				if p.setup == setup.name && p.size == size {
					line.points = append(line.points, [2]float64{p.offered, percent(s.pick(p))})
				}
			}
			c.series = append(c.series, line)
		}
		if err := write(fmt.Sprintf("slicing-priority-%d.svg", i), c); err != nil {
			return names, err
		}
	}
	c := chart{title: "jitter of the prioritised slices", xLabel: "slices of 32 users", yLabel: "mean jitter (µs)", logX: true}
	for _, setup := range []string{"baseline", "xdp5g"} {
		line := series{name: setup}
		for _, n := range delaySlices {
			var sum float64
			var count int
			for _, r := range delays {
				if r.setup == setup && r.slices == n && r.prioritised {
					sum += micros(r.delay.Jitter)
					count++
				}
			}
			line.points = append(line.points, [2]float64{float64(n), sum / float64(max(count, 1))})
			c.yMax = math.Max(c.yMax, sum/float64(max(count, 1)))
		}
		c.series = append(c.series, line)
	}
	c.yMax = math.Max(math.Ceil(c.yMax/10)*10, micros(jitterTarget))
	return names, write("slicing-jitter.svg", c)
}
