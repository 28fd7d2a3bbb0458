package report

import (
	"encoding/json"
	"fmt"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/rollup"
)

// rollupData is the JSON rollup.js reads: the option of each chart (built
// with go-echarts, series without data) and the data, in columns.
type rollupData struct {
	Heat  *heatChart  `json:"heat"`
	Peaks *peakChart  `json:"peaks"`
	Cats  []catSeries `json:"cats"`
}

// heatChart is the ranks×time heat map: Cells[i][j] is row i's highest
// allocated memory in column j, in units of Unit bytes (−1: nothing there).
type heatChart struct {
	Option json.RawMessage `json:"option"`
	Rows   []string        `json:"rows"`
	// Anchors[i] is the id of row i's line in the table ("" when not listed).
	Anchors []string  `json:"anchors"`
	Unit    int64     `json:"unit"`
	Cells   [][]int64 `json:"cells"`
	// Time: the columns divide SpanUS microseconds of one clock; else
	// each row's own run, 0–100%.
	Time   bool  `json:"time"`
	SpanUS int64 `json:"span_us"`
}

// peakChart is each row's peak against the median.
type peakChart struct {
	Option  json.RawMessage `json:"option"`
	Labels  []string        `json:"labels"`
	Values  []int64         `json:"values"`
	Flags   []string        `json:"flags"` // "worst", "oom", "outlier" or ""
	Anchors []string        `json:"anchors"`
}

// catSeries is one category's bytes at each bar's peak (the peak chart
// stacks them).
type catSeries struct {
	Name   string  `json:"name"`
	Color  string  `json:"color"`
	Values []int64 `json:"values"`
}

// heatColors is a sequential scale from little memory to much (ColorBrewer's
// YlOrRd: no two hues mix into grey on the way).
var heatColors = []string{"#ffffcc", "#fed976", "#fd8d3c", "#e31a1c", "#800026"}

// groups splits n rows into at most limit runs of neighbours.
func groups(n, limit int) [][2]int {
	per := max((n+limit-1)/max(limit, 1), 1)
	var out [][2]int
	for i := 0; i < n; i += per {
		out = append(out, [2]int{i, min(i+per, n)})
	}
	return out
}

// groupLabel names a run of rows: the row itself, or "ranks 3–9".
func groupLabel(rows []rollup.Row) string {
	if len(rows) == 1 {
		return rowLabel(rows[0])
	}
	return fmt.Sprintf("ranks %d–%d", rows[0].Rank, rows[len(rows)-1].Rank)
}

