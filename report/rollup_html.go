package report

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"sync"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/rollup"
)

var (
	//go:embed assets/rollup.js
	rollupOwnJS string
	// rollupJS is the roll-up page's script: the helpers both pages share,
	// then its own code.
	rollupJS = commonJS + rollupOwnJS
	//go:embed assets/rollup.css
	rollupCSS string
	//go:embed templates/rollup.html.tmpl
	rollupTemplate string

	rollupPageTemplate = sync.OnceValue(func() *template.Template {
		return template.Must(template.New("rollup").Funcs(template.FuncMap{
			"bytes": units.FormatBytes,
			"clip":  clip,
			"pct":   pct,
		}).Parse(rollupTemplate))
	})

	// rollupCSP allows the page's two scripts by hash and nothing from any
	// network (see contentSecurityPolicy).
	rollupCSP = sync.OnceValue(func() string {
		return "default-src 'none'; script-src " + scriptHash(echartsJS) + " " + scriptHash(rollupJS) +
			"; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
	})
)

// What a roll-up page shows at most, before it is halved to fit the page
// size: rows of the table (each with its details), rows of the heat map and
// bars of the peak chart (neighbouring ranks are grouped beyond).
const (
	maxRollupTableRows = 512
	maxHeatRows        = 256
	maxPeakBars        = 512
)

// rollupBudget bounds the parts of a roll-up page that grow with the ranks.
type rollupBudget struct{ rows, heatRows, bars int }

