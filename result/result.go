// Package result is what an analysis found — peaks, categories, phases,
// steps, leaks, suggestions, what-if projections — as the Go form of the
// JSON schema torchmem.analysis/v1: what analyze --format json writes and
// what diff, check --baseline and the roll-up read back (ReadResult, with
// its bounds). It holds no analysis: package analysis fills it, the
// comparisons and the reports only read it.
package result

import (
	"fmt"

	"github.com/torchmem/torchmem/snapshot"
)

// SchemaID is the JSON schema identifier of Result. Fields may be added in
// v1; none is renamed or removed without a new identifier.
const SchemaID = "torchmem.analysis/v1"

// AllocatedUnit names the unit of every allocated figure of a Result.
const AllocatedUnit = "allocator_block"

// AllocatedUnitTensor is the unit of a memory timeline's figures
// (torch.profiler's export_memory_timeline): the tensors' own sizes, with no
// allocator blocks behind them.
const AllocatedUnitTensor = "tensor"

// Result is everything torchmem concluded about one input.
//
// Units: allocated_bytes, the categories, phase peaks, sites, leaks and
// savings count the caching allocator's blocks (AllocatedUnit), PyTorch's
// own unit: torch.cuda.memory_allocated(), a snapshot's allocated_size, a
// chrome trace's Bytes and Total Allocated. A block is the request rounded
// up (to 512 B at least) plus any rest the allocator did not split off, and
// a block freed while other streams still use it (active_pending_free) is
// no longer allocated. requested_bytes, where the file has requested sizes
// (snapshots; chrome traces have none), counts what the program asked for
// of the same blocks. A memory timeline (torch.profiler's
// export_memory_timeline) has no allocator blocks: its figures are the
// tensors' own sizes, as PyTorch's memory timeline plot shows them.
type Result struct {
	Schema string `json:"schema"`
	// AllocatedUnit is AllocatedUnit, or AllocatedUnitTensor for a memory
	// timeline; absent from results written before torchmem counted blocks
	// (those counted requested bytes).
	AllocatedUnit string         `json:"allocated_unit,omitempty"`
	Input         Input          `json:"input"`
	Devices       []DeviceResult `json:"devices"`
	Leaks         []Leak         `json:"leaks"`
	Suggestions   []Suggestion   `json:"suggestions"`
	Diagnostics   []Diagnostic   `json:"diagnostics"`
	// WhatIf projects the device the suggestions are about: its peak under
	// each suggestion and their best combination, and its scaling with
	// batch and sequence (null without a recorded history).
	WhatIf *WhatIf `json:"what_if"`
}

// Input describes the analysed file.
type Input struct {
	Path       string `json:"path"`
	Format     string `json:"format"` // "snapshot" or "chrome-trace"
	Generation string `json:"generation"`
	Bytes      int64  `json:"bytes"`
	Recording  string `json:"recording"`
	// Distributed is the rank that wrote the file, when the file says so (a
	// chrome trace's distributedInfo); absent otherwise.
	Distributed *Distributed `json:"distributed,omitempty"`
	// ReadBytes is what torchmem read to make this result: the input after
	// gzip or base64 for an analysis, the JSON for one read back. A run's
	// output budget follows it; not part of the JSON.
	ReadBytes int64 `json:"-"`
}

// Distributed is a process's place in a distributed job, as its file states it.
type Distributed struct {
	Rank      int    `json:"rank"`
	WorldSize int    `json:"world_size,omitempty"` // absent when not stated
	Backend   string `json:"backend,omitempty"`    // "nccl", "gloo" …, as written
}

// DeviceResult is the analysis of one device.
type DeviceResult struct {
	// Device is the device's ordinal; −1 (null in the JSON) for host memory
	// (the CPU of a chrome trace), which has none.
	Device   int         `json:"device" null:"-1"`
	Kind     string      `json:"kind"`
	Capacity int64       `json:"capacity_bytes,omitempty"`
	AtEnd    State       `json:"at_end"`
	Peak     Peak        `json:"peak"`
	OOM      *OOM        `json:"oom"`
	Phases   []PhaseSpan `json:"phases"`
	// PhasePeaks is the highest peak of each phase over all steps, with its
	// categories and sites, in the order the phases first occur: what check
	// and diff compare with the same phase of another run.
	PhasePeaks []PhasePeak `json:"phase_peaks"`
	// NoHistory: the file holds no allocation history for the device, only
	// the state at the dump (a state-only dump, or an OOM observer's with
	// the history off): the peak is the dump itself.
	NoHistory bool `json:"no_history,omitempty"`
	// Steps is how the device's events divide into steps and where the
	// boundaries came from.
	Steps    *StepPlan `json:"steps"`
	TopSites []Site    `json:"top_sites"`
	// Rules says which classification rule decided how many bytes, at the end
	// (the evidence behind AtEnd.Categories).
	Rules []RuleUse `json:"classification_rules"`
	// Timeline is the memory curve for the HTML report; not part of the JSON.
	Timeline *Timeline `json:"-"`
	// PeakAllocations are single allocations around the peak, with their
	// stacks, for the HTML report (with the timeline); not part of the JSON.
	PeakAllocations *AllocationsAt `json:"-"`
}

