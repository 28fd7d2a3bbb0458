package analysis

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// The golden files are rewritten with `go test ./analysis -run Golden
// -update`. The flag is defined here unless another test file of the
// package defines it first.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

func updateGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// TestGoldenJSON pins the whole torchmem.analysis/v1 JSON of simulated runs
// (its schema is a contract): a two-step training loop, and one that runs
// out of memory in the second forward with a fragmented cache.
func TestGoldenJSON(t *testing.T) {
	tests := []struct {
		name  string
		build func(r *rig)
	}{
		{"training_two_steps", func(r *rig) {
			for _, p := range paramSizes {
				r.s.Alloc(0, p, nil)
			}
			var state, grads []uint64
			for i := 0; i < 2; i++ {
				grads = r.step(&state, grads, true)
			}
		}},
		{"oom_fragmented_forward", func(r *rig) {
			for _, p := range paramSizes {
				r.s.Alloc(0, p, nil)
			}
			var state, grads []uint64
			grads = r.step(&state, grads, true)
			s := r.s
			s.Annotate(0, "Optimizer.zero_grad#AdamW.zero_grad", func() {
				for _, g := range grads {
					s.Free(0, g)
				}
			})
			for i := 0; i < 5; i++ {
				a := s.Alloc(0, 30*mib, r.fwd)
				s.Free(0, a)
				s.Alloc(0, 20*mib, r.attn)
			}
			s.OOM(0, 40*mib, 5*mib, r.attn)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig()
			tc.build(r)
			res := Analyze(read(t, r.s, 0), DefaultOptions())
			got, err := json.MarshalIndent(res, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("..", "testdata", "analysis", tc.name+".golden.json")
			if updateGolden() {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the golden file; run `go test ./analysis -run Golden -update` and review the diff:\n%s", tc.name, firstDiff(string(want), string(got)))
			}
		})
	}
}

// firstDiff shows the first differing line of two texts.
func firstDiff(a, b string) string {
	la, lb := bytes.Split([]byte(a), []byte("\n")), bytes.Split([]byte(b), []byte("\n"))
	for i := 0; i < len(la) || i < len(lb); i++ {
		var x, y []byte
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if !bytes.Equal(x, y) {
			return "line " + itoa(i+1) + ":\n- " + string(x) + "\n+ " + string(y)
		}
	}
	return ""
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
