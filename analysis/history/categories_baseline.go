package history

import (
	"slices"
	"strings"

	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// Sizes the classification reads from the run beyond its blocks: the
// element size of a trace's dtypes, the optimizer's states per parameter,
// and the split of a chrome trace's untracked baseline by category.

// dtypeBytes is the element size of a chrome-trace "Input type".
func dtypeBytes(t string) int64 {
	switch t {
	case "double", "long int", "long", "int64_t", "c10::complex<float>":
		return 8
	case "c10::Half", "c10::BFloat16", "short", "short int":
		return 2
	case "unsigned char", "signed char", "bool", "c10::Float8_e4m3fn", "c10::Float8_e5m2":
		return 1
	}
	return 4
}

// optimizerFactor is how many state tensors per parameter the run's
// optimizer keeps, from its Optimizer.step annotation or its torch/optim
// module in the frames (0 when unknown or none).
func (h *History) optimizerFactor() int {
	for _, a := range h.Snap.Annotations {
		if a.Kind == snapshot.AnnotationOptStep && strings.HasPrefix(a.Name, "Optimizer.step#") {
			return int(max(0, optimizerStateFactor(a.Name)))
		}
	}
	for i := range h.Snap.Frames {
		f := h.Snap.Frames[i].Filename
		if j := strings.Index(f, "torch/optim/"); j >= 0 {
			switch strings.TrimSuffix(f[j+len("torch/optim/"):], ".py") {
			case "adam", "adamw", "nadam", "radam", "adamax", "adadelta":
				return 2
			case "adagrad", "rmsprop":
				return 1
			}
		}
	}
	return 0
}

// optimizerStateFactor is how many tensors of a parameter's size an
// optimizer keeps per parameter (−1 when unknown).
func optimizerStateFactor(name string) int64 {
	cls := strings.TrimPrefix(name, "Optimizer.step#")
	if j := strings.IndexByte(cls, '.'); j >= 0 {
		cls = cls[:j]
	}
	switch cls {
	case "Adam", "AdamW", "FusedAdam", "Adamax", "NAdam", "RAdam", "Adadelta":
		return 2
	case "Adagrad", "RMSprop", "Lion":
		return 1
	case "SGD":
		return 0 // 1 with momentum; the name does not say
	}
	return -1
}

// estimateBaseline splits the untracked pre-window baseline of a chrome
// trace (memory allocated before the window that no event touches) by
// category, from the parameter shapes of AccumulateGrad ops (parameters:
// the bytes of their inputs in a step; gradients as many when kept;
// optimizer state a multiple the optimizer's class names). The pieces are
// estimates.
func estimateBaseline(h *History) {
	idx := -1
	for i := range h.Blocks {
		if h.Blocks[i].Untracked {
			idx = i
		}
	}
	if idx < 0 {
		return
	}
	base := h.Blocks[idx]
	rest := base.Size
	setRest := func() {
		h.Blocks[idx].Size = rest
		h.Blocks[idx].Requested = rest
		h.Blocks[idx].classify(result.Unknown, RuleBaselineRest, result.Low)
	}
	params := paramBytesFromAccumulateGrad(h)
	if params <= 0 || params > rest {
		setRest()
		return
	}
	add := func(size int64, cat result.Category, rule string, conf result.Confidence) {
		if size <= 0 || size > rest {
			return
		}
		b := Block{Size: size, Requested: size, Alloc: -1, Free: -1, FreeRequested: -1, Untracked: true}
		b.classify(cat, rule, conf)
		h.Blocks = append(h.Blocks, b)
		rest -= size
	}
	add(params, result.Parameter, RuleBaselineParameters, result.Medium)
	// Gradients live across steps (set_to_none=False, or DDP bucket views)
	// when no gradient is freed by zero_grad and none is made in backward.
	inWindow := func(cat result.Category) bool {
		return slices.ContainsFunc(h.Blocks, func(b Block) bool { return !b.Untracked && b.Category == cat })
	}
	if !inWindow(result.Gradient) {
		add(params, result.Gradient, RuleBaselineGradients, result.Low)
	}
	if !inWindow(result.OptimizerState) {
		for _, a := range h.Snap.Annotations {
			if a.Kind == snapshot.AnnotationOptStep {
				if k := optimizerStateFactor(a.Name); k > 0 {
					add(k*params, result.OptimizerState, RuleBaselineOptimizerState, result.Low)
				}
				break
			}
		}
	}
	setRest()
}

// paramBytesFromAccumulateGrad sums the parameter sizes of one backward pass
// (the AccumulateGrad ops of the first backward range, else all of them
// divided by the number of optimizer steps), each rounded to 512 bytes.
func paramBytesFromAccumulateGrad(h *History) int64 {
	acc := h.Snap.GradAccumulations
	if len(acc) == 0 {
		return 0
	}
	var first *snapshot.Annotation
	for i := range h.Snap.Annotations {
		if a := &h.Snap.Annotations[i]; a.Kind == snapshot.AnnotationBackward {
			first = a
			break
		}
	}
	var sum int64
	n := 0
	for _, g := range acc {
		if g.Elements < 0 {
			return 0
		}
		if first != nil && (g.TimeNS < first.StartNS || g.TimeNS > first.EndNS) {
			continue
		}
		sum += (&SizingRules{}).Round(g.Elements * dtypeBytes(g.DType))
		n++
	}
	if first == nil {
		steps := int64(0)
		for _, a := range h.Snap.Annotations {
			if a.Kind == snapshot.AnnotationOptStep {
				steps++
			}
		}
		if steps > 1 {
			sum /= steps
		}
	}
	if n == 0 {
		return 0
	}
	return sum
}
