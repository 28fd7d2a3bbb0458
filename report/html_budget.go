package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"path/filepath"
	"sort"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// The page stays under HTMLOptions.MaxBytes for any input: thinning the
// timeline (budget.points) is not enough when a file has hundreds of devices
// or thousands of findings. After it, the lists (leaks, diagnostics, rules,
// sites, stacks) are cut to budget.items entries and the devices shown in
// full to budget.devices, each level halving them, with a note saying what
// was left out; a page still too large at the last level is replaced by a
// plain one that says so (fallbackHTML).

// maxListItems is the most entries of any one list a page shows.
const maxListItems = 1000

// errPageFull stops a render that passed the page's size: the try has
// failed, and stopping keeps its cost to the size (a hostile analysis could
// render to hundreds of megabytes).
var errPageFull = errors.New("page over its size")

// limitedWriter is a bytes.Buffer that fails with errPageFull past max bytes.
type limitedWriter struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.buf.Len()+len(p) > l.max {
		return 0, errPageFull
	}
	return l.buf.Write(p)
}

// marshalWithin encodes v as JSON, failing with errPageFull past max bytes.
func marshalWithin(v any, max int) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&limitedWriter{buf: &b, max: max})
	enc.SetEscapeHTML(true)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// fitPage renders r into buf within o.MaxBytes, trying budgets in turn,
// and reports whether one fitted: the timeline's points, bands and rows
// halved (the largest that fits, by bisection over the halvings), then
// lists cut to 100 entries, then fewer devices shown in full (as many as
// fit, estimated from the page's size with all of them and with one, then
// checked), then lists cut to 10 and 3 entries on one device. A try
// measures the page up to measureFactor times the size and stops there.
// Each try costs about the devices it shows, and the tries are a handful
// whatever the number of devices: a page of 256 devices costs about twice
// one of 128 (it took 17 tries drawing every device, where 128 took 6:
// 3.9 times the allocations; BenchmarkHTMLManyDevices).
func fitPage(buf *bytes.Buffer, r *result.Result, o HTMLOptions) (bool, error) {
	limit := measureFactor * o.MaxBytes
	// try renders with budget b and returns the page's size (limit+1 when
	// larger).
	try := func(b budget) (int, error) {
		buf.Reset()
		m := o
		m.MaxBytes = limit
		err := renderHTML(&limitedWriter{buf: buf, max: limit}, trimForPage(r, b), m, b)
		if errors.Is(err, errPageFull) {
			return limit + 1, nil
		}
		return buf.Len(), err
	}
	n := len(r.Devices)
	levels := []budget{{points: o.MaxPoints, bands: maxPhaseBands, rows: maxPhaseRows, allocs: maxAllocRows, items: maxListItems, devices: n}}
	for b := levels[0]; b.points >= 200; {
		b.points, b.bands, b.rows, b.allocs = b.points/2, b.bands/2, b.rows/2, b.allocs/2
		levels = append(levels, b)
	}
	size, err := try(levels[0])
	if err != nil || size <= o.MaxBytes {
		return err == nil, err
	}
	last := len(levels) - 1
	b := levels[last]
	if size, err = try(b); err != nil {
		return false, err
	}
	if size <= o.MaxBytes {
		lo, hi := 0, last // levels[lo] does not fit, levels[hi] does
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			if size, err = try(levels[mid]); err != nil {
				return false, err
			}
			if size <= o.MaxBytes {
				hi = mid
			} else {
				lo = mid
			}
		}
		if size > o.MaxBytes { // the last try was not the one that fits
			_, err = try(levels[hi])
		}
		return err == nil, err
	}
	b.items = 100
	if size, err = try(b); err != nil || size <= o.MaxBytes {
		return err == nil, err
	}
	if n > 1 {
		if k, err := devicesThatFit(b, n, size, o.MaxBytes, try); err != nil || k > 0 {
			return k > 0, err
		}
		b.devices = 1
	}
	for _, items := range []int{10, 3} {
		b.items = items
		if size, err = try(b); err != nil || size <= o.MaxBytes {
			return err == nil, err
		}
	}
	return false, nil
}

// measureFactor bounds what a try of fitPage renders: this many times the
// page's size.
const measureFactor = 4

// devicesThatFit renders the page with as many devices as fit (b.devices
// set; all of them are sizeAll bytes) and returns how many, 0 when not
// even one does. The number comes from the page's size with one device
// and with all: each device costs about the same (those kept first, with
// an OOM or the highest peaks, may cost more: a try that does not fit
// drops the devices its excess would take, and bisection settles what a
// few tries do not).
func devicesThatFit(b budget, n, sizeAll, limit int, try func(budget) (int, error)) (int, error) {
	b.devices = 1
	size1, err := try(b)
	if err != nil || size1 > limit {
		return 0, err
	}
	per := max((sizeAll-size1)/(n-1), 1)
	lo, hi := 1, n // fits(lo), not fits(hi)
	k := min(n-1, 1+(limit-size1)/per)
	for range 4 {
		if k <= lo || k >= hi {
			break
		}
		b.devices = k
		size, err := try(b)
		if err != nil {
			return 0, err
		}
		if size <= limit {
			return k, nil
		}
		hi = k
		k -= 1 + (size-limit+per-1)/per
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		b.devices = mid
		size, err := try(b)
		if err != nil {
			return 0, err
		}
		if size <= limit {
			lo = mid
		} else {
			hi = mid
		}
	}
	b.devices = lo
	if _, err := try(b); err != nil {
		return 0, err
	}
	return lo, nil
}

