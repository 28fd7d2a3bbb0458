package snapshot

// Format names the kind of file a Snapshot was read from.
type Format string

// The input formats torchmem reads.
const (
	FormatSnapshotPickle Format = "snapshot"     // dict pickle from _dump_snapshot / pickle.dump(_snapshot())
	FormatSegmentList    Format = "segment-list" // bare list pickle from torch.cuda.memory_snapshot()
	FormatTracePlotHTML  Format = "trace-plot"   // HTML from python -m torch.cuda._memory_viz trace_plot
	FormatChromeTrace    Format = "chrome-trace" // Kineto JSON from prof.export_chrome_trace
	// FormatMemoryTimeline is the raw export of torch.profiler's
	// export_memory_timeline ("….raw.json.gz": [t_ns, action, bytes, category] rows).
	FormatMemoryTimeline Format = "memory-timeline"
)

// Snapshot is everything torchmem knows about one input file.
type Snapshot struct {
	Source      Source
	Devices     []*Device    // ordered by ID
	Annotations []Annotation // named time ranges (steps, optimizer, zero_grad, backward…)
	Frames      []Frame      // interned frames; FrameID indexes this table
	Stacks      [][]FrameID  // interned stacks, innermost frame first; Stacks[0] is the empty stack
	Threads     []Thread     // threads seen in a chrome trace; Event.Thread indexes this table
	Strings     []string     // interned metadata strings; Event.Meta indexes it, Strings[0] == ""
	Streams     []uint64     // raw stream handles; Event.Stream indexes it, Streams[0] == 0

	// Settings is allocator_settings as read (nil when absent).
	Settings *AllocatorSettings
	// Recording says how the file was recorded, deduced from what it holds.
	Recording Recording
	// Diagnostics are facts found while reading that limit what can be trusted.
	Diagnostics []Diagnostic
	// GradAccumulations are the torch::autograd::AccumulateGrad ops of a chrome
	// trace, one per trainable parameter per backward pass, oldest first.
	GradAccumulations []GradAccumulation
}

// GradAccumulation is one torch::autograd::AccumulateGrad op of a chrome
// trace: a gradient written into a parameter's .grad. Its input shape is the
// parameter's shape, so these size the parameters and gradients.
type GradAccumulation struct {
	TimeNS   int64  // start of the op
	Thread   uint16 // indexes Snapshot.Threads
	Elements int64  // elements of the parameter (product of Input Dims[0]); −1 when shapes were not recorded
	DType    string // Input type[0] ("float", "c10::BFloat16"); "" when not recorded
}

// Source describes the input file.
type Source struct {
	Path       string
	Format     Format
	Generation string // snapshot generation A–H or trace era (see the package documentation)
	Protocol   int    // pickle protocol, 0 for traces
	Gzipped    bool
	Bytes      int64 // size of the input as read (after gzip/base64 decoding)
	FileBytes  int64 // size of the file on disk (or bytes read from stdin)
	// Keys lists the top-level keys found, in file order.
	Keys []string
	// Distributed is the process's place in a distributed job, when the file
	// states it (a chrome trace's distributedInfo); nil otherwise.
	Distributed *Distributed
}

// Distributed is what a chrome trace's distributedInfo says of the process
// that wrote it (torch.profiler's _get_distributed_info).
type Distributed struct {
	Rank      int    `json:"rank"`                 // the process's global rank, 0 … WorldSize−1
	WorldSize int    `json:"world_size,omitempty"` // processes in the job; 0 when not stated
	Backend   string `json:"backend,omitempty"`    // "nccl", "gloo" … as written (untrusted text, at most 64 bytes)
}

// Device is one accelerator (or the CPU, for chrome traces).
type Device struct {
	ID   int
	Kind DeviceKind
	// Segments is the allocator state when the snapshot was taken (empty for traces).
	Segments []Segment
	// Events is the trace, oldest first.
	Events []Event
	// Baseline is memory allocated before the recording window began, when the
	// file states it (chrome traces: Total Allocated − Bytes of the first event).
	// -1 when unknown.
	Baseline int64
	// Preexisting lists, when the file itemises it, the memory allocated
	// before its first event (a memory timeline's PREEXISTING rows), each
	// with what the file says of it in Meta ("category:…"). They sum to
	// Baseline.
	Preexisting []Preexisting
	// Reserved is the reserved-memory curve of chrome traces: a point each time
	// "Total Reserved" changes. Empty for snapshots (replay segment events instead).
	Reserved []CounterPoint
	// CapacityBytes is the device memory size when the file states it (trace
	// deviceProperties.totalGlobalMem); 0 when unknown.
	CapacityBytes int64
	// Name is the device name when known ("Tesla V100-SXM2-32GB").
	Name string
	// ComputeMajor is the major version of the device's compute capability
	// when the file states it (a trace's deviceProperties computeMajor: 7 for
	// a V100, 9 for an H100 or an AMD Instinct); 0 when unknown. It says which
	// arithmetic the device has (bf16 from 8 on NVIDIA's).
	ComputeMajor int
}