// State is the memory of a device at one moment.
type State struct {
	// AllocatedBytes counts allocator blocks (AllocatedUnit).
	AllocatedBytes int64 `json:"allocated_bytes"`
	// RequestedBytes is what the program asked for of the same blocks; nil
	// when the file has no requested sizes (chrome traces).
	RequestedBytes *int64     `json:"requested_bytes,omitempty"`
	ReservedBytes  int64      `json:"reserved_bytes" null:"if:ReservedUnknown"`
	Categories     Categories `json:"categories"`
	// Fragmentation is what the allocator caches at the dump — free bytes,
	// in how many blocks, the largest — where the file has the dump's
	// segments; absent otherwise.
	Fragmentation *Fragmentation `json:"fragmentation,omitempty"`
	// ReservedUnknown: the file states no reserved figure (a chrome trace
	// without Total Reserved, host memory, a memory timeline): ReservedBytes
	// is 0 and reserved_bytes null.
	ReservedUnknown bool `json:"-"`
}

// Peak is the moment allocated memory was highest.
type Peak struct {
	// AllocatedBytes counts allocator blocks (AllocatedUnit); the peak is
	// the first event where they are highest.
	AllocatedBytes int64 `json:"allocated_bytes"`
	// RequestedBytes is what the program asked for of the blocks allocated
	// at the peak; nil when the file has no requested sizes.
	RequestedBytes *int64 `json:"requested_bytes,omitempty"`
	ReservedBytes  int64  `json:"reserved_bytes" null:"if:ReservedUnknown"`
	// TimeUS is 0 (null) when the file has no times; EventIndex −1 (null)
	// when the peak is the state before the first event (a dump without
	// history).
	TimeUS     int64      `json:"time_us" null:"0"`
	EventIndex int        `json:"event_index" null:"-1"`
	Phase      Phase      `json:"phase"`
	Step       int        `json:"step"`
	Categories Categories `json:"categories"`
	// ReservedUnknown: the file states no reserved figure (State).
	ReservedUnknown bool `json:"-"`
}

// OOM is the post-mortem of an out-of-memory entry.
type OOM struct {
	RequestedBytes  int64  `json:"requested_bytes"`
	DeviceFreeBytes int64  `json:"device_free_bytes"`
	Phase           Phase  `json:"phase"`
	Step            int    `json:"step"`
	TimeUS          int64  `json:"time_us" null:"0"`
	EventIndex      int    `json:"event_index"`
	Site            string `json:"site"`
	// SiteFile and SiteLine are the frame naming Site, as recorded.
	SiteFile string   `json:"site_file,omitempty"`
	SiteLine int64    `json:"site_line,omitempty"`
	Stack    []string `json:"stack"`
	// AllocatedBytes counts allocator blocks (AllocatedUnit).
	AllocatedBytes int64 `json:"allocated_bytes"`
	// AllocatedRequestedBytes is what the program asked for of the blocks
	// allocated at the OOM (RequestedBytes is the failed request); nil when
	// the file has no requested sizes.
	AllocatedRequestedBytes *int64        `json:"allocated_requested_bytes,omitempty"`
	ReservedBytes           int64         `json:"reserved_bytes" null:"if:ReservedUnknown"`
	Categories              Categories    `json:"categories"`
	Fragmentation           Fragmentation `json:"fragmentation"`
	TopSites                []Site        `json:"top_sites"`
	// LiveByPhase groups the bytes live at the OOM by the phase and step
	// that allocated them, largest first.
	LiveByPhase []PhaseBytes `json:"live_by_phase"`
	// Verdict is the one-sentence explanation shown first in every report.
	Verdict string `json:"verdict"`
	// Layout is the allocator's segments and blocks at the OOM, rebuilt by
	// replay (nil without dump-time segments); for the HTML report, not JSON.
	Layout []SegmentState `json:"-"`
	// Allocations are single allocations around the OOM, with their
	// stacks, for the HTML report; not part of the JSON.
	Allocations *AllocationsAt `json:"-"`
	// ReservedUnknown: the file states no reserved figure (State).
	ReservedUnknown bool `json:"-"`
}

