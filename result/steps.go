package result

import (
	"strconv"
	"strings"
)

// StepSource says where the step boundaries of a device came from.
type StepSource string

// Step sources, best first. Annotations, optimizer steps and a loop frame
// are structure the program showed; the period of allocation sites is a
// guess (leak findings on such steps are medium confidence at most).
const (
	// StepsFromAnnotations: ProfilerStep#N ranges, or a trace's
	// Optimizer.step ranges or forward spans.
	StepsFromAnnotations StepSource = "annotations"
	// StepsFromOptimizer: the end of every optimizer step (its frames or
	// its Optimizer.step annotation).
	StepsFromOptimizer StepSource = "optimizer"
	// StepsFromLoop: a frame outside the model whose line returns to the
	// start of its loop body at every iteration (the loop that runs the
	// model, seen in the Python stacks).
	StepsFromLoop StepSource = "loop"
	// StepsFromPeriod: a repeating pattern of the allocations — the
	// sequence of allocation sites, or, without Python frames, a training
	// step's backward runs or parameter sweeps (patternSteps).
	StepsFromPeriod StepSource = "period"
	// StepsNone: nothing tells steps apart.
	StepsNone StepSource = "none"
)

// StepPlan is how one device's events divide into steps: computed once per
// device (History.Steps) and read by phases, leak detection, diff and the
// roll-up. Part of the JSON (DeviceResult.Steps).
type StepPlan struct {
	Source StepSource `json:"source"`
	// Evidence says in words where the boundaries came from ("ProfilerStep#N
	// annotations", "the loop at eval.py:38 evaluate", …).
	Evidence string `json:"evidence"`
	// Site is the loop frame (file:line of the loop body's first line and
	// the function) when Source is "loop", or when a loop's iterations
	// follow the optimizer steps (Source "optimizer").
	Site string `json:"site,omitempty"`
	// FirstEvents is the first event index of each step, in order.
	FirstEvents []int `json:"first_events"`
	// Spans are the steps with their events and memory.
	Spans []StepSpan `json:"spans"`
}

// StepSpan is one step of a device: its events and memory.
type StepSpan struct {
	Step       int   `json:"step"`
	StartEvent int   `json:"start_event"`
	EndEvent   int   `json:"end_event"`
	StartUS    int64 `json:"start_us" null:"0"` // 0 (null): the file has no times
	EndUS      int64 `json:"end_us" null:"0"`
	// StartAllocatedBytes is the allocated memory just before the step's
	// first event; EndAllocatedBytes after its last.
	StartAllocatedBytes int64 `json:"start_allocated_bytes"`
	EndAllocatedBytes   int64 `json:"end_allocated_bytes"`
	PeakAllocatedBytes  int64 `json:"peak_allocated_bytes"`
	PeakEvent           int   `json:"peak_event"`
	// Complete is false for a trailing part that the recording cut short
	// (events after the last optimizer step).
	Complete bool `json:"complete"`
}

// HighConfidence reports whether the boundaries came from structure the
// program showed (annotations, optimizer steps, a loop frame), which a
// high-confidence leak finding needs.
func (p *StepPlan) HighConfidence() bool {
	return p.Source == StepsFromAnnotations || p.Source == StepsFromOptimizer || p.Source == StepsFromLoop
}

// StepNumbers names a set of step numbers in order, runs joined: "step 3",
// "steps 1–8", "steps 1–3, 5, 7–8".
func StepNumbers(nums []int) string {
	if len(nums) == 0 {
		return "no step"
	}
	var parts []string
	for i := 0; i < len(nums); {
		j := i
		for j+1 < len(nums) && nums[j+1] == nums[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, strconv.Itoa(nums[i]))
		default:
			parts = append(parts, strconv.Itoa(nums[i])+"–"+strconv.Itoa(nums[j]))
		}
		i = j + 1
	}
	if len(nums) == 1 {
		return "step " + parts[0]
	}
	return "steps " + strings.Join(parts, ", ")
}

// MarshalJSON writes the step, its times null when the file has none.
func (s StepSpan) MarshalJSON() ([]byte, error) {
	type plain StepSpan
	return marshalNulls(plain(s))
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (s *StepSpan) UnmarshalJSON(b []byte) error {
	type plain StepSpan
	return unmarshalNulls(b, (*plain)(s))
}

// NoStep is the step of an event outside every ProfilerStep#N range.
const NoStep = -1
