package estimate

// ceilDiv divides rounding up (bytes of a shard).
func ceilDiv(a, b int64) int64 {
	if b <= 1 {
		return a
	}
	return (a + b - 1) / b
}

// bitsToBytes converts n elements of bits each to bytes, rounding up.
func bitsToBytes(n, bits int64) int64 { return (n*bits + 7) / 8 }

// loraParams is the number of adapter parameters of rank r: r·(in + out)
// for every linear layer of the blocks.
func loraParams(a *Arch, r int64) int64 {
	var n int64
	for _, t := range a.Tensors() {
		if t.Linear {
			n += r * (t.Rows + t.Cols) * t.Count
		}
	}
	return n
}

// stateBytes is the element size of optimizer states: 1 for 8-bit
// optimizers; else fp32 when the weights (or master weights, or LoRA
// adapters) are fp32, the weights' 16-bit otherwise (PyTorch keeps
// exp_avg and exp_avg_sq in the parameter's dtype).
func (s *Setup) stateBytes() int64 {
	switch {
	case s.Optimizer == "adamw8bit" || s.Optimizer == "paged-adamw8bit":
		return 1
	case s.Precision == "fp32" || s.Mixed || s.LoRARank > 0:
		return 4
	}
	return 2
}

// states fills parameters, master weights, gradients and optimizer state
// (sharded by ZeRO).
func states(in Inputs, r *Result) {
	s, a := in.Setup, in.Arch
	bits := s.weightBits()
	switch {
	case in.Params > 0 || a == nil:
		r.ParameterCount = in.Params
		r.ParametersBytes = bitsToBytes(in.Params, bits)
	default:
		r.ParameterCount = a.ParamCount()
		for _, t := range a.Tensors() {
			b := bits
			if s.quantized() && !t.Linear {
				b = 16 // bitsandbytes quantizes the blocks' linear layers only
			}
			r.ParametersBytes += bitsToBytes(t.Elements(), b)
		}
	}
	trainable := r.ParameterCount
	gradBytes := int64(4)
	if s.sixteenBit() {
		gradBytes = 2
	}
	switch {
	case !s.training():
		trainable = 0
	case s.LoRARank > 0:
		trainable = loraParams(a, s.LoRARank)
		r.ParametersBytes += 4 * trainable // fp32 adapters
		gradBytes = 4
	}
	r.TrainableParameterCount = trainable
	if s.Mixed {
		r.MasterWeightsBytes = 4 * trainable
	}
	r.GradientsBytes = gradBytes * trainable
	r.OptimizerStateBytes = optimizerBytes(in, trainable)

	if s.Offload {
		r.OptimizerStateBytes, r.MasterWeightsBytes = 0, 0
	}
	if s.ZeRO >= 1 {
		r.OptimizerStateBytes = ceilDiv(r.OptimizerStateBytes, s.World)
		r.MasterWeightsBytes = ceilDiv(r.MasterWeightsBytes, s.World)
	}
	if s.ZeRO >= 2 {
		r.GradientsBytes = ceilDiv(r.GradientsBytes, s.World)
	}
	if s.ZeRO >= 3 && s.World > 1 {
		r.ParametersBytes = ceilDiv(r.ParametersBytes, s.World)
		if a != nil {
			r.WorkingBytes = bitsToBytes(a.layerParams(), bits) // one block gathered at a time
		}
	}
}

// optimizerBytes is the optimizer state of the trainable parameters.
func optimizerBytes(in Inputs, trainable int64) int64 {
	s := in.Setup
	sb := s.stateBytes()
	switch s.Optimizer {
	case "adamw", "adamw-fused", "adamw-loop", "adamw8bit", "paged-adamw8bit":
		return 2 * sb * trainable // exp_avg and exp_avg_sq
	case "sgd-momentum":
		return sb * trainable // momentum buffer
	case "adafactor":
		return adafactorBytes(in, trainable)
	}
	return 0 // sgd, none
}

// adafactorBytes is Adafactor's factored second moment (no first moment,
// Hugging Face's default beta1=None): rows + columns per matrix, every
// element of a vector; without the shapes, the guide's 4 bytes per
// parameter.
func adafactorBytes(in Inputs, trainable int64) int64 {
	s, a := in.Setup, in.Arch
	sb := s.stateBytes()
	if a == nil || in.Params > 0 {
		return 4 * trainable
	}
	var n int64
	for _, t := range a.Tensors() {
		switch {
		case s.LoRARank > 0 && t.Linear:
			// A (r × in) and B (out × r): rows + columns of each.
			n += ((s.LoRARank + t.Cols) + (t.Rows + s.LoRARank)) * t.Count
		case s.LoRARank > 0:
		case t.Cols > 1:
			n += (t.Rows + t.Cols) * t.Count
		default:
			n += t.Rows * t.Count
		}
	}
	return n * sb
}
