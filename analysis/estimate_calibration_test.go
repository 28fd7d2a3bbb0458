package analysis

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis/estimate"
	"github.com/torchmem/torchmem/analysis/whatif"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/internal/snapshottest"
)

// measuredSetup is one line of recorded/estimate/measured.jsonl: a
// training (or inference) setup of a transformers model and the peak
// torch.cuda.max_memory_allocated of each of its steps (reset before each),
// measured by gpu/measure_matrix.py.
type measuredSetup struct {
	Name          string  `json:"name"`
	Mode          string  `json:"mode"` // fp32, amp (fp32 weights, bf16 autocast), bf16, infer (bf16, no_grad)
	Checkpointing bool    `json:"checkpointing"`
	Attention     string  `json:"attention"`
	Batch         int64   `json:"batch"`
	Seq           int64   `json:"seq"`
	LoRARank      int64   `json:"lora_rank"`
	Optimizer     string  `json:"optimizer"`
	Parameters    int64   `json:"parameter_count"`
	Trainable     int64   `json:"trainable_count"`
	ParamBytes    int64   `json:"parameters_bytes"`
	StateBytes    int64   `json:"optimizer_state_bytes"`
	Peaks         []int64 `json:"peak_bytes_per_step"`
	GPU           string  `json:"gpu"`
	Torch         string  `json:"torch"`
	Snapshot      *struct {
		File  string  `json:"file"`
		Batch int64   `json:"batch"`
		Seq   int64   `json:"seq"`
		Peaks []int64 `json:"peak_bytes_per_step"`
	} `json:"snapshot"`
}

// peak is the setup's peak over its steps.
func (m measuredSetup) peak() int64 {
	var p int64
	for _, v := range m.Peaks {
		p = max(p, v)
	}
	return p
}

// readMeasured reads recorded/estimate/measured.jsonl.
func readMeasured(t *testing.T) (dir string, rows []measuredSetup) {
	t.Helper()
	path := snapshottest.SharedFile(t, "recorded/estimate", "measured.jsonl")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m measuredSetup
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rows = append(rows, m)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no setups", path)
	}
	return filepath.Dir(path), rows
}

// inputsOf is the estimate's description of a measured setup: its
// config.json and the program's choices (measure_matrix.py: AdamW or SGD
// with PyTorch's defaults, LoRA on every linear layer of the blocks,
// transformers' gradient checkpointing, an H200).
func inputsOf(t *testing.T, dir string, m measuredSetup) estimate.Inputs {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, m.Name+".config.json"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := estimate.ParseHFConfig(data)
	if err != nil {
		t.Fatalf("%s: %v", m.Name, err)
	}
	gpu, _ := estimate.ParseGPU("H200")
	s := estimate.Setup{Precision: "fp32", Optimizer: m.Optimizer, Batch: m.Batch, Seq: m.Seq, Attention: m.Attention, LoRARank: m.LoRARank}
	switch m.Mode {
	case "amp":
		s.AMP = true
	case "bf16", "infer":
		s.Precision = "bf16"
	}
	if m.Checkpointing {
		s.Checkpointing = "full"
	}
	return estimate.Inputs{Model: estimate.Model{Arch: a}, Setup: s, GPU: gpu}
}