// RollupHTML writes a self-contained HTML page of a roll-up: the headline
// and the first OOM, the ranks side by side (a ranks×time heat map of
// allocated memory and a chart of each rank's peak against the median), the
// table of ranks with each rank's details on demand, the outliers, the
// sites most ranks share and the notes. It stays under o.MaxBytes whatever
// the number of ranks: the table lists the ranks that matter first (the
// worst, OOMs, outliers, leaks) and as many others as fit, and the charts
// group neighbouring ranks beyond a few hundred. Every string from the
// inputs is escaped; nothing is loaded from any network.
func RollupHTML(w io.Writer, ru *rollup.Rollup, o HTMLOptions) error {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultHTMLMaxBytes
	}
	var buf bytes.Buffer
	for level := 0; ; level++ {
		b := rollupBudget{rows: maxRollupTableRows >> level, heatRows: maxHeatRows >> level, bars: maxPeakBars >> level}
		buf.Reset()
		if err := renderRollupHTML(&buf, ru, o, b); err != nil {
			return err
		}
		if buf.Len() <= o.MaxBytes || b.rows < 8 {
			break
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// rollupPage is what the roll-up template shows.
type rollupPage struct {
	Title, CSP, Version, ECharts string
	Headline                     string
	FirstOOM                     *rollup.FirstOOM
	FirstOOMName                 string
	Facts                        []fact
	Rows                         []rowView
	MoreRows, TotalRows          int
	Outliers                     []fact
	Sites                        []rollup.CommonSite
	Notes                        []string
	HeatNote                     string
	// Unreadable lists the inputs that could not be read, under its head.
	UnreadableHead string
	Unreadable     []string

	Data      template.JS
	EChartsJS template.JS
	RollupJS  template.JS
	CSS       template.CSS
}

// rowView is one row of the table of ranks, with its details.
type rowView struct {
	rollup.Row
	ID, Device, PeakIn string
	Worst              bool
	Outlier            string
	Cats               []catRow
	// Also says what the other files of the row's process are.
	Also []string
	// Page is the row's input's own page (a relative URL), if any.
	Page string
}

func renderRollupHTML(w io.Writer, ru *rollup.Rollup, o HTMLOptions, b rollupBudget) error {
	p := &rollupPage{
		Title:     fmt.Sprintf("torchmem roll-up: %s", plural(ru.Inputs, "input")),
		CSP:       rollupCSP(),
		Version:   o.Version,
		ECharts:   EChartsVersion,
		Headline:  rollupHeadline(ru),
		FirstOOM:  ru.FirstOOM,
		TotalRows: len(ru.Ranks),
		Sites:     ru.CommonSites,
		Notes:     ru.Notes,
		EChartsJS: template.JS(echartsJS),
		RollupJS:  template.JS(rollupJS),
		CSS:       template.CSS(reportCSS + rollupCSS),
	}
	if lines, more := unreadableLines(ru); len(lines) > 0 {
		p.UnreadableHead, p.Unreadable = unreadableHead(ru), lines
		if more > 0 {
			p.Unreadable = append(p.Unreadable, fmt.Sprintf("… %d more (every one: --format json)", more))
		}
	}
	if f := ru.FirstOOM; f != nil {
		p.FirstOOMName = rowName(f.Rank, f.Device, firstOOMKind(ru)) + " " + firstBy(f)
	}
	p.Facts = []fact{{"inputs", units.Count(ru.Inputs)}, {"devices", units.Count(len(ru.Ranks))}}
	if ru.Worst != nil {
		p.Facts = append(p.Facts, fact{"highest peak", fmt.Sprintf("%s (rank %d)", units.FormatBytes(ru.Worst.PeakBytes), ru.Worst.Rank)},
			fact{"median peak", units.FormatBytes(ru.MedianPeakBytes)}, fact{"imbalance", fmt.Sprintf("%.2f× %s", ru.Imbalance, othersPeak(ru))})
	}
	p.Facts = append(p.Facts, fact{"OOMs", units.Count(ru.OOMs)}, fact{"outliers", units.Count(len(ru.Outliers) + ru.OutliersMore)})
	outlier := map[[2]int]string{}
	for _, x := range ru.Outliers {
		name := rowName(x.Rank, x.Device, rowKind(ru, x.Input, x.Device))
		p.Outliers = append(p.Outliers, fact{name, outlierText(x)})
		if _, ok := outlier[[2]int{x.Input, x.Device}]; !ok {
			outlier[[2]int{x.Input, x.Device}] = outlierText(x)
		}
	}
	if ru.OutliersMore > 0 {
		p.Outliers = append(p.Outliers, fact{"…", moreOutliers(ru.OutliersMore)})
	}
	rows, more := rowsOfInterest(ru, b.rows)
	p.MoreRows = more
	anchor := map[[2]int]string{}
	for i, r := range rows {
		v := rowView{Row: r, ID: fmt.Sprintf("tm-r%d", i), Device: deviceName(r.Device, r.Kind), PeakIn: phaseStep(r.PeakPhase, r.PeakStep),
			Outlier: outlier[[2]int{r.Input, r.Device}]}
		v.Worst = ru.Worst != nil && ru.Worst.Input == r.Input && ru.Worst.Device == r.Device
		for c := result.Category(0); c < result.NumCategories; c++ {
			if r.PeakCategories[c] != 0 {
				v.Cats = append(v.Cats, catRow{Name: categoryLabels[c], Color: categoryColors[c], Peak: r.PeakCategories[c], PeakShare: pct(r.PeakCategories[c], r.PeakBytes)})
			}
		}
		for _, f := range r.SameProcess {
			v.Also = append(v.Also, units.OneLine(f.Path)+": "+sameProcessWhat(f))
		}
		v.Page = o.RankPages[r.Path]
		anchor[[2]int{r.Input, r.Device}] = v.ID
		p.Rows = append(p.Rows, v)
	}
	data, note, err := rollupCharts(ru, anchor, b)
	if err != nil {
		return err
	}
	p.HeatNote = note
	js, err := json.Marshal(data)
	if err != nil {
		return err
	}
	p.Data = template.JS(js)
	return rollupPageTemplate().Execute(w, p)
}

// rowLabel names a row in a chart: "3 cuda:3" (rank and device).
func rowLabel(r rollup.Row) string {
	return fmt.Sprintf("%d %s", r.Rank, units.OneLine(deviceName(r.Device, r.Kind)))
}
