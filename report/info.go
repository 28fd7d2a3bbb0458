package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/snapshot"
)

// InfoSchemaID is the JSON schema identifier of info --format json.
const InfoSchemaID = "torchmem.info/v1"

// InfoJSON writes summaries as indented JSON, schema torchmem.info/v1 (one
// object, or an array for several files).
func InfoJSON(w io.Writer, sums []snapshot.Summary) error {
	out := make([]infoJSON, len(sums))
	for i, s := range sums {
		out[i] = newInfoJSON(s)
	}
	return writeJSON(w, oneOrMany(out))
}

// InfoText writes a summary for a terminal.
func InfoText(w io.Writer, s snapshot.Summary) error {
	p := &printer{w: w}
	p.wrap("", "  ", units.OneLine(s.Path))
	format := string(s.Format)
	if s.Protocol > 0 {
		format += fmt.Sprintf(", pickle protocol %d", s.Protocol)
	}
	if s.Gzipped {
		format += ", gzip"
	}
	generation := s.Generation
	if generation == "" {
		generation = "not recorded"
	}
	p.wrap("  format      ", "              ", fmt.Sprintf("%s, generation %s, %s on disk", format, generation, units.FormatBytes(s.FileBytes)))
	p.wrap("  recorded    ", "              ", fmt.Sprintf("%s (%s unique frames, %s unique stacks)", describeRecording(s.Recording), units.Count(s.Frames), units.Count(s.Stacks)))
	if d := s.Distributed; d != nil {
		p.wrap("  distributed ", "              ", describeDistributed(*d))
	}
	for _, d := range s.Devices {
		name := fmt.Sprintf("%s:%d", d.Kind, d.Device)
		if d.Kind == snapshot.DeviceCPU {
			name = "cpu"
		}
		extra := ""
		if d.Name != "" {
			extra = " " + units.OneLine(d.Name)
		}
		if d.CapacityBytes > 0 {
			extra += " (" + units.FormatBytes(d.CapacityBytes) + ")"
		}
		p.wrap("  device ", "      ", name+extra)
		if d.Segments > 0 {
			seg := fmt.Sprintf("%s segments", units.Count(d.Segments))
			if d.Expandable > 0 {
				seg += fmt.Sprintf(", %d expandable", d.Expandable)
			}
			if d.PrivatePools > 0 {
				seg += fmt.Sprintf(", %d in private pools", d.PrivatePools)
			}
			reserved := "reserved " + units.FormatBytes(d.ReservedBytes)
			if d.Expandable == d.Segments {
				// Expandable segments report their virtual range, mapped or not.
				reserved = "virtual size " + units.FormatBytes(d.ReservedBytes)
			}
			p.wrap("    segments  ", "              ", fmt.Sprintf("%s: %s, allocated %s, active %s", seg, reserved, units.FormatBytes(d.AllocatedBytes), units.FormatBytes(d.ActiveBytes)))
			p.wrap("    blocks    ", "              ", countsLine(d.Blocks))
		} else if !d.StateRecorded && (d.ReservedRecorded || d.AllocatedRecorded) {
			allocated, reserved := "allocated not recorded", "reserved not recorded"
			if d.AllocatedRecorded {
				allocated = units.FormatBytes(d.AllocatedBytes) + " allocated"
			}
			if d.ReservedRecorded {
				reserved = units.FormatBytes(d.ReservedBytes) + " reserved (last Total Reserved)"
			}
			p.wrap("    at end    ", "              ", allocated+", "+reserved)
		}
		if d.BaselineBytes >= 0 {
			p.wrap("    baseline  ", "              ", fmt.Sprintf("%s allocated before the recording window", units.FormatBytes(d.BaselineBytes)))
		}
		if d.TraceEntries > 0 {
			p.wrap("    trace     ", "              ", fmt.Sprintf("%s entries: %s", units.Count(d.TraceEntries), countsLine(d.ByAction)))
			if d.LastTimeNS > 0 {
				p.wrap("    time      ", "              ", fmt.Sprintf("%s → %s (%s)", fmtTime(d.FirstTimeNS), fmtTime(d.LastTimeNS), units.Duration(d.LastTimeNS-d.FirstTimeNS)))
			}
		} else {
			p.f("    trace     none\n")
		}
	}
	if s.Annotations.Count > 0 {
		var top []string
		for _, a := range s.Annotations.Top {
			top = append(top, fmt.Sprintf("%s ×%d", units.OneLine(a.Name), a.Count))
		}
		p.wrap("  annotations ", "              ", fmt.Sprintf("%s: %s", units.Count(s.Annotations.Count), strings.Join(top, ", ")))
	}
	if st := s.Settings; st != nil {
		conf := st.AllocConf
		if conf == "" {
			conf = `""`
		}
		split := "unlimited"
		if st.MaxSplitSize >= 0 {
			split = units.FormatBytes(st.MaxSplitSize)
		}
		p.wrap("  allocator   ", "              ", fmt.Sprintf("PYTORCH_CUDA_ALLOC_CONF=%s, expandable_segments=%v, max_split_size=%s", units.OneLine(conf), st.ExpandableSegments, split))
	}
	for _, o := range s.OOMs {
		p.wrap("  OOM         ", "              ", fmt.Sprintf("device %d, entry %d: requested %s with %s free on the device", o.Device, o.Index, units.FormatBytes(o.RequestedBytes), units.FormatBytes(o.DeviceFree)))
	}
	for _, d := range s.Diagnostics {
		p.wrap("  note        ", "              ", units.OneLine(d.Message))
	}
	return p.err
}

func describeRecording(r snapshot.Recording) string {
	switch r {
	case snapshot.RecordingNone:
		return "nothing (no trace, no stacks)"
	case snapshot.RecordingState:
		return "state only (block stacks, no history)"
	case snapshot.RecordingPython:
		return "trace with Python stacks"
	case snapshot.RecordingCPP:
		return "trace with C++ and Python stacks"
	case snapshot.RecordingNoStacks:
		return "trace without stacks"
	case snapshot.RecordingProfiler:
		return "profiler memory events"
	case snapshot.RecordingProfilerStacks:
		return "profiler memory events with stacks"
	}
	return string(r)
}

func countsLine(m map[string]int) string {
	type kv struct {
		k string
		v int
	}
	var kvs []kv
	for k, v := range m {
		kvs = append(kvs, kv{k, v})
	}
	sort.Slice(kvs, func(i, j int) bool {
		if kvs[i].v != kvs[j].v {
			return kvs[i].v > kvs[j].v
		}
		return kvs[i].k < kvs[j].k
	})
	var parts []string
	for _, x := range kvs {
		parts = append(parts, fmt.Sprintf("%s %s", units.Count(x.v), x.k))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func fmtTime(ns int64) string {
	if ns > 1e17 { // epoch: show a UTC date
		return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.000")
	}
	return units.Duration(ns)
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// describeDistributed says a process's place in its job: "rank 1 of 2
// (nccl)", leaving out what the file does not state.
func describeDistributed(d snapshot.Distributed) string {
	s := fmt.Sprintf("rank %d", d.Rank)
	if d.WorldSize > 0 {
		s += fmt.Sprintf(" of %d", d.WorldSize)
	}
	if d.Backend != "" {
		s += " (" + units.OneLine(d.Backend) + ")"
	}
	return s
}
