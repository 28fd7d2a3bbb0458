package analysis

import (
	"fmt"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/result"
)

// Fixtures of the same patterns in torch.profiler's chrome traces: op
// spans (cpu_op), Python frames and module spans (python_function, with
// with_stack=True) and [memory] events, as prof.export_chrome_trace writes
// them. The shapes: module frames (Python frames and nn.Module spans), user
// frames (Python frames without module spans), C++ frames (op spans only:
// with_stack=False) and no frames (memory events alone).

// traceFix writes a chrome trace of one CPU thread on device 0.
type traceFix struct {
	kind    string
	devType int // the [memory] events' Device Type: 1 CUDA, 6 ROCm (HIP)
	ev      []string
	ts      int64
	total   int64
	addr    uint64
}

func newTraceFix(kind string, baseline int64) *traceFix {
	return &traceFix{kind: kind, devType: 1, ts: 1_000_000, total: baseline, addr: 0x7f0000000000}
}

// in runs fn inside a span of cat and name (skipped where the shape does
// not record that kind of span), 10 µs per nesting level on each side.
func (f *traceFix) in(cat, name string, fn func()) {
	record := f.kind == "module frames" || cat == "cpu_op" && f.kind != "no frames" ||
		cat == "python_function" && f.kind == "user frames" && !strings.HasPrefix(name, "nn.Module: ") || cat == "user_annotation" && f.kind != "no frames"
	start := f.ts
	f.ts += 10
	fn()
	f.ts += 10
	if record {
		f.ev = append(f.ev, fmt.Sprintf(`{"ph": "X", "cat": %q, "name": %q, "pid": 7, "tid": 7, "ts": %d, "dur": %d, "args": {}}`, cat, name, start, f.ts-start))
	}
}

// alloc records a [memory] allocation of n bytes and returns its address.
func (f *traceFix) alloc(n int64) uint64 {
	a := f.addr
	f.addr += uint64(n+(1<<21)) &^ (1<<20 - 1)
	f.mem(a, n)
	return a
}

// free records the free of n bytes at a.
func (f *traceFix) free(a uint64, n int64) { f.mem(a, -n) }

func (f *traceFix) mem(a uint64, n int64) {
	f.ts += 2
	f.total += n
	f.ev = append(f.ev, fmt.Sprintf(`{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 7, "tid": 7, "ts": %d, "args": {"Total Reserved": %d, "Total Allocated": %d, "Bytes": %d, "Addr": %d, "Device Id": 0, "Device Type": %d}}`,
		f.ts, 1<<36, f.total, n, a, f.devType))
	f.ts += 2
}

func (f *traceFix) json() []byte {
	return []byte(`{"schemaVersion": 1, "profile_memory": 1, "with_stack": 1, "traceEvents": [` + strings.Join(f.ev, ",\n") + `], "traceName": "fix.json"}`)
}

