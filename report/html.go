package report

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// EChartsVersion is the version of Apache ECharts embedded in HTML reports
// (report/assets/echarts.min.js, from the npm package's dist; `make echarts`
// fetches it again).
const EChartsVersion = "5.6.0"

// echartsSHA256 is the SHA-256 of report/assets/echarts.min.js; a test checks it.
const echartsSHA256 = "bf4a223524e40b77c304bec67e1222cf551f14880cf42c69dc046558e11c07b1"

var (
	//go:embed assets/echarts.min.js
	echartsJS string
	//go:embed assets/common.js
	commonJS string
	//go:embed assets/report.js
	reportOwnJS string
	// reportJS is the report page's script: the helpers both pages share,
	// then its own code.
	reportJS = commonJS + reportOwnJS
	//go:embed assets/report.css
	reportCSS string
	//go:embed templates/report.html.tmpl
	reportTemplate string

	// pageTemplate is parsed on first use, not at start-up, where every
	// other command would pay for it (about 0.4 ms and 2,000 allocations).
	pageTemplate = sync.OnceValue(func() *template.Template {
		return template.Must(template.New("report").Funcs(template.FuncMap{
			"bytes": units.FormatBytes,
			"count": units.Count,
			"pct":   pct,
			"hex":   func(v uint64) string { return fmt.Sprintf("%#x", v) },
			"clip":  clip,
			// deviceSubject names a device starting a sentence ("Device 1",
			// "Host memory (cpu)"); deviceLabel in a table cell ("1", "cpu").
			"deviceSubject": deviceSubject,
			"deviceLabel": func(id int) string {
				if id < 0 {
					return "cpu"
				}
				return strconv.Itoa(id)
			},
			"join": strings.Join,
			"projectionWord": func(method string, fits *bool) string {
				switch {
				case method == "reserved_only":
					return "lowers reserved memory, not the peak"
				case fits == nil:
					return ""
				case *fits:
					return "fits"
				}
				return "does not fit"
			},
			"scaleRows":  scaleRows,
			"modelLines": modelLines,
		}).Parse(reportTemplate))
	})
)

// DefaultHTMLMaxBytes is the size an HTML report is kept under.
const DefaultHTMLMaxBytes = 2_000_000

// DefaultHTMLMaxPoints bounds the timeline points of a report, all devices together.
const DefaultHTMLMaxPoints = 10_000

// HTMLOptions tunes HTML.
type HTMLOptions struct {
	// Version is the torchmem version shown in the page.
	Version string
	// MaxBytes is the size the page is kept under by thinning the timeline
	// further (default DefaultHTMLMaxBytes).
	MaxBytes int
	// MaxPoints bounds the timeline points, all devices together (default
	// DefaultHTMLMaxPoints).
	MaxPoints int
	// RankPages, for a roll-up page, maps an input's path to its own page
	// beside the roll-up (a relative URL, such as torchmem record's
	// report_rank1_683.html), which the page links from the rank's row.
	RankPages map[string]string
}

