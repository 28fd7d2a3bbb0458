package estimate

import "fmt"

// technique is one of the guide's ways to need less memory, as a change
// of the setup. weight orders costs: 0 free, 1 minimal, 3 slower steps,
// 9 much slower, 27 a different kind of training (adapters only).
type technique struct {
	id, title, cost string
	weight          int
	// apply changes the inputs; false when it does not apply to them.
	apply func(in *Inputs) bool
}

// group is a set of exclusive techniques (a plan takes at most one).
type group []technique

// groups lists the techniques of the guide by the part of the setup they
// change.
func groups(in Inputs) []group {
	s := in.Setup
	gs := []group{{{id: "flash_attention", title: "fused attention (FlashAttention / SDPA)", cost: "none; usually faster", weight: 0,
		apply: func(in *Inputs) bool {
			ok := in.Arch != nil && backendOf(in.Arch, in.Setup) != backendFused
			in.Attention, in.Flash = "flash", true
			return ok
		}}}}
	if !s.training() {
		var prec group
		for _, p := range []struct {
			prec, title, cost string
			w                 int
		}{{"bf16", "bf16 weights", "minimal on GPUs with bf16", 1},
			{"int8", "8-bit weights (bitsandbytes)", "slightly slower matmuls; small accuracy cost", 2},
			{"int4", "4-bit weights (NF4)", "slower matmuls; accuracy cost to check", 3}} {
			p := p
			prec = append(prec, technique{id: "quantize_weights_" + p.prec, title: p.title, cost: p.cost, weight: p.w,
				apply: func(in *Inputs) bool {
					ok := in.weightBits() > bitsOf(p.prec)
					in.Precision, in.AMP = p.prec, false
					return ok
				}})
		}
		gs = append(gs, prec, halvings(s, "reduce_batch_size", "batch", "more, smaller forward passes"))
		return gs
	}
	gs = append(gs,
		group{
			{id: "selective_checkpointing", title: "selective recomputation (attention core)", cost: "a few % slower (Korthikanti et al.)", weight: 1,
				apply: func(in *Inputs) bool {
					ok := in.Checkpointing == "none"
					in.Checkpointing = "selective"
					return ok
				}},
			{id: "activation_checkpointing", title: "full activation checkpointing", cost: "~30% slower steps (forward runs twice)", weight: 3,
				apply: func(in *Inputs) bool {
					ok := in.Checkpointing != "full"
					in.Checkpointing = "full"
					return ok
				}}},
		group{{id: "mixed_precision_bf16", title: "bf16 autocast (PyTorch AMP)", cost: "minimal on GPUs with bf16", weight: 1,
			apply: func(in *Inputs) bool {
				ok := in.Precision == "fp32" && !in.AMP && in.LoRARank == 0
				in.AMP = true
				return ok
			}}},
		group{
			{id: "optimizer_8bit", title: "8-bit AdamW (bitsandbytes)", cost: "minimal (slightly different numerics)", weight: 1,
				apply: func(in *Inputs) bool {
					ok := in.Optimizer == "adamw" || in.Optimizer == "adamw-fused" || in.Optimizer == "adamw-loop"
					in.Optimizer = "adamw8bit"
					return ok
				}},
			{id: "cpu_offload", title: "optimizer state offloaded to CPU", cost: "2–5× slower steps", weight: 9,
				apply: func(in *Inputs) bool {
					ok := !in.Offload && in.Optimizer != "sgd"
					in.Offload = true
					return ok
				}}},
		halvings(s, "gradient_accumulation", "micro-batch", "same result; more, smaller steps"))
	if s.World > 1 {
		var z group
		for stage := s.ZeRO + 1; stage <= 3; stage++ {
			stage := stage
			cost, w := "none beyond data parallelism's traffic", 1
			if stage == 3 {
				cost, w = "about 1.5× the communication (parameters gathered per layer)", 3
			}
			z = append(z, technique{id: fmt.Sprintf("zero%d", stage), title: fmt.Sprintf("ZeRO stage %d over %d GPUs", stage, s.World),
				cost: cost, weight: w, apply: func(in *Inputs) bool { in.ZeRO = stage; return true }})
		}
		gs = append(gs, z)
	}
	if in.Arch != nil && in.Params == 0 && s.LoRARank == 0 && !s.quantized() {
		gs = append(gs, group{
			{id: "lora", title: "LoRA r=16 on a frozen bf16 base", cost: "fine-tuning only: trains adapters, not the model", weight: 27,
				apply: func(in *Inputs) bool {
					in.Precision, in.Mixed, in.AMP, in.LoRARank = "bf16", false, false, 16
					return true
				}},
			{id: "qlora", title: "QLoRA: r=16 adapters on a 4-bit base", cost: "fine-tuning only; slower matmuls (dequantization)", weight: 28,
				apply: func(in *Inputs) bool {
					in.Precision, in.Mixed, in.AMP, in.LoRARank = "int4", false, false, 16
					return true
				}}})
	}
	return gs
}