// TestAttentionInTraces: eager attention under a module named for it (or
// in a function named for it), in a trace: the score matrix and its mask,
// softmax and dropout are ∝ batch·seq² — the what-if's attention part, and
// the fused-attention suggestion follows — while the q/k/v projections,
// the casts and the copies are not. Without Python frames or module spans
// nothing says attention.
func TestAttentionInTraces(t *testing.T) {
	for _, kind := range frameKinds {
		for _, seq := range []int64{512, 2048} {
			t.Run(fmt.Sprintf("%s, seq %d", kind, seq), func(t *testing.T) {
				const batch, heads, hidden = 4, 8, 512
				f := newTraceFix(kind, 256<<20)
				tok := int64(batch) * seq * hidden * 2
				scores := int64(batch*heads) * seq * seq * 2
				var quad int64
				f.in("python_function", "train.py(30): <module>", func() {
					f.in("python_function", "nn.Module: GPT_0", func() {
						f.in("python_function", "model.py(90): forward", func() {
							f.in("python_function", "nn.Module: CausalSelfAttention_0", func() {
								f.in("python_function", "model.py(60): attention", func() {
									var qkv, cast []uint64
									for range 3 {
										f.in("cpu_op", "aten::linear", func() {
											f.in("cpu_op", "aten::to", func() {
												f.in("cpu_op", "aten::_to_copy", func() { cast = append(cast, f.alloc(tok)) })
											})
											f.in("cpu_op", "aten::addmm", func() { qkv = append(qkv, f.alloc(tok)) })
										})
									}
									var kept []uint64
									for _, op := range []string{"aten::bmm", "aten::masked_fill", "aten::_softmax", "aten::native_dropout"} {
										outer := map[string]string{"aten::bmm": "aten::matmul", "aten::_softmax": "aten::softmax", "aten::native_dropout": "aten::dropout", "aten::masked_fill": "aten::masked_fill"}[op]
										f.in("cpu_op", outer, func() {
											f.in("cpu_op", op, func() {
												if op == "aten::masked_fill" {
													f.in("cpu_op", "aten::clone", func() { kept = append(kept, f.alloc(scores)) })
													return
												}
												kept = append(kept, f.alloc(scores))
											})
										})
										quad += scores
									}
									f.in("cpu_op", "aten::matmul", func() { // the output, probabilities × v: per token
										f.in("cpu_op", "aten::bmm", func() { kept = append(kept, f.alloc(tok)) })
									})
									f.in("cpu_op", "aten::contiguous", func() { // a copy of v: per token
										f.in("cpu_op", "aten::clone", func() { kept = append(kept, f.alloc(tok)) })
									})
									for _, a := range cast {
										f.free(a, tok)
									}
									_ = qkv
									_ = kept
								})
							})
						})
					})
				})
				snap := analysistest.ReadJSON(t, f.json())
				r := Analyze(snap, DefaultOptions())
				if r.WhatIf == nil {
					t.Fatal("no what-if")
				}
				want := quad
				if kind == "C++ frames" || kind == "no frames" {
					want = 0
				}
				if got := r.WhatIf.AttentionBytes; got != want {
					t.Errorf("∝ seq² %d B, want the scores, mask, softmax and dropout: %d", got, want)
				}
				found := false
				for _, sg := range r.Suggestions {
					found = found || sg.ID == "flash_attention"
				}
				if found != (want > 0) {
					t.Errorf("flash_attention suggested %v, want %v", found, want > 0)
				}
			})
		}
	}
}

// inArgs is in with the span's args (a JSON object).
func (f *traceFix) inArgs(cat, name, args string, fn func()) {
	n := len(f.ev)
	f.in(cat, name, fn)
	if len(f.ev) > n && strings.Contains(f.ev[len(f.ev)-1], `"name": `+fmt.Sprintf("%q", name)) {
		f.ev[len(f.ev)-1] = strings.Replace(f.ev[len(f.ev)-1], `"args": {}`, `"args": `+args, 1)
	}
}