// HTML writes a self-contained HTML report of r: a headline, a zoomable
// timeline by category with phases, steps and the OOM marked, categories at
// the peak, the OOM and the end, top allocation sites, fragmentation at the
// OOM, leaks, suggestions and diagnostics. ECharts is embedded; the page
// requests nothing from any network. Every string from the input is escaped.
// The output is deterministic: the same Result gives the same bytes.
func HTML(w io.Writer, r *result.Result, o HTMLOptions) error {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultHTMLMaxBytes
	}
	if o.MaxPoints <= 0 {
		o.MaxPoints = DefaultHTMLMaxPoints
	}
	var buf bytes.Buffer
	// Each try cuts what grows with the input: timeline points, phase bands,
	// phase rows and allocation rows, then list entries and devices shown in
	// full (fitPage); when none fits, a plain page.
	ok, err := fitPage(&buf, r, o)
	if err != nil {
		return err
	}
	if !ok {
		return fallbackHTML(w, r, o.MaxBytes)
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// budget bounds the parts of a page that grow with the input, all devices
// together: timeline points, phase bands on the timelines, phase table
// rows; per moment the single allocations listed with their stacks;
// entries of each list and devices shown (0: no bound; see fitPage).
type budget struct{ points, bands, rows, allocs, items, devices int }

// maxAllocRows is how many of the largest allocations a moment lists (and
// half as many of the latest), before the page's size budget halves it.
const maxAllocRows = 25

// renderHTML renders the page within budget b.
func renderHTML(w io.Writer, r *result.Result, o HTMLOptions, b budget) error {
	p, data, err := buildPage(r, o, b)
	if err != nil {
		return err
	}
	js, err := marshalWithin(data, o.MaxBytes)
	if err != nil {
		return err
	}
	p.Data = template.JS(js)
	p.EChartsJS = template.JS(echartsJS)
	p.ReportJS = template.JS(reportJS)
	p.CSS = template.CSS(reportCSS)
	p.CSP = contentSecurityPolicy()
	return pageTemplate().Execute(w, p)
}

// contentSecurityPolicy allows the page's own two scripts (by hash) and
// nothing from any network: even an injected <img src=…> or inline handler
// would be refused by the browser. It is computed on first use: hashing the
// embedded ECharts at start-up would cost every command 1.4 ms and 1 MB.
var contentSecurityPolicy = sync.OnceValue(func() string {
	return "default-src 'none'; script-src " + scriptHash(echartsJS) + " " + scriptHash(reportJS) +
		"; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
})

// scriptHash is a CSP source for an inline script's exact text.
func scriptHash(js string) string {
	sum := sha256.Sum256([]byte(js))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// htmlPage is what the template shows.
type htmlPage struct {
	Title       string
	FileName    string
	CSP         string
	Version     string
	ECharts     string
	Input       []fact
	Headline    string
	Devices     []*deviceView
	Selected    int
	Leaks       []result.Leak
	Suggestions []result.Suggestion
	Diagnostics []result.Diagnostic
	TotalSaving int64
	WhatIf      *result.WhatIf

	Data      template.JS
	EChartsJS template.JS
	ReportJS  template.JS
	CSS       template.CSS
}

// fact is one labelled value.
type fact struct{ Label, Value string }

// deviceView is one device's part of the page.
type deviceView struct {
	Index    int
	Name     string // "cuda:0"
	Option   string // what the device selector says
	Headline string
	Verdict  string
	Facts    []fact
	D        *result.DeviceResult
	Cats     []catRow
	Segments []segmentRow
	Blocks   int // free blocks at the OOM
	Timeline string
	Phases   []result.PhaseSpan // the first maxPhaseRows
	// PhasesTotal is how many phase spans the device has.
	PhasesTotal int
	// PeakAllocs and OOMAllocs are single allocations around the peak and
	// the OOM, with their stacks.
	PeakAllocs, OOMAllocs *allocView
	// ShowFilled says whether the device section repeats what filled
	// memory (not when the page's headline already says it).
	ShowFilled bool
}

// catRow is one line of the category table.
type catRow struct {
	Name             string
	Color            string
	Peak, OOM, AtEnd int64
	PeakShare        string
	HasOOM           bool
}

// segmentRow is one segment with its free blocks at the OOM.
type segmentRow struct {
	Address                    uint64
	Total, Allocated, Free     int64
	FreeBlocks                 int
	LargestFree                int64
	Expandable, FitsTheRequest bool
}

// chartData is the JSON the page's script reads: per device, the options of
// its charts.
type chartData struct {
	Devices []deviceCharts `json:"devices"`
}

type deviceCharts struct {
	Timeline      *timelineChart  `json:"timeline,omitempty"`
	Categories    json.RawMessage `json:"categories,omitempty"`
	Sites         json.RawMessage `json:"sites,omitempty"`
	Fragmentation json.RawMessage `json:"fragmentation,omitempty"`
}

func buildPage(r *result.Result, o HTMLOptions, b budget) (*htmlPage, *chartData, error) {
	p := &htmlPage{
		Title:       "torchmem report — " + FileName(r.Input.Path),
		FileName:    FileName(r.Input.Path),
		Version:     o.Version,
		ECharts:     EChartsVersion,
		Leaks:       r.Leaks,
		Suggestions: r.Suggestions,
		Diagnostics: r.Diagnostics,
		WhatIf:      r.WhatIf,
		Selected:    mainDevice(r),
	}
	if p.Version == "" {
		p.Version = "dev"
	}
	p.Input = inputFacts(r)
	for _, s := range r.Suggestions {
		p.TotalSaving = max(p.TotalSaving, s.EstimatedSavingsBytes)
	}
	data := &chartData{Devices: make([]deviceCharts, len(r.Devices))}
	withTimeline := 0
	for i := range r.Devices {
		if t := r.Devices[i].Timeline; t != nil && len(t.Allocated) > 1 {
			withTimeline++
		}
	}
	for i := range r.Devices {
		d := &r.Devices[i]
		v := newDeviceView(i, d, len(r.Devices) > 1, max(b.rows/len(r.Devices), 10), b.allocs)
		p.Devices = append(p.Devices, v)
		var err error
		dc := &data.Devices[i]
		prefix := fmt.Sprintf("tm-d%d-", i)
		if dc.Timeline, err = buildTimeline(d, prefix+"timeline", b.points/max(withTimeline, 1), b.bands/max(withTimeline, 1)); err != nil {
			return nil, nil, err
		}
		if dc.Timeline != nil {
			v.Timeline = timelineNote(dc.Timeline)
		}
		if dc.Categories, err = buildCategories(d, prefix+"categories"); err != nil {
			return nil, nil, err
		}
		if dc.Sites, err = buildSites(d.TopSites, prefix+"sites"); err != nil {
			return nil, nil, err
		}
		if d.OOM != nil {
			// The allocator state rebuilt at the OOM by replay (none
			// without dump-time segments).
			blocks := layoutFreeBlocks(d.OOM.Layout)
			v.Blocks = len(blocks)
			if dc.Fragmentation, err = buildFragmentation(d.OOM, blocks, prefix+"fragmentation"); err != nil {
				return nil, nil, err
			}
		}
	}
	if len(p.Devices) > 0 {
		p.Headline = p.Devices[p.Selected].Headline
		for _, v := range p.Devices {
			v.ShowFilled = v.Index != p.Selected
		}
	} else {
		p.Headline = "The file holds no device memory to report on."
	}
	return p, data, nil
}

// timelineNote says how the timeline was thinned.
func timelineNote(t *timelineChart) string {
	axis := "x: event number"
	if t.Time {
		axis = "x: time since the first event"
	}
	if len(t.X) < t.Points {
		return fmt.Sprintf("%s; %s of %s points drawn (each stretch keeps its lowest and highest point; the peak and the OOM are exact)",
			axis, units.Count(len(t.X)), units.Count(t.Points))
	}
	return fmt.Sprintf("%s; all %s points drawn", axis, units.Count(t.Points))
}

// mainDevice is the device shown first: the first with an OOM, else the one
// with the highest peak.
func mainDevice(r *result.Result) int {
	best := 0
	for i, d := range r.Devices {
		if d.OOM != nil {
			return i
		}
		if d.Peak.AllocatedBytes > r.Devices[best].Peak.AllocatedBytes {
			best = i
		}
	}
	return best
}

func inputFacts(r *result.Result) []fact {
	f := []fact{{"file", FileName(r.Input.Path)}, {"format", r.Input.Format}}
	if r.Input.Generation != "" {
		f = append(f, fact{"generation", r.Input.Generation})
	}
	f = append(f, fact{"size", units.FormatBytes(r.Input.Bytes)})
	if r.Input.Recording != "" {
		f = append(f, fact{"recording", r.Input.Recording})
	}
	f = append(f, fact{"devices", units.Count(len(r.Devices))})
	return f
}

// maxClip bounds, in runes, a string from the input shown in the page.
const maxClip = 400

// clip shortens a string from the input to maxClip runes, so that no name
// can blow up the page.
func clip(s string) string {
	if len(s) <= maxClip || utf8.RuneCountInString(s) <= maxClip {
		return s
	}
	r := []rune(s)
	return string(r[:maxClip]) + "…"
}

func pct(part, whole int64) string {
	if whole <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(part)/float64(whole))
}