// Preexisting is one allocation a file lists as made before its events.
type Preexisting struct {
	Size int64
	Meta uint32 // an interned string, as Event.Meta
}

// DeviceKind says what memory a Device holds.
type DeviceKind string

// Device kinds.
const (
	DeviceCUDA  DeviceKind = "cuda"
	DeviceROCm  DeviceKind = "rocm"
	DeviceCPU   DeviceKind = "cpu"
	DeviceXPU   DeviceKind = "xpu"
	DeviceOther DeviceKind = "other"
)

// CounterPoint is a value of a counter from the event at index Event onwards.
type CounterPoint struct {
	Event int // index into Device.Events of the first event with this value
	Value int64
}

// Segment is one cudaMalloc (or one expandable virtual range) at dump time.
type Segment struct {
	Device        int
	Address       uint64
	TotalSize     int64
	AllocatedSize int64
	ActiveSize    int64
	RequestedSize int64
	Stream        uint64
	Type          string // "large" or "small"
	PoolID        [2]int64
	IsExpandable  bool
	Stack         StackID
	Blocks        []Block
}

// Block is a piece of a segment: a live tensor, a cached free block, or a
// block freed while another stream still uses it.
type Block struct {
	Address       uint64
	Size          int64 // rounded, allocator-owned size
	RequestedSize int64 // what the caller asked for (stale on inactive blocks)
	State         BlockState
	Stack         StackID
}

// BlockState is the allocator's state of a block.
type BlockState uint8

// Block states as PyTorch writes them.
const (
	BlockInactive BlockState = iota
	BlockActiveAllocated
	BlockActivePendingFree
	BlockUnknown
)

// String returns the state as PyTorch spells it.
func (s BlockState) String() string {
	switch s {
	case BlockInactive:
		return "inactive"
	case BlockActiveAllocated:
		return "active_allocated"
	case BlockActivePendingFree:
		return "active_pending_free"
	}
	return "unknown"
}

// Action is what an allocator trace entry records.
type Action uint8

// The trace actions of the CUDA caching allocator, plus ActionUnknown for
// names a newer PyTorch may add.
const (
	ActionAlloc Action = iota
	ActionFreeRequested
	ActionFreeCompleted
	ActionSegmentAlloc
	ActionSegmentFree
	ActionSegmentMap
	ActionSegmentUnmap
	ActionSnapshot
	ActionOOM
	ActionUnknown
	numActions
)

var actionNames = [numActions]string{
	"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
	"segment_map", "segment_unmap", "snapshot", "oom", "unknown",
}

// String returns the action as PyTorch spells it.
func (a Action) String() string {
	if a < numActions {
		return actionNames[a]
	}
	return "unknown"
}

// Actions lists every action in a stable order, for reports.
func Actions() []Action {
	out := make([]Action, numActions)
	for i := range out {
		out[i] = Action(i)
	}
	return out
}

// ParseAction maps PyTorch's action name to an Action (ActionUnknown if new).
func ParseAction(s string) Action {
	for i, n := range actionNames {
		if n == s {
			return Action(i)
		}
	}
	return ActionUnknown
}

// NoTime marks an event or annotation without a timestamp.
const NoTime int64 = -1 << 63

// Event is one allocator trace entry (or one chrome-trace [memory] event).
// It is 40 bytes: a long trace holds millions.
type Event struct {
	// Addr is the block address (alloc/free_*), the segment address
	// (segment_*), 0 for snapshot; for oom it holds the device's free bytes,
	// as PyTorch's C++ does (use DeviceFree).
	Addr uint64
	// Size is the requested size for alloc/free_*, bytes for segment_*, the
	// rounded failed size for oom, total active bytes for snapshot.
	Size int64
	// TimeNS is nanoseconds on the file's clock (epoch for snapshots), or NoTime.
	TimeNS int64
	Stack  StackID
	// Meta indexes Snapshot.Strings: user_metadata / compile_context / the
	// owning op name of a trace event; 0 is "".
	Meta uint32
	// Stream indexes Snapshot.Streams (the raw cudaStream_t values).
	Stream uint16
	// Thread indexes Snapshot.Threads (chrome traces), 0 when unknown.
	Thread uint16
	Action Action
}