// TestAutocastCopiesInTraces: in a trace, autocast's weight copies are the
// aten::_to_copy allocations inside a compute op (aten::linear), half an
// fp32 weight's bytes (the weights the AccumulateGrad ops name), freed at
// the autocast region's exit: autocast_cache — never input, activation or
// temporary, and not ∝ seq². Without op spans nothing tells them apart.
func TestAutocastCopiesInTraces(t *testing.T) {
	for _, kind := range frameKinds {
		for _, layers := range []int{2, 6} {
			t.Run(fmt.Sprintf("%s, %d layers", kind, layers), func(t *testing.T) {
				const hidden, tokens = 1024, 2048
				w := int64(hidden * hidden * 4)
				f := newTraceFix(kind, int64(layers)*w)
				var copies int64
				f.in("python_function", "train.py(40): <module>", func() {
					var cp, saved []uint64
					f.in("python_function", "nn.Module: Model_0", func() {
						f.in("python_function", "model.py(20): forward", func() {
							for range layers {
								f.in("python_function", "nn.Module: Linear_0", func() {
									f.in("cpu_op", "aten::linear", func() {
										f.in("cpu_op", "aten::to", func() {
											f.in("cpu_op", "aten::_to_copy", func() { cp = append(cp, f.alloc(w/2)) })
										})
										f.in("cpu_op", "aten::addmm", func() { saved = append(saved, f.alloc(tokens*hidden*2)) })
									})
								})
								copies += w / 2
							}
						})
					})
					f.in("python_function", "torch/amp/autocast_mode.py(355): __exit__", func() {
						for _, a := range cp {
							f.free(a, w/2)
						}
					})
					f.in("python_function", "torch/_tensor.py(630): backward", func() {
						for i := layers - 1; i >= 0; i-- {
							f.in("cpu_op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", func() {
								f.inArgs("cpu_op", "torch::autograd::AccumulateGrad", fmt.Sprintf(`{"Input Dims": [[%d, %d]], "Input type": ["float"]}`, hidden, hidden), func() {})
							})
							f.free(saved[i], tokens*hidden*2)
						}
					})
				})
				snap := analysistest.ReadJSON(t, f.json())
				r := Analyze(snap, DefaultOptions())
				var peakCopies int64
				for _, d := range r.Devices {
					if d.Device == 0 {
						peakCopies = d.Peak.Categories[result.AutocastCache]
					}
				}
				h := history.Build(snap, snap.Device(0))
				var got, input int64
				for bi := range h.Blocks {
					b := &h.Blocks[bi]
					if b.Requested == w/2 {
						switch b.Category {
						case result.AutocastCache:
							got += b.Requested
						case result.InputData, result.Activation, result.Temporary:
							input += b.Requested
						}
					}
				}
				want := copies
				if kind == "no frames" {
					want = 0
				}
				if got != want || peakCopies != want {
					t.Errorf("autocast_cache %d B (%d at the peak), want %d; %d B elsewhere", got, peakCopies, want, input)
				}
				if want > 0 && input != 0 {
					t.Errorf("%d B of copies counted as input, activation or temporary", input)
				}
				if r.WhatIf != nil && r.WhatIf.AttentionBytes != 0 {
					t.Errorf("%d B ∝ seq²", r.WhatIf.AttentionBytes)
				}
			})
		}
	}
}

// TestKVCacheInTraces: transformers' cache (cache_utils.py update on the
// stack, its tensors kept across the generation's steps) is kv_cache in a
// trace too, on CUDA and on ROCm; the per-step temporaries are not.
// Without Python frames nothing names the cache.
func TestKVCacheInTraces(t *testing.T) {
	for _, kind := range frameKinds {
		for _, dev := range []int{1, 6} {
			t.Run(fmt.Sprintf("%s, device type %d", kind, dev), func(t *testing.T) {
				const layers, perToken = 4, 2 * 8 * 128 * 2 // k and v of 8 heads × 128, bf16
				f := newTraceFix(kind, 1<<30)
				f.devType = dev
				cache := make([]uint64, 2*layers)
				size := make([]int64, 2*layers)
				f.in("python_function", "serve.py(12): main", func() {
					f.in("python_function", "transformers/generation/utils.py(2700): _sample", func() {
						for tok := int64(1); tok <= 6; tok++ {
							f.in("python_function", "nn.Module: LlamaForCausalLM_0", func() {
								for l := 0; l < layers; l++ {
									f.in("python_function", "transformers/models/llama/modeling_llama.py(250): forward", func() {
										tmp := f.alloc(1 << 20)
										f.in("python_function", "transformers/cache_utils.py(120): update", func() {
											for kv := 0; kv < 2; kv++ {
												i := 2*l + kv
												f.in("cpu_op", "aten::cat", func() {
													n := 64 * tok * perToken / 2
													a := f.alloc(n)
													if cache[i] != 0 {
														f.free(cache[i], size[i])
													}
													cache[i], size[i] = a, n
												})
											}
										})
										f.free(tmp, 1<<20)
									})
								}
							})
						}
					})
				})
				snap := analysistest.ReadJSON(t, f.json())
				r := Analyze(snap, DefaultOptions())
				var want int64
				if kind == "module frames" || kind == "user frames" {
					for _, n := range size {
						want += n
					}
				}
				if len(r.Devices) == 0 {
					t.Fatal("no device")
				}
				d := r.Devices[0]
				if got := d.AtEnd.Categories[result.KVCache]; got != want {
					t.Errorf("kv_cache %d at the end, want %d (%s)", got, want, d.Kind)
				}
			})
		}
	}
}
