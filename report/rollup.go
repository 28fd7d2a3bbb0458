package report

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/rollup"
	"github.com/torchmem/torchmem/snapshot"
)

// RollupJSON writes a roll-up as schema torchmem.rollup/v1 while its inputs
// stream by: {"schema", "inputs": [each a torchmem.analysis/v1 result, as
// analyze --format json writes it for that file alone], "rollup": {…}}.
// Only the result being written is held. Nothing is written before the
// first input or Finish: a run that reads no input writes nothing.
type RollupJSON struct {
	w       io.Writer
	n       int
	started bool
	err     error
}

// NewRollupJSON starts a roll-up document on w.
func NewRollupJSON(w io.Writer) *RollupJSON { return &RollupJSON{w: w} }

// start writes the document's head, once.
func (j *RollupJSON) start() {
	if !j.started {
		j.started = true
		j.write([]byte("{\n  \"schema\": \"" + rollup.SchemaID + "\",\n  \"inputs\": ["))
	}
}

// Input writes the next input's result.
func (j *RollupJSON) Input(r *result.Result) error {
	b, err := json.MarshalIndent(r, "    ", "  ")
	if err != nil {
		return err
	}
	j.start()
	if j.n > 0 {
		j.write([]byte(","))
	}
	j.n++
	j.write([]byte("\n    "))
	j.write(b)
	return j.err
}

// Finish writes the roll-up and closes the document.
func (j *RollupJSON) Finish(ru *rollup.Rollup) error {
	b, err := json.MarshalIndent(ru, "  ", "  ")
	if err != nil {
		return err
	}
	j.start()
	if j.n > 0 {
		j.write([]byte("\n  "))
	}
	j.write([]byte("],\n  \"rollup\": "))
	j.write(b)
	j.write([]byte("\n}\n"))
	return j.err
}

func (j *RollupJSON) write(b []byte) {
	if j.err == nil {
		_, j.err = j.w.Write(b)
	}
}

// rowName names a row for people: "rank 3 cuda:3".
func rowName(rank int, device int, kind string) string {
	return fmt.Sprintf("rank %d %s", rank, deviceName(device, kind))
}

// deviceName is "cuda:3", or "cpu" for a trace's host memory.
func deviceName(device int, kind string) string {
	if kind == string(snapshot.DeviceCPU) || device < 0 {
		return "cpu"
	}
	if kind == "" {
		kind = "device"
	}
	return fmt.Sprintf("%s:%d", units.OneLine(kind), device)
}

// rollupHeadline is the roll-up in one sentence.
func rollupHeadline(ru *rollup.Rollup) string {
	if ru.Worst == nil {
		return fmt.Sprintf("%s, none with device memory.", plural(ru.Inputs, "input"))
	}
	of := plural(len(ru.Ranks), "device") + " of " + plural(ru.Inputs, "input")
	if n := sameProcessFiles(ru); n > 0 {
		of += fmt.Sprintf(" (%s of a process already counted)", plural(n, "file"))
	}
	s := fmt.Sprintf("%s: rank %d peaked highest, %s on %s", of,
		ru.Worst.Rank, units.FormatBytes(ru.Worst.PeakBytes), deviceName(ru.Worst.Device, worstKind(ru)))
	if ru.Imbalance > 0 && len(ru.Ranks) > 1 {
		s += fmt.Sprintf(", %.2f× %s", ru.Imbalance, othersPeak(ru))
	}
	s += "."
	if f := ru.FirstOOM; f != nil {
		s += fmt.Sprintf(" %s ran out of memory; the first was rank %d on %s %s.", plural(ru.OOMs, "device"), f.Rank, deviceName(f.Device, firstOOMKind(ru)), firstBy(f))
	}
	return s
}

// othersPeak names what the worst peak is compared with: the other row's
// peak, or the median peak of the others.
func othersPeak(ru *rollup.Rollup) string {
	if len(ru.Ranks) == 2 {
		o := ru.Ranks[0]
		if o.Input == ru.Worst.Input && o.Device == ru.Worst.Device {
			o = ru.Ranks[1]
		}
		return fmt.Sprintf("the peak of %s (%s)", rowName(o.Rank, o.Device, o.Kind), units.FormatBytes(o.PeakBytes))
	}
	return fmt.Sprintf("the median peak of the others (%s)", units.FormatBytes(ru.OthersMedianPeakBytes))
}

// firstBy says how the first OOM was found.
func firstBy(f *rollup.FirstOOM) string {
	if f.By == "time" {
		return "(by time)"
	}
	return "(the lowest rank: no clock the files share)"
}

func worstKind(ru *rollup.Rollup) string {
	for _, r := range ru.Ranks {
		if r.Input == ru.Worst.Input && r.Device == ru.Worst.Device {
			return r.Kind
		}
	}
	return ""
}

