package estimate

// actParts is the activation memory of a setup.
type actParts struct {
	total       int64 // everything kept for backward (or, in inference, the working set)
	quadratic   int64 // the part ∝ seq² (scores, softmax, dropout of the scores)
	floor       int64 // the guide's rule: a hidden state per layer + one layer's scores
	scoresLayer int64 // batch × heads × seq² × bytes
}

// layerActs is what one block keeps for its backward without
// recomputation, in bytes, split into the part linear in the sequence and
// the part quadratic in it. It generalises Korthikanti et al. 2022 (§4.1,
// 16-bit, dropout: s·b·h·(34 + 5·a·s/h)) to grouped KV heads, gated MLPs
// of any width, fp32 and models without dropout; for their GPT layer it is
// their formula exactly:
//
//	norm inputs            norms · s·b·h·e
//	attention              s·b·h·e (QKV input) + s·b·(q+kv)·e (Q, K) + s·b·kv·e (V)
//	                       + s·b·q·e (output projection input) [+ s·b·h mask]
//	scores                 a·s²·b·e (softmax output) [+ a·s²·b mask + a·s²·b·e dropout output]
//	MLP, plain             s·b·h·e + 2·s·b·f·e [+ s·b·h mask]
//	MLP, gated (SwiGLU)    s·b·h·e + 4·s·b·f·e (gate, up, activation, product) [+ s·b·h mask]
//
// with e the activation bytes, q = heads·head_dim, kv = kv_heads·head_dim,
// f the MLP width; bracketed terms only with dropout (1-byte masks).
// Flash attention keeps no scores, only its log-sum-exp (a·s·b fp32).
func layerActs(a *Arch, s Setup, flash bool) (linear, quadratic int64) {
	e, b, n := s.actBytes(), s.Batch, s.Seq
	h, f := a.Hidden, a.FFN
	q, kv := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	sb := n * b
	linear = a.BlockNorms*sb*h*e + sb*h*e + sb*(q+kv)*e + sb*kv*e + sb*q*e
	if a.QKNorm {
		linear += sb * (q + kv) * e
	}
	if a.Gated {
		linear += sb*h*e + 4*sb*f*e
	} else {
		linear += sb*h*e + 2*sb*f*e
	}
	dropout := a.Dropout && s.training() // dropout is off in inference
	if dropout {
		linear += 2 * sb * h // attention-output and MLP-output masks
	}
	scores := a.Heads * n * n * b
	switch {
	case flash:
		linear += 4 * a.Heads * sb // log-sum-exp, fp32
	case dropout:
		quadratic = scores*e + scores + scores*e
	default:
		quadratic = scores * e
	}
	return linear, quadratic
}

// activations is the activation memory of the whole model. Training keeps
// every block's activations (Korthikanti's sum over layers), with
// selective recomputation none of the scores (recomputed in backward),
// with full recomputation only each block's input (2·s·b·h in 16-bit) plus
// one block recomputed at a time; the output layer adds its norm and
// projection inputs and fp32 logits for the loss (Korthikanti's
// 4·s·b·h·(1 + v/h)). Inference keeps nothing: its working set is one
// block's tensors and the logits.
func activations(a *Arch, s Setup) actParts {
	e, b, n := s.actBytes(), s.Batch, s.Seq
	h, L := a.Hidden, a.Layers
	flash := s.Flash
	var p actParts
	p.scoresLayer = a.Heads * n * n * b * e
	p.floor = L * n * b * h * e
	if !flash {
		p.floor += p.scoresLayer
	}
	lin, quad := layerActs(a, s, flash)
	output := 2*n*b*h*e + 4*n*b*a.Vocab // final norm and head inputs; fp32 logits
	if !s.training() {
		p.total = lin + quad + n*b*h*e + n*b*a.Vocab*e
		p.quadratic = quad
		p.floor = n*b*h*e + p.scoresLayer // one hidden state and one layer's scores
		if flash {
			p.floor -= p.scoresLayer
		}
		return p
	}
	if a.Dropout {
		output += n * b * h // embedding dropout mask
	}
	switch s.Checkpointing {
	case "full":
		p.total = L*n*b*h*e + lin + quad + output
		p.quadratic = quad
	case "selective":
		if !flash {
			// the attention core is recomputed: only Q, K, V stay
			p.total = L*lin + quad + output
			p.quadratic = quad
			break
		}
		fallthrough
	default:
		p.total = L*(lin+quad) + output
		p.quadratic = L * quad
	}
	return p
}
