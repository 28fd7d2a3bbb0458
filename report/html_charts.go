package report

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// The charts are built with go-echarts as typed option builders only: each
// chart's options become JSON (json.Marshal escapes <, > and &, so input
// strings cannot close the page's <script>) and our own template and
// report.js draw them. go-echarts' page rendering is never used.

// categoryColors colours each category the same in every chart.
var categoryColors = [result.NumCategories]string{
	"#5470c6", "#91cc75", "#fac858", "#ee6666", "#73c0de", "#9a60b4", "#3ba272", "#fc8452", "#6e7079", "#e7a5d1", "#2f8f9d", "#a0a7b4",
}

// categoryLabels names the categories in the page: their names in every
// other output (JSON, text, Markdown, budget keys), so that one word means
// one thing everywhere.
var categoryLabels = func() (l [result.NumCategories]string) {
	for c := range l {
		l[c] = result.Category(c).String()
	}
	return l
}()

// phaseColors shades the phase bands of the timeline.
var phaseColors = map[result.Phase]string{
	result.PhaseForward:   "rgba(84,112,198,0.10)",
	result.PhaseBackward:  "rgba(238,102,102,0.10)",
	result.PhaseOptimizer: "rgba(145,204,117,0.16)",
	result.PhaseZeroGrad:  "rgba(154,96,180,0.14)",
	result.PhaseData:      "rgba(160,167,180,0.14)",
}

const (
	colorReserved = "#555a66"
	colorOOM      = "#d62728"
	colorPeak     = "#222"
	// maxPhaseBands bounds the phase bands drawn on the timelines of a page.
	maxPhaseBands = 2000
	// maxFreeBlocks bounds the free blocks drawn at an OOM.
	maxFreeBlocks = 40
)

// chartOption validates a go-echarts chart and returns its option as JSON.
func chartOption(c interface {
	Validate()
	JSON() map[string]interface{}
}) (json.RawMessage, error) {
	c.Validate()
	return json.Marshal(c.JSON())
}

// timelineChart is the data of one device's memory timeline: the echarts
// option (series without data) and the thinned points, sent as columns to
// keep the page small; report.js zips them into the series.
type timelineChart struct {
	Option json.RawMessage `json:"option"`
	X      []int64         `json:"x"`
	Y      [][]int64       `json:"y"` // Y[k] is series k's values at X
	// Stacked is how many of the first series are stacked: report.js adds
	// them up itself (ECharts would stack a value x axis on x).
	Stacked int `json:"stacked"`
	// Bands are the phase spans drawn ([start, end) on the x axis), for the
	// tooltip to name the phase under the pointer.
	Bands  []timelineBand `json:"bands,omitempty"`
	Time   bool           `json:"time"`
	Points int            `json:"points"` // points before thinning
}

