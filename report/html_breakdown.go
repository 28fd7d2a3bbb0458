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

// The charts beside the timeline: categories, sites, free blocks.

// buildCategories builds the bar chart of categories at the peak, at the
// OOM and at the end, with allocator slack (reserved − allocated) as "cached".
func buildCategories(d *result.DeviceResult, id string) (json.RawMessage, error) {
	names := append(categoryLabels[:], "cached (reserved, free)")
	bar := charts.NewBar()
	bar.SetGlobalOptions(
		charts.WithInitializationOpts(opts.Initialization{ChartID: id}),
		charts.WithAnimation(false),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis"}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Top: "0"}),
		charts.WithGridOpts(opts.Grid{Left: "8", Right: "24", Top: "32", Bottom: "8", ContainLabel: opts.Bool(true)}),
		charts.WithXAxisOpts(opts.XAxis{Type: "value"}),
		charts.WithYAxisOpts(opts.YAxis{Type: "category", Inverse: opts.Bool(true)}),
	)
	bar.SetXAxis(names)
	add := func(name string, cats result.Categories, allocated, reserved int64, color string) {
		data := make([]opts.BarData, 0, len(names))
		for _, v := range cats {
			data = append(data, opts.BarData{Value: v})
		}
		data = append(data, opts.BarData{Value: max(reserved-allocated, 0)})
		bar.AddSeries(name, data, charts.WithItemStyleOpts(opts.ItemStyle{Color: color}))
	}
	add("at peak", d.Peak.Categories, d.Peak.AllocatedBytes, d.Peak.ReservedBytes, "#5470c6")
	if d.OOM != nil {
		add("at OOM", d.OOM.Categories, d.OOM.AllocatedBytes, d.OOM.ReservedBytes, colorOOM)
	}
	add("at end", d.AtEnd.Categories, d.AtEnd.AllocatedBytes, d.AtEnd.ReservedBytes, "#a0a7b4")
	bar.XYReversal()
	return chartOption(bar)
}

// buildSites builds the treemap of top allocation sites, grouped by category.
func buildSites(sites []result.Site, id string) (json.RawMessage, error) {
	if len(sites) == 0 {
		return nil, nil
	}
	var groups [result.NumCategories][]opts.TreeMapNode
	for _, s := range sites {
		c := s.Category
		if c < 0 || c >= result.NumCategories {
			c = result.Unknown
		}
		groups[c] = append(groups[c], opts.TreeMapNode{Name: clip(s.Site), Value: int(s.Bytes)})
	}
	var nodes []treeNode
	for c, g := range groups {
		if len(g) == 0 {
			continue
		}
		var sum int
		for _, n := range g {
			sum += n.Value
		}
		nodes = append(nodes, treeNode{
			TreeMapNode: opts.TreeMapNode{Name: categoryLabels[c], Value: sum, Children: g},
			ItemStyle:   &opts.ItemStyle{Color: categoryColors[c]},
		})
	}
	tm := charts.NewTreeMap()
	tm.SetGlobalOptions(
		charts.WithInitializationOpts(opts.Initialization{ChartID: id}),
		charts.WithAnimation(false),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true)}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(false)}),
	)
	tm.AddSeries("top sites", nil, charts.WithSeriesOpts(func(s *charts.SingleSeries) {
		s.Data = nodes
		s.LeafDepth = 0
		s.Roam = opts.Bool(false)
		s.Label = &opts.Label{Show: opts.Bool(true), FontSize: 11}
		s.UpperLabel = &opts.Label{Show: opts.Bool(true), Color: "#fff", FontWeight: "bold"}
		s.Levels = []map[string]interface{}{
			{"itemStyle": map[string]interface{}{"gapWidth": 3, "borderWidth": 0}},
			{"itemStyle": map[string]interface{}{"gapWidth": 1, "borderColorSaturation": 0.6}},
		}
	}))
	return chartOption(tm)
}

// treeNode is a treemap node with a colour (go-echarts' node has none).
type treeNode struct {
	opts.TreeMapNode
	ItemStyle *opts.ItemStyle `json:"itemStyle,omitempty"`
}

// freeBlock is one cached free block at the OOM.
type freeBlock struct {
	Segment uint64
	Address uint64
	Size    int64
}

// layoutFreeBlocks lists the free pieces of the allocator state rebuilt at
// the OOM, largest first.
func layoutFreeBlocks(layout []result.SegmentState) []freeBlock {
	var out []freeBlock
	for _, g := range layout {
		for _, b := range g.Blocks {
			if b.Free() && b.Size > 0 {
				out = append(out, freeBlock{Segment: g.Address, Address: b.Address, Size: b.Size})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Size != out[j].Size {
			return out[i].Size > out[j].Size
		}
		return out[i].Address < out[j].Address
	})
	return out
}

// buildFragmentation charts the failed request against the cached free
// blocks at the OOM: the request first (red), then the largest free block,
// then the other free blocks largest first, all on one axis that reaches
// the request, so the gap between what was asked and what was free shows.
// Without segments it compares the request with the cached free bytes and
// the largest free block.
func buildFragmentation(o *result.OOM, blocks []freeBlock, id string) (json.RawMessage, error) {
	bar := charts.NewBar()
	bar.SetGlobalOptions(
		charts.WithInitializationOpts(opts.Initialization{ChartID: id}),
		charts.WithAnimation(false),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis"}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(false)}),
		charts.WithGridOpts(opts.Grid{Left: "8", Right: "24", Top: "28", Bottom: "8", ContainLabel: opts.Bool(true)}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value"}),
	)
	names := []string{"request"}
	data := []opts.BarData{{Value: o.RequestedBytes, ItemStyle: &opts.ItemStyle{Color: colorOOM}}}
	if len(blocks) > 0 {
		for i, b := range blocks {
			if i == maxFreeBlocks {
				break
			}
			name := fmt.Sprintf("%#x", b.Address)
			if i == 0 {
				name = "largest free block " + name
			}
			names = append(names, name)
			data = append(data, opts.BarData{Value: b.Size})
		}
	} else {
		names = append(names, "largest free block", "cached free (all blocks)")
		data = append(data, opts.BarData{Value: o.Fragmentation.LargestFreeBlockBytes}, opts.BarData{Value: o.Fragmentation.CachedFreeBytes})
	}
	bar.SetXAxis(names)
	bar.AddSeries("bytes", data,
		charts.WithItemStyleOpts(opts.ItemStyle{Color: "#73c0de"}),
		charts.WithSeriesOpts(func(s *charts.SingleSeries) {
			s.MarkLines = &opts.MarkLines{
				Data: []interface{}{markLineItem{Name: "request " + units.FormatBytes(o.RequestedBytes), YAxis: o.RequestedBytes}},
				MarkLineStyle: opts.MarkLineStyle{
					Symbol:    []string{"none", "none"},
					Label:     &opts.Label{Show: opts.Bool(true), Formatter: "{b}", Position: "insideEndTop"},
					LineStyle: &opts.LineStyle{Color: colorOOM, Width: 2},
				},
			}
		}))
	return chartOption(bar)
}
