package snapshottest

import "strings"

// functional rewrites the frames of an allocation of the module-based
// model (innermost first) into those of the same model written as plain
// functions (LeakConfig.Functional):
//
//	def block(x, w):              # fmodel.py:60–72 (attention at :65)
//	    ...
//	def model(x, ws):             # fmodel.py:135–150
//	    h = embed(x, ws.emb)      # :135
//	    for w in ws.layers:
//	        h = block(h, w)       # :140
//	    return head(norm(h), ws.emb)  # :146, :150
//
// nn.Module calls (torch/nn/modules/…) disappear, model.py's frames become
// fmodel.py's: a block's lines are block's (attention keeps its name), the
// model's own lines are model's, the weights' initialisation is
// init_weights'.
func (m *leakModel) functional(frames []*Dict) []*Dict {
	s := m.s
	out := make([]*Dict, 0, len(frames))
	for _, f := range frames {
		file, line, name := f.Vals[0].(string), f.Vals[1].(int), f.Vals[2].(string)
		switch {
		case strings.HasPrefix(file, "torch/nn/modules/"):
			continue
		case file != "model.py":
			out = append(out, f)
		case name == "__init__":
			out = append(out, s.F("fmodel.py", line, "init_weights"))
		case name == "attention":
			out = append(out, s.F("fmodel.py", line, name))
		case line >= 135:
			out = append(out, s.F("fmodel.py", line, "model"))
		default:
			out = append(out, s.F("fmodel.py", line, "block"))
		}
	}
	return out
}