// Fragmentation measures allocator slack at a moment.
type Fragmentation struct {
	CachedFreeBytes       int64 `json:"cached_free_bytes"`
	LargestFreeBlockBytes int64 `json:"largest_free_block_bytes"`
	// FreeInUsedSegmentsBytes is the part of CachedFreeBytes inside segments
	// that hold at least one live block: fragmentation, what expandable
	// segments reclaim. The rest is wholly free segments, which
	// torch.cuda.empty_cache() (or the allocator, before it reports an OOM)
	// returns to the device. Equal to CachedFreeBytes without segment state.
	FreeInUsedSegmentsBytes int64 `json:"free_in_used_segments_bytes"`
	ExpandableSegments      bool  `json:"expandable_segments"`
	// Fragmented is true when the cached free bytes would have covered the
	// request but no single free block was large enough.
	Fragmented bool `json:"fragmented"`
	// FreeBlocks is how many free blocks the cached free bytes are in
	// (0 without segment state).
	FreeBlocks int `json:"free_blocks"`
}

// PhaseSpan is one phase of one step with its peak.
type PhaseSpan struct {
	Phase Phase `json:"phase"`
	// Step is −1 (null) before the first step; times are 0 (null) when the
	// file has none; events −1 (null) for a span before the first event.
	Step       int   `json:"step" null:"-1"`
	StartUS    int64 `json:"start_us" null:"0"`
	EndUS      int64 `json:"end_us" null:"0"`
	StartEvent int   `json:"start_event" null:"-1"`
	EndEvent   int   `json:"end_event" null:"-1"`
	// PeakAllocatedBytes is the highest allocated value after any event of
	// the span (for a span without events, the value during it).
	PeakAllocatedBytes int64 `json:"peak_allocated_bytes"`
	// Events is the number of events in the span; 0 for a phase that an
	// annotation shows but that allocated and freed nothing on this device
	// (its StartEvent = EndEvent is the last event before it, −1 if none).
	Events int `json:"events"`
}

// PhaseBytes is live memory allocated in one phase of one step
// (Phase is PhaseBeforeRecording for blocks older than the trace).
type PhaseBytes struct {
	Phase Phase `json:"phase"`
	Step  int   `json:"step"`
	Bytes int64 `json:"bytes"`
	Count int   `json:"count"`
}

// Site is memory attributed to one allocation site (first user frame).
type Site struct {
	Site     string   `json:"site"`
	Bytes    int64    `json:"bytes"`
	Count    int      `json:"count"`
	Category Category `json:"category"`
	// File and Line are the frame that names the site, the file as the
	// recording machine wrote it (absent for sites without a Python frame).
	File string `json:"file,omitempty"`
	Line int64  `json:"line,omitempty"`
}

// RuleUse counts the bytes one classification rule decided.
type RuleUse struct {
	Rule       string     `json:"rule"`
	Category   Category   `json:"category"`
	Confidence Confidence `json:"confidence"`
	Blocks     int        `json:"blocks"`
	Bytes      int64      `json:"bytes"`
}

// Leak is a finding of memory that grows step after step.
type Leak struct {
	Kind         string     `json:"kind"` // retained_graph | growing_list | step_growth | reference_cycle
	Device       int        `json:"device" null:"-1"`
	Site         string     `json:"site"`
	BytesPerStep int64      `json:"bytes_per_step"`
	Steps        int        `json:"steps"`
	TotalBytes   int64      `json:"total_bytes"`
	Confidence   Confidence `json:"confidence"`
	// Evidence is what was measured for this finding (its site, bytes and
	// steps).
	Evidence string `json:"evidence"`
	// Explanation says what such a pattern means; findings of one kind and
	// step pattern share it (a report prints it once for the group).
	Explanation string `json:"explanation"`
	// Fix is the remedy with what it saves; Remedy the remedy alone,
	// shared by findings of one kind.
	Fix    string `json:"fix"`
	Remedy string `json:"remedy"`
	// StepsUntilFull is how many more steps at this rate fill the device (0 when unknown).
	StepsUntilFull int `json:"steps_until_full,omitempty"`
	// SeenInSteps are the numbers of the steps (DeviceResult.Steps) the
	// finding was seen in, so that a user can check them.
	SeenInSteps []int `json:"seen_in_steps"`
}

// Suggestion is a change that would reduce memory, chosen from evidence.
type Suggestion struct {
	ID                    string `json:"id"`
	Title                 string `json:"title"`
	Because               string `json:"because"`
	EstimatedSavingsBytes int64  `json:"estimated_savings_bytes"`
	Cost                  string `json:"cost"`
	How                   string `json:"how"`
}

// Diagnostic says what limits trust in the numbers.
type Diagnostic struct {
	Kind string `json:"kind"`
	// Device is −1 (null) for what concerns the whole file — and for host
	// memory, whose messages say "cpu".
	Device  int    `json:"device" null:"-1"`
	Message string `json:"message"`
}