func firstOOMKind(ru *rollup.Rollup) string {
	for _, r := range ru.Ranks {
		if r.Input == ru.FirstOOM.Input && r.Device == ru.FirstOOM.Device {
			return r.Kind
		}
	}
	return ""
}

// outlierText says how a row stands out.
func outlierText(o rollup.Outlier) string {
	if o.Kind == rollup.OutlierPeak {
		return fmt.Sprintf("peak %s, %.2f× the median %s", units.FormatBytes(o.PeakBytes), o.Ratio, units.FormatBytes(o.MedianPeakBytes))
	}
	cat := result.Unknown
	if o.Category != nil {
		cat = *o.Category
	}
	return fmt.Sprintf("memory of other kinds: %s is %.0f%% of its peak against %.0f%% on the median rank (%.0f%% of the peak differs)",
		cat, 100*o.Share, 100*o.MedianShare, 100*o.Distance)
}

// maxSameProcessLines is how many files of the same processes text,
// Markdown and the page list (the JSON has them all).
const maxSameProcessLines = 16

// sameProcessLines say, for each row's input with other files of its
// process, what those files are: at most maxSameProcessLines, and how many
// more there are.
func sameProcessLines(ru *rollup.Rollup) (lines []string, more int) {
	seen := map[int]bool{}
	for _, r := range ru.Ranks {
		if seen[r.Input] {
			continue
		}
		seen[r.Input] = true
		for _, f := range r.SameProcess {
			if len(lines) == maxSameProcessLines {
				more++
				continue
			}
			lines = append(lines, fmt.Sprintf("rank %d (pid %d): %s, %s", r.Rank, r.Pid, units.OneLine(f.Path), sameProcessWhat(f)))
		}
	}
	return lines, more
}

// maxUnreadableLines is how many unreadable inputs text, Markdown and the
// page list (the JSON has them all).
const maxUnreadableLines = 16

// unreadableHead introduces the inputs that could not be read.
func unreadableHead(ru *rollup.Rollup) string {
	return fmt.Sprintf("%s could not be read; the roll-up is of the other %s:", plural(len(ru.Unreadable), "input"), plural(ru.Inputs, "input"))
}

// unreadableLines say which inputs could not be read and why: at most
// maxUnreadableLines, and how many more there are.
func unreadableLines(ru *rollup.Rollup) (lines []string, more int) {
	for _, u := range ru.Unreadable {
		if len(lines) == maxUnreadableLines {
			more++
			continue
		}
		rank := ""
		if u.Rank != nil {
			rank = fmt.Sprintf("rank %d: ", *u.Rank)
		}
		lines = append(lines, rank+units.OneLine(u.Path)+": "+units.OneLine(u.Error))
	}
	return lines, more
}

// sameProcessFiles counts the inputs that are other files of a row's
// process.
func sameProcessFiles(ru *rollup.Rollup) int {
	n := 0
	seen := map[int]bool{}
	for _, r := range ru.Ranks {
		if !seen[r.Input] {
			seen[r.Input] = true
			n += len(r.SameProcess)
		}
	}
	return n
}

// sameProcessWhat says what another file of a rank's process is.
func sameProcessWhat(f rollup.SameProcess) string {
	switch f.What {
	case rollup.WhatAfterOOM:
		return fmt.Sprintf("after the OOM (its history holds the OOM; %s allocated when it was written)", units.FormatBytes(f.AllocatedBytes))
	case rollup.WhatTrace:
		return "a profiler trace of the same process"
	}
	return fmt.Sprintf("another snapshot of the same process (%s allocated when it was written)", units.FormatBytes(f.AllocatedBytes))
}

// moreOutliers says how many outliers a roll-up leaves unlisted.
func moreOutliers(n int) string {
	return fmt.Sprintf("%s more stand out less (the farthest are listed)", plural(n, "device"))
}

// rowsOfInterest picks at most limit rows to list when there are more: the
// worst, those that ran out of memory, stand out or leak, then the others,
// in table order.
func rowsOfInterest(ru *rollup.Rollup, limit int) (rows []rollup.Row, more int) {
	if len(ru.Ranks) <= limit {
		return ru.Ranks, 0
	}
	type key struct{ input, device int }
	pick := map[key]bool{}
	if w := ru.Worst; w != nil {
		pick[key{w.Input, w.Device}] = true
	}
	for _, o := range ru.Outliers {
		pick[key{o.Input, o.Device}] = true
	}
	for _, r := range ru.Ranks {
		if r.OOM != nil || r.LeakCount > 0 {
			pick[key{r.Input, r.Device}] = true
		}
	}
	for _, r := range ru.Ranks {
		if len(pick) >= limit {
			break
		}
		pick[key{r.Input, r.Device}] = true
	}
	for _, r := range ru.Ranks {
		if pick[key{r.Input, r.Device}] && len(rows) < limit {
			rows = append(rows, r)
		}
	}
	return rows, len(ru.Ranks) - len(rows)
}