func bitsOf(prec string) int64 { return (&Setup{Precision: prec}).weightBits() }

// halvings is a group of batch halvings: batch/2, batch/4, … down to 1.
func halvings(s Setup, id, what, cost string) group {
	var g group
	for k := int64(2); k <= s.Batch && k <= 1<<10; k *= 2 {
		k := k
		g = append(g, technique{id: id, title: fmt.Sprintf("%s %d instead of %d (×%d)", what, ceilDiv(s.Batch, k), s.Batch, k),
			cost: cost, weight: 3, apply: func(in *Inputs) bool { in.Batch = ceilDiv(in.Batch, k); return true }})
	}
	return g
}

// combo is a choice of at most one technique per group.
type combo []*technique

func (c combo) weight() (w, n int) {
	for _, t := range c {
		if t != nil {
			w += t.weight
			n++
		}
	}
	return w, n
}

// apply returns the inputs with every chosen technique applied, false when
// one of them does not apply.
func (c combo) apply(in Inputs) (Inputs, bool) {
	for _, t := range c {
		if t != nil && !t.apply(&in) {
			return in, false
		}
	}
	return in, true
}

// total is the total bytes of inputs (activations unknown count as 0).
func total(in Inputs) int64 { return computeSetup(in).TotalBytes }

// singles lists each technique alone, with its saving (when it saves).
func singles(in Inputs, base *Result) []Step {
	out := []Step{}
	for _, g := range groups(in) {
		for i := range g {
			t := &g[i]
			if t.id == "gradient_accumulation" || t.id == "reduce_batch_size" {
				if i > 0 {
					continue // the halving alone stands for the family
				}
			}
			next, ok := combo{t}.apply(in)
			if !ok {
				continue
			}
			if tot := total(next); tot < base.TotalBytes {
				out = append(out, Step{ID: t.id, Title: t.title, SavingBytes: base.TotalBytes - tot, Cost: t.cost, TotalBytes: tot})
			}
		}
	}
	return out
}

// planFor searches every combination (one technique or none per group) for
// the cheapest that fits the GPU: the least total weight, then the fewest
// techniques, then the least memory. When none fits it keeps the one that
// needs the least memory.
func planFor(in Inputs, r *Result) {
	if r.Fits != nil && *r.Fits {
		fits, tot := true, r.TotalBytes
		r.PlanFits, r.PlanTotalBytes = &fits, &tot
		return
	}
	gs := groups(in)
	var best, least combo
	var bestTot, leastTot int64 = -1, -1
	bestW, bestN := 0, 0
	cur := make(combo, len(gs))
	var walk func(i int)
	walk = func(i int) {
		if i == len(gs) {
			next, ok := cur.apply(in)
			if !ok {
				return
			}
			tot := total(next)
			w, n := cur.weight()
			if leastTot < 0 || tot < leastTot {
				least, leastTot = append(combo(nil), cur...), tot
			}
			if tot <= in.GPU.UsableBytes && (bestTot < 0 || w < bestW || w == bestW && (n < bestN || n == bestN && tot < bestTot)) {
				best, bestTot, bestW, bestN = append(combo(nil), cur...), tot, w, n
			}
			return
		}
		cur[i] = nil
		walk(i + 1)
		for k := range gs[i] {
			cur[i] = &gs[i][k]
			walk(i + 1)
		}
		cur[i] = nil
	}
	walk(0)
	fits := bestTot >= 0
	if !fits {
		best, bestTot = least, leastTot
	}
	r.PlanFits, r.PlanTotalBytes = &fits, &bestTot
	for i, t := range best {
		if t == nil {
			continue
		}
		without := append(combo(nil), best...)
		without[i] = nil
		next, _ := without.apply(in)
		r.Plan = append(r.Plan, Step{ID: t.id, Title: t.title, Cost: t.cost, SavingBytes: total(next) - bestTot, TotalBytes: bestTot})
	}
}