// Timeline is a device's memory over the trace, for charts. X is the event
// index; TimeUS is set where the file has times.
type Timeline struct {
	EventIndex []int
	TimeUS     []int64
	Allocated  []int64
	Reserved   []int64 // nil when the file states no reserved memory
	// ByCategory[c][i] is the allocated bytes of category c at point i.
	ByCategory [NumCategories][]int64
	// PeakPoint and OOMPoint index the points of the peak and the OOM (−1 if none).
	PeakPoint, OOMPoint int
}

// JSON of the types with fields that may be "none" (result_nulls.go).

// MarshalJSON writes the device, its null fields null.
func (d DeviceResult) MarshalJSON() ([]byte, error) {
	type plain DeviceResult
	return marshalNulls(plain(d))
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (d *DeviceResult) UnmarshalJSON(b []byte) error {
	type plain DeviceResult
	return unmarshalNulls(b, (*plain)(d))
}

// MarshalJSON writes the state, reserved_bytes null when unknown.
func (s State) MarshalJSON() ([]byte, error) {
	type plain State
	return marshalNulls(plain(s))
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (s *State) UnmarshalJSON(b []byte) error {
	type plain State
	return unmarshalNulls(b, (*plain)(s))
}

// MarshalJSON writes the peak, its null fields null.
func (p Peak) MarshalJSON() ([]byte, error) {
	type plain Peak
	return marshalNulls(plain(p))
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (p *Peak) UnmarshalJSON(b []byte) error {
	type plain Peak
	return unmarshalNulls(b, (*plain)(p))
}

// MarshalJSON writes the OOM, its null fields null.
func (o OOM) MarshalJSON() ([]byte, error) {
	type plain OOM
	return marshalNulls(plain(o))
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (o *OOM) UnmarshalJSON(b []byte) error {
	type plain OOM
	return unmarshalNulls(b, (*plain)(o))
}

// MarshalJSON writes the span, its null fields null.
func (p PhaseSpan) MarshalJSON() ([]byte, error) {
	type plain PhaseSpan
	return marshalNulls(plain(p))
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (p *PhaseSpan) UnmarshalJSON(b []byte) error {
	type plain PhaseSpan
	return unmarshalNulls(b, (*plain)(p))
}

// MarshalJSON writes the leak, device null for host memory.
func (l Leak) MarshalJSON() ([]byte, error) {
	type plain Leak
	return marshalNulls(plain(l))
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (l *Leak) UnmarshalJSON(b []byte) error {
	type plain Leak
	return unmarshalNulls(b, (*plain)(l))
}

// MarshalJSON writes the diagnostic, device null when it has none.
func (d Diagnostic) MarshalJSON() ([]byte, error) {
	type plain Diagnostic
	return marshalNulls(plain(d))
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (d *Diagnostic) UnmarshalJSON(b []byte) error {
	type plain Diagnostic
	return unmarshalNulls(b, (*plain)(d))
}

// DeviceName names a device in reports: its kind and ordinal ("cuda:0",
// "rocm:1"), or "cpu" for host memory, which has no ordinal.
func DeviceName(kind string, id int) string {
	if kind == string(snapshot.DeviceCPU) || id < 0 {
		if kind == "" {
			kind = string(snapshot.DeviceCPU)
		}
		return kind
	}
	if kind == "" {
		kind = "device"
	}
	return fmt.Sprintf("%s:%d", kind, id)
}

// Site names used when a stack has no frame to name (blocks' sites add the
// category or phase: "<allocated before recording: parameter>",
// "<no frames: backward>").
const (
	SiteNoFrames        = "<no frames>"
	SiteBeforeRecording = "<allocated before recording>"
	SiteUntracked       = "<allocated before the trace window>"
)

// Leak kinds (Leak.Kind).
const (
	// LeakRetainedGraph: the forward's saved tensors — many sites — outlive
	// their step and pile up: an autograd graph kept alive across steps
	// (an evaluation loop under grad mode, total_loss += loss without
	// .item(), outputs kept with their graph, retain_graph=True).
	LeakRetainedGraph = "retained_graph"
	// LeakGrowingList: one site (or a few) leaves a tensor per step that is
	// never freed (outputs.append(logits)).
	LeakGrowingList = "growing_list"
	// LeakStepGrowth: allocated memory at the same point of every step
	// rises, and no finding above explains it.
	LeakStepGrowth = "step_growth"
	// LeakReferenceCycle: the sawtooth — tensors of several steps held
	// together and released in bulk (by Python's garbage collector).
	LeakReferenceCycle = "reference_cycle"
)
