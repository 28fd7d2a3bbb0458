package analysis

import (
	"fmt"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// TestCheckpointingHowForTheModel: checkpointing's how is the model's own
// switch where the stacks show a transformers model
// (gradient_checkpointing_enable, the cache off), with peft's
// enable_input_require_grads where adapters train a frozen base, and
// torch.utils.checkpoint around the blocks otherwise — including where no
// library frame is recorded (user, C++ or no frames) and where a
// transformers model runs beside a model of the user's own that holds the
// activations.
func TestCheckpointingHowForTheModel(t *testing.T) {
	for _, kind := range frameKinds {
		for _, lib := range []string{"", "transformers", "transformers+peft"} {
			for _, layers := range []int{4, 12} {
				t.Run(fmt.Sprintf("%s, %q, %d layers", kind, lib, layers), func(t *testing.T) {
					x := fx{st.NewSim(), kind}
					c := trainRun{layers: layers, hidden: 512, tokens: 8192, steps: 2}
					if strings.Contains(lib, "transformers") {
						c.modelLib = "transformers/models/llama/modeling_llama.py"
					}
					c.run(x)
					s := x.s
					// A transformers model elsewhere in the run (a frozen
					// encoder) does not make the activations its own.
					other := []*st.Dict{s.F("transformers/models/bert/modeling_bert.py", 200, "forward")}
					if strings.Contains(lib, "peft") {
						other = append(other, s.F("peft/tuners/lora/layer.py", 727, "forward"))
					}
					s.Free(0, s.Alloc(0, 1<<20, x.stack(nil, other, []*st.Dict{s.F("train.py", 21, "<module>")})))
					r := Analyze(analysistest.Read(t, s, 0), DefaultOptions())
					sg := suggestionIn(r, "activation_checkpointing")
					if sg == nil {
						t.Fatalf("no checkpointing suggested (%v)", suggestionIDs(r))
					}
					seen := kind == "module frames"
					want := map[string]bool{
						"torch.utils.checkpoint":         !seen || lib == "",
						"gradient_checkpointing_enable":  seen && lib != "",
						"enable_input_require_grads":     seen && lib == "transformers+peft",
						"model.config.use_cache = False": seen && lib != "",
					}
					for text, w := range want {
						if strings.Contains(sg.How, text) != w {
							t.Errorf("how says %q: %v, want %v:\n%s", text, !w, w, sg.How)
						}
					}
				})
			}
		}
	}
}