// TestEstimateCalibrated: the estimate from each measured setup's
// config.json is within ±10% of its measured peak and never under it by
// more than 5%; its parameter and optimizer-state bytes are exact.
func TestEstimateCalibrated(t *testing.T) {
	dir, rows := readMeasured(t)
	for _, m := range rows {
		t.Run(m.Name, func(t *testing.T) {
			r, err := estimate.Compute(inputsOf(t, dir, m))
			if err != nil {
				t.Fatal(err)
			}
			if r.ParameterCount+r.TrainableParameterCount*boolInt(m.LoRARank > 0) != m.Parameters || r.ParametersBytes != m.ParamBytes {
				t.Errorf("parameters %d (%d B), measured %d (%d B)", r.ParameterCount, r.ParametersBytes, m.Parameters, m.ParamBytes)
			}
			if r.OptimizerStateBytes != m.StateBytes {
				t.Errorf("optimizer state %d B, measured %d B", r.OptimizerStateBytes, m.StateBytes)
			}
			peak := m.peak()
			e := float64(r.TotalBytes-peak) / float64(peak)
			t.Logf("%s: measured %d, estimate %d (%+.1f%%) in %s", m.Name, peak, r.TotalBytes, 100*e, r.PeakPhase)
			if e > 0.10 || e < -0.05 {
				t.Errorf("estimate %d, measured %d: %+.1f%% (want within -5%% and +10%%)", r.TotalBytes, peak, 100*e)
			}
		})
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestProjectionCalibrated: each measured setup's small snapshot (taken
// in the same process, at a smaller batch and sequence) projected to the
// setup's batch and sequence is within ±10% of the setup's measured peak;
// the snapshot's own peak is the one measured at its size.
func TestProjectionCalibrated(t *testing.T) {
	_, rows := readMeasured(t)
	n := 0
	for _, m := range rows {
		if m.Snapshot == nil {
			continue
		}
		n++
		t.Run(m.Name, func(t *testing.T) {
			s := analysistest.OpenShared(t, "recorded/estimate", m.Snapshot.File)
			at := whatif.Size{Batch: m.Snapshot.Batch, Seq: m.Snapshot.Seq}
			r, err := Project(s, DefaultOptions(), at, whatif.Size{Batch: m.Batch, Seq: m.Seq}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var small int64
			for _, p := range m.Snapshot.Peaks {
				small = max(small, p)
			}
			if r.Measured.PeakBytes != small {
				t.Errorf("snapshot's peak %d, measured at its size %d", r.Measured.PeakBytes, small)
			}
			peak := m.peak()
			e := float64(r.TotalBytes-peak) / float64(peak)
			t.Logf("%s from batch %d × seq %d: projected %d, measured %d (%+.1f%%) in %s", m.Name, at.Batch, at.Seq, r.TotalBytes, peak, 100*e, r.PeakPhase)
			if e > 0.10 || e < -0.10 {
				t.Errorf("projected %d, measured %d: %+.1f%%", r.TotalBytes, peak, 100*e)
			}
		})
	}
	if n != 2 {
		t.Errorf("%d setups with a snapshot, want the 2 of recorded/estimate", n)
	}
}

// TestProjectionCS336Lengths: the cs336 'medium' model trained at 128 and
// 256 tokens (fp32, batch 4) projected to 2×, 4× and 8× its sequence. Each
// run projected to the other's length matches its measured peak within
// 1%, and projected to 512 and 1024 tokens the two runs agree with each
// other within 1%: what either counts as seq² is what grows with seq². (The
// same model's runs at 512 and 1024 tokens that the source repository
// holds, peaking at 12,435,476,996 B and 24,211,100,164 B, ran under bf16
// autocast — their q/k/v projections allocate a 2 MiB bf16 copy of each
// 1024×1024 weight and return bf16 — so they measure another precision
// and are not a check of these fp32 projections.)
func TestProjectionCS336Lengths(t *testing.T) {
	peaks := map[int64]int64{}
	proj := map[int64]map[int64]int64{}
	for _, seq := range []int64{128, 256} {
		s := analysistest.OpenShared(t, "snapshots", fmt.Sprintf("wedsonlin_medium_%d_training.pickle", seq))
		proj[seq] = map[int64]int64{}
		for _, to := range []int64{128, 256, 512, 1024} {
			r, err := Project(s, DefaultOptions(), whatif.Size{Batch: 4, Seq: seq}, whatif.Size{Seq: to}, nil)
			if err != nil {
				t.Fatal(err)
			}
			proj[seq][to] = r.TotalBytes
			if to == seq {
				peaks[seq] = r.Measured.PeakBytes
			}
		}
	}
	for _, tc := range []struct{ from, to int64 }{{128, 256}, {256, 128}} {
		got, want := proj[tc.from][tc.to], peaks[tc.to]
		e := float64(got-want) / float64(want)
		t.Logf("seq %d → %d: projected %d, measured %d (%+.2f%%)", tc.from, tc.to, got, want, 100*e)
		if math.Abs(e) > 0.01 {
			t.Errorf("seq %d → %d: projected %d, measured %d (%+.2f%%)", tc.from, tc.to, got, want, 100*e)
		}
	}
	for _, to := range []int64{512, 1024} {
		a, b := proj[128][to], proj[256][to]
		e := float64(a-b) / float64(b)
		t.Logf("seq %d: from 128 %d, from 256 %d (%+.2f%%)", to, a, b, 100*e)
		if math.Abs(e) > 0.01 {
			t.Errorf("seq %d: projected %d from 128 tokens, %d from 256 (%+.2f%% apart)", to, a, b, 100*e)
		}
	}
}

// TestEstimateCS336Lengths: the estimate from the cs336 'medium' model's
// facts (testdata/estimate/configs/cs336-medium.json: fp32, batch 4, its
// hand-written attention counted as eager, its per-parameter AdamW loop)
// at the four lengths it was measured at is within 10% of each peak: 128
// and 256 tokens are the snapshots in ../shared (fp32); 512 and 1024 are
// the same model's runs in the source repository (12,435,476,996 B and
// 24,211,100,164 B), which ran under bf16 autocast (their q/k/v
// projections allocate a 2 MiB bf16 copy of each 1024×1024 weight and
// return bf16), so they are estimated with AMP. A hand-written model keeps
// more than transformers' code (its own softmax keeps two seq² tensors,
// x·sigmoid(x) one more MLP tensor, its own log-softmax more logits): the
// estimate is 1.5–9% under here.
func TestEstimateCS336Lengths(t *testing.T) {
	a := loadArch(t, "cs336-medium.json")
	measured := map[int64]int64{512: 12_435_476_996, 1024: 24_211_100_164}
	for _, seq := range []int64{128, 256} {
		s := analysistest.OpenShared(t, "snapshots", fmt.Sprintf("wedsonlin_medium_%d_training.pickle", seq))
		measured[seq] = Analyze(s, DefaultOptions()).Devices[0].Peak.AllocatedBytes
	}
	for _, seq := range []int64{128, 256, 512, 1024} {
		setup := estimate.Setup{Precision: "fp32", AMP: seq > 256, Optimizer: "adamw-loop", Batch: 4, Seq: seq, Attention: "eager"}
		r, err := estimate.Compute(estimate.Inputs{Model: estimate.Model{Arch: a}, Setup: setup})
		if err != nil {
			t.Fatal(err)
		}
		e := float64(r.TotalBytes-measured[seq]) / float64(measured[seq])
		t.Logf("seq %d: estimate %d in %s, measured %d (%+.1f%%)", seq, r.TotalBytes, r.PeakPhase, measured[seq], 100*e)
		if math.Abs(e) > 0.10 {
			t.Errorf("seq %d: estimate %d, measured %d (%+.1f%%)", seq, r.TotalBytes, measured[seq], 100*e)
		}
	}
}

// TestReadmeEstimateTable: the README's table of measured setups is what
// the estimate computes now (rows between the estimate-table markers).
func TestReadmeEstimateTable(t *testing.T) {
	dir, rows := readMeasured(t)
	var b strings.Builder
	b.WriteString("| setup | weights, compute | batch × seq | measured peak | estimate | error | estimate's peak |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---|\n")
	modes := map[string]string{"fp32": "fp32", "amp": "fp32, bf16 autocast (AMP)", "bf16": "bf16", "infer": "bf16, inference"}
	for _, m := range rows {
		r, err := estimate.Compute(inputsOf(t, dir, m))
		if err != nil {
			t.Fatal(err)
		}
		setup := modes[m.Mode]
		if m.Checkpointing {
			setup += ", checkpointing"
		}
		if m.LoRARank > 0 {
			setup += fmt.Sprintf(", LoRA r=%d", m.LoRARank)
		}
		if m.Attention == "eager" {
			setup += ", eager attention"
		}
		if m.Optimizer == "sgd" {
			setup += ", SGD"
		}
		peak := m.peak()
		gib := func(b int64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }
		fmt.Fprintf(&b, "| %s | %s | %d × %d | %s | %s | %+.1f%% | %s |\n", m.Name, setup, m.Batch, m.Seq,
			gib(peak), gib(r.TotalBytes), 100*float64(r.TotalBytes-peak)/float64(peak), r.PeakPhase)
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const start, end = "<!-- estimate-table -->\n", "<!-- /estimate-table -->"
	i, j := strings.Index(string(readme), start), strings.Index(string(readme), end)
	if i < 0 || j < i {
		t.Fatalf("README.md: no %q … %q section", start, end)
	}
	if got := string(readme[i+len(start) : j]); got != b.String() {
		t.Errorf("README.md's estimate table differs from the estimate; want:\n%s", b.String())
	}
}
