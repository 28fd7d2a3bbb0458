package estimate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/torchmem/torchmem/internal/units"
)

// ParseSize reads a GPU's memory in the size grammar of every flag
// (units.ParseBytes: "24GiB", "24g", "16384MiB" binary, "80GB" decimal),
// more than zero and at most 1 PiB.
func ParseSize(s string) (int64, error) {
	n, err := units.ParseBytes(s)
	if err != nil || n <= 0 || n > 1<<50 {
		return 0, fmt.Errorf("%q: want a size like 24GiB or 80GB", s)
	}
	return n, nil
}

// GPU is a device whose memory a plan must fit in.
type GPU struct {
	Name string `json:"name"`
	// CapacityBytes is the memory the driver reports (nvidia-smi's total,
	// torch.cuda.mem_get_info's): less than the nominal "80GB".
	CapacityBytes int64 `json:"capacity_bytes"`
	// UsableBytes is what a peak of allocated memory may reach: the
	// capacity less the CUDA context and a share for the allocator's slack
	// (UsableReason says how much of each).
	UsableBytes  int64  `json:"usable_bytes"`
	UsableReason string `json:"usable_reason"`
	// Arch is the GPU's generation when known (hopper, ampere, …): it
	// decides cuBLAS's workspace size.
	Arch string `json:"arch,omitempty"`
}

// ContextBytes is what a process's CUDA context and PyTorch's kernels
// take of the device outside the caching allocator: about half a GiB
// with CUDA's lazy module loading (not measured here; it varies with the
// CUDA version and the kernels a program loads).
const ContextBytes = 512 << 20

// UsableMargin is the share of the rest an estimate keeps for the caching
// allocator's slack: memory reserved in blocks that no tensor fills. In
// the measured runs (recorded/estimate, no memory pressure) reserved
// memory exceeded the allocated peak by 3–46%, median 12%; under pressure
// the allocator releases its free cached blocks and retries before it
// fails, so what a run needs beyond its peak is less — fragmentation —
// which this share stands for. An estimate within it is tight.
const UsableMargin = 0.05

// gpuPreset is a GPU by name: the memory its driver reports, in MiB.
type gpuPreset struct {
	mib  int64
	arch string
}

// gpuPresets are GPUs by name. Totals are what nvidia-smi reports
// (H100 81,559 MiB and H200 143,771 MiB seen on the measuring machines;
// A100, A10, L4, L40S, T4 as published by a cloud provider's survey of its
// GPUs; the others from public nvidia-smi/rocm-smi outputs).
var gpuPresets = map[string]gpuPreset{
	"t4": {15360, "turing"}, "v100-16gb": {16160, "volta"}, "v100-32gb": {32480, "volta"}, "p100": {16280, "pascal"},
	"a10": {23028, "ampere"}, "a10g": {23028, "ampere"}, "l4": {23034, "ada"}, "rtx3090": {24576, "ampere"},
	"rtx4090": {24564, "ada"}, "rtx5090": {32607, "blackwell"}, "a6000": {49140, "ampere"}, "l40s": {46068, "ada"},
	"a40": {46068, "ampere"}, "a100-40gb": {40960, "ampere"}, "a100-80gb": {81920, "ampere"},
	"h100-80gb": {81559, "hopper"}, "h100-94gb": {95830, "hopper"}, "h200-141gb": {143771, "hopper"},
	"mi250x": {65520, "cdna2"}, "mi300x": {196592, "cdna3"}, "b200": {183359, "blackwell"},
}

// GPUNames lists the preset names, sorted.
func GPUNames() []string {
	out := make([]string, 0, len(gpuPresets))
	for k := range gpuPresets {
		out = append(out, strings.ToUpper(k))
	}
	sort.Strings(out)
	return out
}

// ParseGPU reads --gpu: a preset name (case-insensitive, "A100-80GB",
// "h100") or a size ("24GiB").
func ParseGPU(s string) (*GPU, error) {
	k := strings.ToLower(strings.TrimSpace(s))
	k = strings.ReplaceAll(strings.ReplaceAll(k, " ", ""), "_", "-")
	if k == "h100" || k == "h100-sxm" || k == "h100-pcie" {
		k = "h100-80gb"
	}
	if k == "h200" {
		k = "h200-141gb"
	}
	if k == "a100" {
		k = "a100-80gb"
	}
	if p, ok := gpuPresets[k]; ok {
		g := newGPU(strings.ToUpper(k), p.mib<<20)
		g.Arch = p.arch
		return g, nil
	}
	n, err := ParseSize(s)
	if err != nil {
		return nil, fmt.Errorf("%q: want a GPU (%s) or a size like 24GiB", s, strings.Join(GPUNames(), ", "))
	}
	return newGPU(strings.TrimSpace(s), n), nil
}

func newGPU(name string, capacity int64) *GPU {
	rest := max(capacity-ContextBytes, 0)
	usable := int64(float64(rest) * (1 - UsableMargin))
	return &GPU{Name: name, CapacityBytes: capacity, UsableBytes: usable,
		UsableReason: fmt.Sprintf("%s − %s CUDA context − %.0f%% of the rest (allocator slack)",
			formatGiB(capacity), formatGiB(ContextBytes), 100*UsableMargin)}
}

// formatGiB writes bytes in GiB with two decimals.
func formatGiB(b int64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }

// NewGPU describes a device of a known capacity (a snapshot's device).
func NewGPU(name string, capacity int64) *GPU { return newGPU(name, capacity) }
