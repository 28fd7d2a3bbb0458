package snapshot

import (
	"regexp"
	"sort"
)

// Summary is what `torchmem info` shows: what a file holds, computed from the
// model without any analysis.
type Summary struct {
	Path       string    `json:"path"`
	Format     Format    `json:"format"`
	Generation string    `json:"generation"`
	Protocol   int       `json:"pickle_protocol,omitempty"`
	Gzipped    bool      `json:"gzipped"`
	FileBytes  int64     `json:"file_bytes"`
	Recording  Recording `json:"recording"`
	// Distributed is the process's place in a distributed job, when the
	// file states it; absent otherwise.
	Distributed *Distributed       `json:"distributed,omitempty"`
	Devices     []DeviceSummary    `json:"devices"`
	Frames      int                `json:"unique_frames"`
	Stacks      int                `json:"unique_stacks"`
	Annotations AnnotationStats    `json:"annotations"`
	Settings    *AllocatorSettings `json:"allocator_settings"`
	OOMs        []OOMEntry         `json:"ooms"`
	Diagnostics []Diagnostic       `json:"diagnostics"`
}

// DeviceSummary holds the per-device facts of a Summary.
type DeviceSummary struct {
	Device           int            `json:"device"`
	Kind             DeviceKind     `json:"kind"`
	Name             string         `json:"name,omitempty"`
	CapacityBytes    int64          `json:"capacity_bytes,omitempty"`
	Segments         int            `json:"segments"`
	Expandable       int            `json:"expandable_segments"`
	PrivatePools     int            `json:"private_pool_segments"`
	ReservedBytes    int64          `json:"reserved_bytes"`
	AllocatedBytes   int64          `json:"allocated_bytes"`
	ActiveBytes      int64          `json:"active_bytes"`
	RequestedBytes   int64          `json:"requested_bytes"`
	Blocks           map[string]int `json:"blocks_by_state"`
	BaselineBytes    int64          `json:"baseline_bytes"`
	TraceEntries     int            `json:"trace_entries"`
	ByAction         map[string]int `json:"trace_entries_by_action"`
	FirstTimeNS      int64          `json:"first_time_ns,omitempty"`
	LastTimeNS       int64          `json:"last_time_ns,omitempty"`
	EntriesWithStack int            `json:"entries_with_stack"`
	// What the file records: the allocator's state at the dump (segments
	// and blocks: a snapshot or segment list), the reserved bytes at the
	// end (that state, or a trace's Total Reserved), the allocated bytes at
	// the end (that state, or a trace that states its baseline). A figure
	// the file does not record is 0 above and must not be shown as one.
	StateRecorded     bool `json:"-"`
	ReservedRecorded  bool `json:"-"`
	AllocatedRecorded bool `json:"-"`
}

// AnnotationStats counts annotations, grouping names that differ only by a
// trailing step number (ProfilerStep#3 → ProfilerStep#N).
type AnnotationStats struct {
	Count int         `json:"count"`
	Top   []NameCount `json:"top"`
}

// NameCount is a name and how often it occurs.
type NameCount struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

// OOMEntry is an out-of-memory trace entry.
type OOMEntry struct {
	Device         int   `json:"device"`
	Index          int   `json:"index"`
	RequestedBytes int64 `json:"requested_bytes"`
	DeviceFree     int64 `json:"device_free_bytes"`
	TimeNS         int64 `json:"time_ns,omitempty"`
}

var stepNumber = regexp.MustCompile(`#\d+$`)

// Summarize computes the Summary of a snapshot.
func Summarize(s *Snapshot) Summary {
	sum := Summary{
		Path: s.Source.Path, Format: s.Source.Format, Generation: s.Source.Generation,
		Protocol: s.Source.Protocol, Gzipped: s.Source.Gzipped, FileBytes: s.Source.FileBytes,
		Recording: s.Recording, Frames: len(s.Frames), Stacks: len(s.Stacks) - 1,
		Settings: s.Settings, Diagnostics: s.Diagnostics, Distributed: s.Source.Distributed,
	}
	for _, d := range s.Devices {
		ds := DeviceSummary{Device: d.ID, Kind: d.Kind, Name: d.Name, CapacityBytes: d.CapacityBytes,
			Segments: len(d.Segments), Blocks: map[string]int{}, ByAction: map[string]int{},
			TraceEntries: len(d.Events), BaselineBytes: d.Baseline}
		ds.StateRecorded = len(d.Segments) > 0 || s.Source.Format == FormatSnapshotPickle || s.Source.Format == FormatSegmentList
		ds.ReservedRecorded = ds.StateRecorded || len(d.Reserved) > 0
		ds.AllocatedRecorded = ds.StateRecorded || d.Baseline >= 0
		for _, g := range d.Segments {
			ds.ReservedBytes += g.TotalSize
			ds.AllocatedBytes += g.AllocatedSize
			ds.ActiveBytes += g.ActiveSize
			ds.RequestedBytes += g.RequestedSize
			if g.IsExpandable {
				ds.Expandable++
			}
			if g.PoolID != [2]int64{} {
				ds.PrivatePools++
			}
			for _, b := range g.Blocks {
				ds.Blocks[b.State.String()]++
			}
		}
		if len(d.Segments) == 0 && len(d.Reserved) > 0 {
			ds.ReservedBytes = d.Reserved[len(d.Reserved)-1].Value
		}
		if len(d.Segments) == 0 && d.Baseline >= 0 {
			// A trace: allocated at the end is the baseline plus the net of its events.
			ds.AllocatedBytes = d.Baseline
			for i := range d.Events {
				switch d.Events[i].Action {
				case ActionAlloc:
					ds.AllocatedBytes += d.Events[i].Size
				case ActionFreeCompleted:
					ds.AllocatedBytes -= d.Events[i].Size
				}
			}
		}
		first, last := NoTime, NoTime
		for i := range d.Events {
			e := &d.Events[i]
			ds.ByAction[e.Action.String()]++
			if e.Stack != 0 {
				ds.EntriesWithStack++
			}
			if e.HasTime() {
				if first == NoTime || e.TimeNS < first {
					first = e.TimeNS
				}
				if last == NoTime || e.TimeNS > last {
					last = e.TimeNS
				}
			}
			if e.Action == ActionOOM {
				sum.OOMs = append(sum.OOMs, OOMEntry{Device: d.ID, Index: i, RequestedBytes: e.Size, DeviceFree: e.DeviceFree(), TimeNS: max(e.TimeNS, 0)})
			}
		}
		if first != NoTime {
			ds.FirstTimeNS, ds.LastTimeNS = first, last
		}
		sum.Devices = append(sum.Devices, ds)
	}
	counts := map[string]int{}
	for _, a := range s.Annotations {
		counts[stepNumber.ReplaceAllString(a.Name, "#N")]++
	}
	sum.Annotations.Count = len(s.Annotations)
	for n, c := range counts {
		sum.Annotations.Top = append(sum.Annotations.Top, NameCount{n, c})
	}
	sort.Slice(sum.Annotations.Top, func(i, j int) bool {
		a, b := sum.Annotations.Top[i], sum.Annotations.Top[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.Name < b.Name
	})
	if len(sum.Annotations.Top) > 8 {
		sum.Annotations.Top = sum.Annotations.Top[:8]
	}
	if sum.Diagnostics == nil {
		sum.Diagnostics = []Diagnostic{}
	}
	if sum.OOMs == nil {
		sum.OOMs = []OOMEntry{}
	}
	return sum
}