// trimForPage returns r, or a copy whose lists hold at most b.items entries
// and whose devices are at most b.devices (those with an OOM and the
// highest peaks kept), with a diagnostic saying what the page leaves out.
func trimForPage(r *result.Result, b budget) *result.Result {
	if b.items <= 0 || b.items >= maxListItems && b.devices >= len(r.Devices) && !longer(r, maxListItems) {
		return r
	}
	c := *r
	var cut []string
	note := func(n int, what string) {
		if n > 0 {
			cut = append(cut, fmt.Sprintf("%s %s", units.Count(n), what))
		}
	}
	if b.devices > 0 && len(c.Devices) > b.devices {
		keep := make([]int, len(c.Devices))
		for i := range keep {
			keep[i] = i
		}
		sort.SliceStable(keep, func(i, j int) bool {
			di, dj := &c.Devices[keep[i]], &c.Devices[keep[j]]
			if (di.OOM != nil) != (dj.OOM != nil) {
				return di.OOM != nil
			}
			return di.Peak.AllocatedBytes > dj.Peak.AllocatedBytes
		})
		keep = keep[:b.devices]
		sort.Ints(keep)
		devs := make([]result.DeviceResult, 0, len(keep))
		shown := map[int]bool{-1: true}
		for _, i := range keep {
			devs = append(devs, c.Devices[i])
			shown[c.Devices[i].Device] = true
		}
		note(len(c.Devices)-len(devs), "devices (the page shows those with an OOM and the highest peaks)")
		c.Devices = devs
		var leaks []result.Leak
		for _, l := range c.Leaks {
			if shown[l.Device] {
				leaks = append(leaks, l)
			}
		}
		var diags []result.Diagnostic
		for _, d := range c.Diagnostics {
			if shown[d.Device] {
				diags = append(diags, d)
			}
		}
		note(len(c.Leaks)-len(leaks), "leak findings of those devices")
		note(len(c.Diagnostics)-len(diags), "notes on those devices")
		c.Leaks, c.Diagnostics = leaks, diags
	} else {
		c.Devices = append([]result.DeviceResult(nil), c.Devices...)
	}
	left := 0
	for i := range c.Devices {
		d := &c.Devices[i]
		d.Rules, left = cutList(d.Rules, b.items, left)
		d.TopSites, left = cutList(d.TopSites, b.items, left)
		if d.OOM != nil {
			o := *d.OOM
			o.Stack, left = cutList(o.Stack, b.items, left)
			o.TopSites, left = cutList(o.TopSites, b.items, left)
			o.LiveByPhase, left = cutList(o.LiveByPhase, b.items, left)
			o.Layout, left = cutList(o.Layout, b.items, left)
			d.OOM = &o
		}
	}
	note(left, "entries of the devices' lists (rules, sites, frames)")
	n := len(c.Leaks)
	c.Leaks, _ = cutList(c.Leaks, b.items, 0)
	note(n-len(c.Leaks), "leak findings")
	n = len(c.Suggestions)
	c.Suggestions, _ = cutList(c.Suggestions, b.items, 0)
	note(n-len(c.Suggestions), "suggestions")
	n = len(c.Diagnostics)
	c.Diagnostics, _ = cutList(c.Diagnostics, b.items, 0)
	note(n-len(c.Diagnostics), "notes")
	if len(cut) > 0 {
		msg := "this page leaves out "
		for i, s := range cut {
			if i > 0 {
				msg += ", "
			}
			msg += s
		}
		c.Diagnostics = append(c.Diagnostics, result.Diagnostic{Kind: "report_trimmed", Device: -1,
			Message: msg + " to stay under 2 MB; torchmem analyze --format json lists everything"})
	}
	return &c
}

// longer reports whether any list of r holds more than n entries.
func longer(r *result.Result, n int) bool {
	if len(r.Leaks) > n || len(r.Suggestions) > n || len(r.Diagnostics) > n {
		return true
	}
	for _, d := range r.Devices {
		if len(d.Rules) > n || len(d.TopSites) > n {
			return true
		}
		if o := d.OOM; o != nil && (len(o.Stack) > n || len(o.TopSites) > n || len(o.LiveByPhase) > n || len(o.Layout) > n) {
			return true
		}
	}
	return false
}

// cutList keeps the first n entries of s and adds how many it dropped to left.
func cutList[T any](s []T, n, left int) ([]T, int) {
	if len(s) <= n {
		return s, left
	}
	return s[:n:n], left + len(s) - n
}

// fallbackHTML writes the plain page of a report that no budget could keep
// under the size: the headline and what to run instead, no charts.
func fallbackHTML(w io.Writer, r *result.Result, maxBytes int) error {
	var b bytes.Buffer
	headline := "The file holds no device memory to report on."
	if len(r.Devices) > 0 {
		headline = Headline(r)
	}
	t := template.Must(template.New("plain").Funcs(template.FuncMap{"clip": clip}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="default-src 'none'">
<title>torchmem report — {{clip .File}}</title></head><body>
<h1>GPU memory report {{clip .File}}</h1>
<p>{{clip .Headline}}</p>
<p>The full report of this file ({{.Devices}} devices) does not fit in {{.Max}} bytes. Run <code>torchmem analyze --format json</code> on it for every figure.</p>
</body></html>
`))
	err := t.Execute(&b, map[string]any{"File": filepath.Base(r.Input.Path), "Headline": headline, "Devices": len(r.Devices), "Max": maxBytes})
	if err != nil {
		return err
	}
	_, err = w.Write(b.Bytes())
	return err
}