// buildTimeline builds the timeline chart of a device, thinned to at most
// maxPoints points, with at most maxBands phase bands; nil when the device
// has no timeline (a file with only the state at the dump has a single point).
func buildTimeline(d *result.DeviceResult, id string, maxPoints, maxBands int) (*timelineChart, error) {
	t := d.Timeline
	if t == nil || len(t.Allocated) < 2 {
		return nil, nil
	}
	x, isTime := timelineX(t)
	var keep []int
	for _, k := range []int{t.PeakPoint, t.OOMPoint} {
		if k >= 0 && k < len(x) {
			keep = append(keep, k)
		}
	}
	idx := thinIndexes(x, t.Allocated, t.Reserved, keep, maxPoints)
	tc := &timelineChart{X: pick(x, idx), Time: isTime, Points: len(x)}
	line := charts.NewLine()
	line.SetGlobalOptions(
		charts.WithInitializationOpts(opts.Initialization{ChartID: id}),
		charts.WithAnimation(false),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis"}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Top: "0", Type: "scroll"}),
		charts.WithGridOpts(opts.Grid{Left: "8", Right: "24", Top: "36", Bottom: "64", ContainLabel: opts.Bool(true)}),
		charts.WithDataZoomOpts(
			opts.DataZoom{Type: "inside", XAxisIndex: 0, FilterMode: "none"},
			opts.DataZoom{Type: "slider", XAxisIndex: 0, FilterMode: "none"},
		),
		charts.WithXAxisOpts(opts.XAxis{Type: "value", Min: "dataMin", Max: "dataMax"}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value"}),
	)
	area := func(color string) []charts.SeriesOpts {
		return []charts.SeriesOpts{
			charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(false), Step: "end"}),
			charts.WithAreaStyleOpts(opts.AreaStyle{Color: color, Opacity: opts.Float(1)}),
			charts.WithLineStyleOpts(opts.LineStyle{Width: 1, Color: color}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: color}),
		}
	}
	var legend []string
	for c := result.Category(0); c < result.NumCategories; c++ {
		col := t.ByCategory[c]
		if len(col) != len(x) || allZero(col) {
			continue
		}
		line.AddSeries(categoryLabels[c], nil, area(categoryColors[c])...)
		tc.Y = append(tc.Y, pick(col, idx))
		legend = append(legend, categoryLabels[c])
	}
	if len(tc.Y) == 0 {
		line.AddSeries("allocated", nil, area(categoryColors[result.Unknown])...)
		tc.Y = append(tc.Y, pick(t.Allocated, idx))
		legend = append(legend, "allocated")
	}
	tc.Stacked = len(tc.Y)
	if len(t.Reserved) == len(x) {
		line.AddSeries("reserved", nil,
			charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(false), Step: "end"}),
			charts.WithLineStyleOpts(opts.LineStyle{Width: 1.5, Color: colorReserved, Type: "dashed"}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: colorReserved}),
		)
		tc.Y = append(tc.Y, pick(t.Reserved, idx))
		legend = append(legend, "reserved")
	}
	// The marks live on series of their own, without data, so that hiding a
	// category in the legend keeps them: "phases" is drawn under the areas,
	// "marks" over them.
	var bands *opts.MarkAreas
	bands, tc.Bands = timelineBands(d, t, x, isTime, maxBands)
	line.AddSeries("phases", []opts.LineData{},
		charts.WithSeriesOpts(func(s *charts.SingleSeries) { s.MarkAreas = bands }))
	line.AddSeries("marks", []opts.LineData{},
		charts.WithSeriesOpts(func(s *charts.SingleSeries) {
			s.MarkLines = timelineLines(d, t, x, isTime)
			s.MarkPoints = timelinePeak(d, t, x)
		}),
	)
	line.Legend.Data = legend
	opt, err := chartOption(line)
	if err != nil {
		return nil, err
	}
	tc.Option = opt
	return tc, nil
}

func allZero(v []int64) bool {
	for _, n := range v {
		if n != 0 {
			return false
		}
	}
	return true
}

// spanX maps a phase span to the x axis of the timeline.
func spanX(p result.PhaseSpan, t *result.Timeline, isTime bool) (int64, int64) {
	if isTime {
		return p.StartUS - t.TimeUS[0], p.EndUS - t.TimeUS[0]
	}
	return int64(p.StartEvent), int64(p.EndEvent)
}

// timelineBand is one phase span on the timeline's x axis.
type timelineBand struct {
	From  int64  `json:"from"`
	To    int64  `json:"to"`
	Label string `json:"label"` // "forward, step 2"
}

// timelineBands shades each phase span of the device, the first limit of
// them, and lists them for the tooltip.
func timelineBands(d *result.DeviceResult, t *result.Timeline, x []int64, isTime bool, limit int) (*opts.MarkAreas, []timelineBand) {
	var data []interface{}
	var bands []timelineBand
	lo, hi := x[0], x[len(x)-1]
	for _, p := range d.Phases {
		color, ok := phaseColors[p.Phase]
		if !ok || len(data) >= limit {
			continue
		}
		a, b := spanX(p, t, isTime)
		if b < lo || a > hi || b <= a {
			continue
		}
		label := string(p.Phase)
		if p.Step > 0 {
			label += fmt.Sprintf(", step %d", p.Step)
		}
		bands = append(bands, timelineBand{From: a, To: b, Label: label})
		// Every band carries its phase's name; the page draws it only where
		// it fits the band at the width and zoom of the moment
		// (labelFitter in report.js), so that two names never run into
		// each other ("datzero_grad").
		data = append(data, []opts.MarkAreaData{
			{Name: string(p.Phase), XAxis: a, MarkAreaStyle: opts.MarkAreaStyle{ItemStyle: &opts.ItemStyle{Color: color}}},
			{XAxis: b},
		})
	}
	if len(data) == 0 {
		return nil, nil
	}
	return &opts.MarkAreas{Data: data, MarkAreaStyle: opts.MarkAreaStyle{
		Label: &opts.Label{Show: opts.Bool(true), Position: "insideTop", FontSize: 10, Color: "#666"},
	}}, bands
}