// DeviceFree returns cudaMemGetInfo's free bytes at an oom entry (0 otherwise).
func (e *Event) DeviceFree() int64 {
	if e.Action == ActionOOM {
		return int64(e.Addr)
	}
	return 0
}

// HasTime reports whether the event carries a timestamp.
func (e *Event) HasTime() bool { return e.TimeNS != NoTime }

// Annotation is a named time range on a device (or on all devices: Device -1).
type Annotation struct {
	Name    string
	Device  int
	StartNS int64 // NoTime if the range began before recording
	EndNS   int64 // NoTime if it had not ended when the file was written
	// Thread indexes Snapshot.Threads for trace spans, 0 otherwise.
	Thread uint16
	// Kind is what the reader knows of the range; analysis derives phases from it.
	Kind AnnotationKind
}

// AnnotationKind classifies annotations the readers recognise.
type AnnotationKind string

// Annotation kinds.
const (
	AnnotationUser     AnnotationKind = "user"      // any record_function range
	AnnotationStep     AnnotationKind = "step"      // ProfilerStep#N
	AnnotationOptStep  AnnotationKind = "optimizer" // Optimizer.step#…
	AnnotationZeroGrad AnnotationKind = "zero_grad" // Optimizer.zero_grad#…
	AnnotationData     AnnotationKind = "data"      // enumerate(DataLoader)#…
	AnnotationForward  AnnotationKind = "forward"   // forward spans from traces / ## forward ##
	AnnotationBackward AnnotationKind = "backward"  // autograd engine spans from traces
)

// Thread is a CPU thread of a chrome trace.
type Thread struct {
	PID, TID string
	Name     string
	// Autograd marks autograd engine threads (pt_autograd_N, or threads that
	// run evaluate_function spans and not the main loop).
	Autograd bool
}

// FrameID indexes Snapshot.Frames.
type FrameID uint32

// StackID indexes Snapshot.Stacks; 0 is the empty stack.
type StackID uint32

// Frame is one stack frame. Line is −1 when PyTorch wrote 2^64−1 (unknown).
type Frame struct {
	Filename string
	Line     int64
	Name     string
	// FX fields (augment_with_fx_traces=True, PyTorch ≥ 2.10); empty otherwise.
	FXNodeOp, FXNodeName, FXNodeTarget, FXOriginalTrace string
}

// AllocatorSettings is allocator_settings of PyTorch ≥ 2.3.
type AllocatorSettings struct {
	AllocConf            string // PYTORCH_CUDA_ALLOC_CONF
	MaxSplitSize         int64  // −1 when unlimited
	GCThreshold          float64
	ExpandableSegments   bool
	TraceAllocMaxEntries int64 // 0 when not stated
	TraceAllocOverflowed bool
	// Other holds every other key, rendered as text.
	Other map[string]string
}

// Recording says how the allocator history was recorded.
type Recording string

// Recording modes, deduced from what the file holds.
const (
	RecordingNone           Recording = "none"            // no trace entries, no block frames
	RecordingState          Recording = "state"           // block stacks only (enabled="state" or 2.0 default)
	RecordingPython         Recording = "python-stacks"   // trace with Python frames
	RecordingCPP            Recording = "cpp-stacks"      // trace with C++ frames (stacks="all")
	RecordingNoStacks       Recording = "no-stacks"       // trace entries without frames
	RecordingProfiler       Recording = "profiler"        // chrome trace memory events
	RecordingProfilerStacks Recording = "profiler-stacks" // chrome trace with python_function or Call stack
)

// Diagnostic is a fact found while reading that limits what can be trusted.
type Diagnostic struct {
	Kind    string // ring_buffer_overflow, no_trace, no_frames, unmatched_frees, bytes_only, skipped_keys…
	Device  int    // −1 when not device-specific
	Message string
}

// StackOf returns the frames of a stack, innermost first.
func (s *Snapshot) StackOf(id StackID) []FrameID {
	if int(id) < len(s.Stacks) {
		return s.Stacks[id]
	}
	return nil
}

// Device returns the device with the given ID, or nil.
func (s *Snapshot) Device(id int) *Device {
	for _, d := range s.Devices {
		if d.ID == id {
			return d
		}
	}
	return nil
}

// Diag appends a diagnostic.
func (s *Snapshot) Diag(kind string, device int, msg string) {
	s.Diagnostics = append(s.Diagnostics, Diagnostic{Kind: kind, Device: device, Message: msg})
}
