package estimate

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// ParseCount reads a parameter count: "7B", "6.7B", "124M", "350k",
// "1.2T", or plain digits ("6738415616", "6,738,415,616", "6_738_415_616").
// Suffixes are decimal (B = 10⁹), as model names use them.
func ParseCount(s string) (int64, error) {
	t := strings.NewReplacer(",", "", "_", "", " ", "").Replace(strings.TrimSpace(s))
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult, t = 1e3, t[:n-1]
		case 'm', 'M':
			mult, t = 1e6, t[:n-1]
		case 'b', 'B', 'g', 'G':
			mult, t = 1e9, t[:n-1]
		case 't', 'T':
			mult, t = 1e12, t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || v <= 0 || v*mult > 1e15 {
		return 0, fmt.Errorf("%q: want a parameter count like 7B, 124M or 6738415616", s)
	}
	return int64(math.Round(v * mult)), nil
}

// ParseSize reads a memory size: "24GiB", "80GB", "24g", "16384MiB".
// GiB/MiB/KiB and a bare G/M/K are binary; GB/MB/KB are decimal (10⁹),
// as the guide writes them.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), " ", ""))
	units := []struct {
		suffix string
		mult   float64
	}{{"tib", 1 << 40}, {"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10},
		{"tb", 1e12}, {"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3},
		{"t", 1 << 40}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}, {"b", 1}}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			mult, t = u.mult, strings.TrimSuffix(t, u.suffix)
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || v <= 0 || v*mult > 1<<50 {
		return 0, fmt.Errorf("%q: want a size like 24GiB or 80GB", s)
	}
	return int64(v * mult), nil
}

// GPU is a device whose memory a plan must fit in.
type GPU struct {
	Name          string `json:"name"`
	CapacityBytes int64  `json:"capacity_bytes"`
	// UsableBytes is what a plan may fill: the capacity less UsableMargin
	// for the CUDA context, cuBLAS workspaces and allocator slack, which
	// PyTorch's allocated bytes do not count.
	UsableBytes int64 `json:"usable_bytes"`
}

// UsableMargin is the share of a GPU's memory an estimate keeps free.
const UsableMargin = 0.05

// gpuPresets are GPUs by name, with their nominal memory (the "80GB" of an
// A100 80GB is 80 GiB of HBM; the total CUDA reports is 1–3% less, which
// the usable margin covers).
var gpuPresets = map[string]int64{
	"t4": 16 << 30, "v100-16gb": 16 << 30, "v100-32gb": 32 << 30, "p100": 16 << 30,
	"a10": 24 << 30, "a10g": 24 << 30, "l4": 24 << 30, "rtx3090": 24 << 30, "rtx4090": 24 << 30,
	"rtx5090": 32 << 30, "a6000": 48 << 30, "l40s": 48 << 30, "a40": 48 << 30,
	"a100-40gb": 40 << 30, "a100-80gb": 80 << 30, "h100-80gb": 80 << 30, "h100-94gb": 94 << 30,
	"h200-141gb": 141 << 30, "mi250x": 128 << 30, "mi300x": 192 << 30, "b200": 180 << 30,
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
	if n, ok := gpuPresets[k]; ok {
		return newGPU(strings.ToUpper(k), n), nil
	}
	n, err := ParseSize(s)
	if err != nil {
		return nil, fmt.Errorf("%q: want a GPU (%s) or a size like 24GiB", s, strings.Join(GPUNames(), ", "))
	}
	return newGPU(strings.TrimSpace(s), n), nil
}

func newGPU(name string, capacity int64) *GPU {
	return &GPU{Name: name, CapacityBytes: capacity, UsableBytes: int64(float64(capacity) * (1 - UsableMargin))}
}

// NewGPU describes a device of a known capacity (a snapshot's device).
func NewGPU(name string, capacity int64) *GPU { return newGPU(name, capacity) }
