package report

import (
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// infoJSON is a Summary as info --format json writes it: the schema first,
// and, as analyze writes it, null for every figure the file does not
// record (a trace has no segments; a memory timeline no reserved bytes
// and no generation) and for device −1 (host memory).
type infoJSON struct {
	Schema      string                   `json:"schema"`
	Path        string                   `json:"path"`
	Format      snapshot.Format          `json:"format"`
	Generation  *string                  `json:"generation"`
	Protocol    int                      `json:"pickle_protocol,omitempty"`
	Gzipped     bool                     `json:"gzipped"`
	FileBytes   int64                    `json:"file_bytes"`
	Recording   snapshot.Recording       `json:"recording"`
	Distributed *snapshot.Distributed    `json:"distributed,omitempty"`
	Devices     []infoDevice             `json:"devices"`
	Frames      int                      `json:"unique_frames"`
	Stacks      int                      `json:"unique_stacks"`
	Annotations snapshot.AnnotationStats `json:"annotations"`
	Settings    *infoSettings            `json:"allocator_settings"`
	OOMs        []snapshot.OOMEntry      `json:"ooms"`
	Diagnostics []result.Diagnostic      `json:"diagnostics"`
}

// infoDevice is a DeviceSummary with null for what is not recorded.
type infoDevice struct {
	Device           *int                `json:"device"`
	Kind             snapshot.DeviceKind `json:"kind"`
	Name             string              `json:"name,omitempty"`
	CapacityBytes    int64               `json:"capacity_bytes,omitempty"`
	Segments         *int                `json:"segments"`
	Expandable       *int                `json:"expandable_segments"`
	PrivatePools     *int                `json:"private_pool_segments"`
	ReservedBytes    *int64              `json:"reserved_bytes"`
	AllocatedBytes   *int64              `json:"allocated_bytes"`
	ActiveBytes      *int64              `json:"active_bytes"`
	RequestedBytes   *int64              `json:"requested_bytes"`
	Blocks           map[string]int      `json:"blocks_by_state"`
	BaselineBytes    *int64              `json:"baseline_bytes"`
	TraceEntries     int                 `json:"trace_entries"`
	ByAction         map[string]int      `json:"trace_entries_by_action"`
	FirstTimeNS      int64               `json:"first_time_ns,omitempty"`
	LastTimeNS       int64               `json:"last_time_ns,omitempty"`
	EntriesWithStack int                 `json:"entries_with_stack"`
}

// infoSettings is the allocator_settings of a snapshot, its keys in snake
// case as every torchmem JSON writes them (they were Go's field names);
// trace_alloc_* are null when the file does not state them.
type infoSettings struct {
	AllocConf            string            `json:"alloc_conf"`
	MaxSplitSize         int64             `json:"max_split_size"` // −1: unlimited, as PyTorch writes it
	GCThreshold          float64           `json:"garbage_collection_threshold"`
	ExpandableSegments   bool              `json:"expandable_segments"`
	TraceAllocMaxEntries *int64            `json:"trace_alloc_max_entries"`
	TraceAllocOverflowed *bool             `json:"trace_alloc_overflowed"`
	Other                map[string]string `json:"other"`
}

// recorded is &v when the file records v, else nil (null).
func recorded[T any](v T, ok bool) *T {
	if !ok {
		return nil
	}
	return &v
}

func newInfoJSON(s snapshot.Summary) infoJSON {
	out := infoJSON{Schema: InfoSchemaID, Path: s.Path, Format: s.Format, Generation: recorded(s.Generation, s.Generation != ""),
		Protocol: s.Protocol, Gzipped: s.Gzipped, FileBytes: s.FileBytes, Recording: s.Recording, Distributed: s.Distributed,
		Devices: make([]infoDevice, len(s.Devices)), Frames: s.Frames, Stacks: s.Stacks, Annotations: s.Annotations,
		OOMs: s.OOMs, Diagnostics: make([]result.Diagnostic, len(s.Diagnostics))}
	if out.Annotations.Top == nil {
		out.Annotations.Top = []snapshot.NameCount{}
	}
	for i, d := range s.Devices {
		state := d.StateRecorded
		blocks := d.Blocks
		if !state {
			blocks = nil
		}
		out.Devices[i] = infoDevice{Device: recorded(d.Device, d.Device >= 0), Kind: d.Kind, Name: d.Name, CapacityBytes: d.CapacityBytes,
			Segments: recorded(d.Segments, state), Expandable: recorded(d.Expandable, state), PrivatePools: recorded(d.PrivatePools, state),
			ReservedBytes: recorded(d.ReservedBytes, d.ReservedRecorded), AllocatedBytes: recorded(d.AllocatedBytes, d.AllocatedRecorded),
			ActiveBytes: recorded(d.ActiveBytes, state), RequestedBytes: recorded(d.RequestedBytes, state), Blocks: blocks,
			BaselineBytes: recorded(d.BaselineBytes, d.BaselineBytes >= 0), TraceEntries: d.TraceEntries, ByAction: d.ByAction,
			FirstTimeNS: d.FirstTimeNS, LastTimeNS: d.LastTimeNS, EntriesWithStack: d.EntriesWithStack}
	}
	if st := s.Settings; st != nil {
		stated := st.TraceAllocMaxEntries > 0
		out.Settings = &infoSettings{AllocConf: st.AllocConf, MaxSplitSize: st.MaxSplitSize, GCThreshold: st.GCThreshold,
			ExpandableSegments: st.ExpandableSegments, TraceAllocMaxEntries: recorded(st.TraceAllocMaxEntries, stated),
			TraceAllocOverflowed: recorded(st.TraceAllocOverflowed, stated), Other: st.Other}
	}
	for i, d := range s.Diagnostics {
		out.Diagnostics[i] = result.Diagnostic{Kind: d.Kind, Device: d.Device, Message: d.Message}
	}
	return out
}