// rollupCharts builds the heat map and the peak chart within b; anchor maps
// (input, device) to the table line of a listed row.
func rollupCharts(ru *rollup.Rollup, anchor map[[2]int]string, b rollupBudget) (*rollupData, string, error) {
	data := &rollupData{}
	if len(ru.Ranks) == 0 {
		return data, "", nil
	}
	// The highest row of a group stands for it in the table.
	top := func(rows []rollup.Row) string {
		best := 0
		for i, r := range rows {
			if r.PeakBytes > rows[best].PeakBytes {
				best = i
			}
		}
		return anchor[[2]int{rows[best].Input, rows[best].Device}]
	}

	h := ru.Heat
	hc := &heatChart{Time: h != nil && h.ByTime}
	if hc.Time {
		hc.SpanUS = h.EndUS - h.StartUS
	}
	var most int64 = 1
	heatGroups := groups(len(ru.Ranks), b.heatRows)
	for _, g := range heatGroups {
		rows := ru.Ranks[g[0]:g[1]]
		hc.Rows = append(hc.Rows, groupLabel(rows))
		hc.Anchors = append(hc.Anchors, top(rows))
		cells := make([]int64, rollup.HeatColumns)
		for j := range cells {
			cells[j] = -1
			for i := g[0]; h != nil && i < g[1] && i < len(h.Cells); i++ {
				cells[j] = max(cells[j], h.Cells[i][j])
			}
			most = max(most, cells[j])
		}
		hc.Cells = append(hc.Cells, cells)
	}
	hc.Unit = max((most+9999)/10000, 1)
	for _, cells := range hc.Cells {
		for j, v := range cells {
			if v > 0 {
				cells[j] = (v + hc.Unit/2) / hc.Unit
			}
		}
	}
	hm := charts.NewHeatMap()
	hm.SetGlobalOptions(
		charts.WithInitializationOpts(opts.Initialization{ChartID: "tm-heat"}),
		charts.WithAnimation(false),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true)}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(false)}),
		charts.WithGridOpts(opts.Grid{Left: "8", Right: "24", Top: "8", Bottom: "64", ContainLabel: opts.Bool(true)}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category"}),
		charts.WithYAxisOpts(opts.YAxis{Type: "category", Inverse: opts.Bool(true)}),
		charts.WithVisualMapOpts(opts.VisualMap{Calculable: opts.Bool(true), Min: 0, Max: float32((most + hc.Unit/2) / hc.Unit),
			Left: "center", Bottom: "0", InRange: &opts.VisualMapInRange{Color: heatColors}}),
	)
	hm.AddSeries("allocated", nil)
	opt, err := chartOption(hm)
	if err != nil {
		return nil, "", err
	}
	hc.Option = opt
	data.Heat = hc

	pc := &peakChart{}
	flagged := map[[2]int]string{}
	for _, o := range ru.Outliers {
		flagged[[2]int{o.Input, o.Device}] = "outlier"
	}
	cats := make([][]int64, result.NumCategories)
	for _, g := range groups(len(ru.Ranks), b.bars) {
		rows := ru.Ranks[g[0]:g[1]]
		pc.Labels = append(pc.Labels, groupLabel(rows))
		pc.Anchors = append(pc.Anchors, top(rows))
		var peak int64
		best, flag := 0, ""
		for i, r := range rows {
			if r.PeakBytes > peak {
				peak, best = r.PeakBytes, i
			}
			switch {
			case ru.Worst != nil && r.Input == ru.Worst.Input && r.Device == ru.Worst.Device:
				flag = "worst"
			case r.OOM != nil && flag != "worst":
				flag = "oom"
			case flag == "" && flagged[[2]int{r.Input, r.Device}] != "":
				flag = "outlier"
			}
		}
		pc.Values = append(pc.Values, peak)
		pc.Flags = append(pc.Flags, flag)
		for c := range cats {
			cats[c] = append(cats[c], rows[best].PeakCategories[c])
		}
	}
	bar := charts.NewBar()
	bar.SetGlobalOptions(
		charts.WithInitializationOpts(opts.Initialization{ChartID: "tm-peaks"}),
		charts.WithAnimation(false),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis"}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Top: "0", Type: "scroll"}),
		charts.WithGridOpts(opts.Grid{Left: "8", Right: "24", Top: "36", Bottom: "8", ContainLabel: opts.Bool(true)}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category"}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value"}),
	)
	var legend []string
	for c := result.Category(0); c < result.NumCategories; c++ {
		if allZero(cats[c]) {
			continue
		}
		data.Cats = append(data.Cats, catSeries{Name: categoryLabels[c], Color: categoryColors[c], Values: cats[c]})
		bar.AddSeries(categoryLabels[c], nil, charts.WithBarChartOpts(opts.BarChart{Stack: "peak"}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: categoryColors[c]}))
		legend = append(legend, categoryLabels[c])
	}
	bar.AddSeries("median", nil, charts.WithMarkLineNameYAxisItemOpts(opts.MarkLineNameYAxisItem{Name: "median peak", YAxis: ru.MedianPeakBytes}),
		charts.WithMarkLineStyleOpts(opts.MarkLineStyle{Symbol: []string{"none", "none"}, Label: &opts.Label{Show: opts.Bool(true), Formatter: "median"}}),
		charts.WithLineStyleOpts(opts.LineStyle{Color: colorPeak, Type: "dashed"}))
	bar.Legend.Data = legend
	opt, err = chartOption(bar)
	if err != nil {
		return nil, "", err
	}
	pc.Option = opt
	data.Peaks = pc

	note := "Allocated memory of every rank over the run, the highest in each column; "
	if hc.Time {
		note += "all ranks on one clock."
	} else {
		note += "each rank from its first to its last event (the files share no clock)."
	}
	if per := heatGroups[0][1] - heatGroups[0][0]; per > 1 {
		note += fmt.Sprintf(" Neighbouring ranks are grouped by %d (the highest of each group).", per)
	}
	return data, note, nil
}