// timelineLines marks step starts, the OOM and the device capacity.
func timelineLines(d *result.DeviceResult, t *result.Timeline, x []int64, isTime bool) *opts.MarkLines {
	var data []interface{}
	steps := map[int]int64{}
	for _, p := range d.Phases {
		if p.Step <= 0 {
			continue
		}
		a, _ := spanX(p, t, isTime)
		if s, ok := steps[p.Step]; !ok || a < s {
			steps[p.Step] = a
		}
	}
	if len(steps) <= 200 {
		keys := make([]int, 0, len(steps))
		for k := range steps {
			keys = append(keys, k)
		}
		sort.Ints(keys)
		for _, k := range keys {
			data = append(data, opts.MarkLineNameXAxisItem{Name: fmt.Sprintf("step %d", k), XAxis: steps[k]})
		}
	}
	if d.OOM != nil && t.OOMPoint >= 0 && t.OOMPoint < len(x) {
		data = append(data, markLineItem{
			Name: "OOM: " + units.FormatBytes(d.OOM.RequestedBytes) + " requested", XAxis: x[t.OOMPoint],
			LineStyle: &opts.LineStyle{Color: colorOOM, Width: 2, Type: "solid"},
			Label:     &opts.Label{Color: colorOOM, FontWeight: "bold", Formatter: "OOM"},
		})
	}
	if d.Capacity > 0 {
		data = append(data, markLineItem{
			Name: "device capacity " + units.FormatBytes(d.Capacity), YAxis: d.Capacity,
			LineStyle: &opts.LineStyle{Color: "#999", Width: 1, Type: "dotted"},
		})
	}
	if len(data) == 0 {
		return nil
	}
	return &opts.MarkLines{Data: data, MarkLineStyle: opts.MarkLineStyle{
		Symbol:    []string{"none", "none"},
		Label:     &opts.Label{Show: opts.Bool(true), Formatter: "{b}", FontSize: 10, Position: "insideEndTop"},
		LineStyle: &opts.LineStyle{Color: "#aaa", Type: "dashed", Width: 1},
	}}
}

// markLineItem is a mark line with its own style (go-echarts' items have
// none for x lines).
type markLineItem struct {
	Name      string      `json:"name,omitempty"`
	XAxis     interface{} `json:"xAxis,omitempty"`
	YAxis     interface{} `json:"yAxis,omitempty"`
	LineStyle *opts.LineStyle
	Label     *opts.Label `json:"label,omitempty"`
}

// MarshalJSON writes the item with lowercase keys.
func (m markLineItem) MarshalJSON() ([]byte, error) {
	type item struct {
		Name      string          `json:"name,omitempty"`
		XAxis     interface{}     `json:"xAxis,omitempty"`
		YAxis     interface{}     `json:"yAxis,omitempty"`
		LineStyle *opts.LineStyle `json:"lineStyle,omitempty"`
		Label     *opts.Label     `json:"label,omitempty"`
	}
	return json.Marshal(item(m))
}

// timelinePeak pins the peak of allocated memory.
func timelinePeak(d *result.DeviceResult, t *result.Timeline, x []int64) *opts.MarkPoints {
	p := t.PeakPoint
	if p < 0 || p >= len(x) {
		return nil
	}
	return &opts.MarkPoints{
		Data: []interface{}{opts.MarkPointNameCoordItem{
			Name:       "peak " + units.FormatBytes(t.Allocated[p]),
			Coordinate: []interface{}{x[p], t.Allocated[p]},
			Value:      "peak " + units.FormatBytes(t.Allocated[p]),
			Symbol:     "pin",
			ItemStyle:  &opts.ItemStyle{Color: colorPeak},
		}},
		MarkPointStyle: opts.MarkPointStyle{
			SymbolSize: 40,
			Label:      &opts.Label{Show: opts.Bool(true), FontSize: 9, Formatter: "peak"},
		},
	}
}
