package analysis

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/analysistest"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// TestCompiledSitesBcrafton: bcrafton (torch 2.10, torch.compile'd model,
// stacks="all") allocates through Inductor's output code
// (/tmp/torchinductor_brian/3u/c3uxhj….py:186 call, …). Those files name no
// site: the user's frame outside them does, marked compiled — the counts of
// alloc entries per site are testdata/facts/compiled_sites.py's.
func TestCompiledSitesBcrafton(t *testing.T) {
	want := map[string]int{
		"model.py:104 forward (compiled)":                               13,
		"model.py:107 forward (compiled)":                               87,
		"model.py:144 forward (compiled)":                               24,
		"model.py:146 forward (compiled)":                               24,
		"model.py:397 forward (compiled)":                               12,
		"model.py:41 forward (compiled)":                                279,
		"model.py:425 scaled_dot_product_attention (compiled)":          24,
		"model.py:432 scaled_dot_product_attention (compiled)":          36,
		"model.py:501 forward (compiled)":                               12,
		"model.py:520 torch_dynamo_resume_in_forward_at_501 (compiled)": 12,
		"model.py:527 silu (compiled)":                                  12,
		"model.py:57 forward (compiled)":                                2,
		"nn_utils.py:7 softmax (compiled)":                              48,
	}
	s := analysistest.OpenShared(t, "snapshots", "genG_torch2.10x_bcrafton.pickle")
	got := map[string]int{}
	for _, e := range s.Devices[0].Events {
		if e.Action != snapshot.ActionAlloc {
			continue
		}
		ref := history.SiteRefOf(s, e.Stack)
		if strings.HasSuffix(ref.Name, history.CompiledSuffix) {
			got[ref.Name]++
			if history.IsGenerated(ref.File) || !strings.HasSuffix(ref.File, "/"+strings.SplitN(ref.Name, ":", 2)[0]) {
				t.Errorf("site %q points at %q", ref.Name, ref.File)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("compiled sites (-facts +torchmem):\n%s", diff)
	}
	r := Analyze(s, DefaultOptions())
	for _, d := range r.Devices {
		sites := append([]result.Site{}, d.TopSites...)
		for _, pp := range d.PhasePeaks {
			sites = append(sites, pp.TopSites...)
		}
		for _, st := range sites {
			if strings.Contains(st.Site, "torchinductor") || strings.Contains(st.Site, " call") {
				t.Errorf("a generated file names a site: %+v", st)
			}
		}
	}
}

// TestCompiledSitesFixture: stacks made like torch.compile's in other
// versions and backends — Inductor's code called through codecache,
// AOTAutograd's runtime wrappers and Dynamo's eval_frame, from the user's
// module via nn.Module.__call__; the aot_eager backend's <eval_with_key>
// GraphModule; an eager frame of the same module for contrast.
func TestCompiledSitesFixture(t *testing.T) {
	s := st.NewSim()
	lib := "/opt/venv/lib/python3.11/site-packages/torch/"
	call := s.F(lib+"nn/modules/module.py", 1750, "_call_impl")
	loop := s.F("/home/u/train.py", 42, "<module>")
	inductor := s.Stack(
		s.F("/tmp/torchinductor_u/ab/cabx2f6k7u3h5ytq4b2q3vbd6rjwvxr6a3p5pcq2bkgjkz2uwbqtl.py", 310, "call"),
		s.F(lib+"_inductor/codecache.py", 1008, "run"),
		s.F(lib+"_functorch/_aot_autograd/runtime_wrappers.py", 113, "call_func_at_runtime_with_args"),
		s.F(lib+"_functorch/_aot_autograd/runtime_wrappers.py", 600, "runtime_wrapper"),
		s.F(lib+"_dynamo/eval_frame.py", 451, "_fn"),
		s.F("/home/u/model.py", 88, "forward"),
		call, loop)
	aotEager := s.Stack(
		s.F("<eval_with_key>.7", 12, "forward"),
		s.F(lib+"fx/graph_module.py", 738, "__call__"),
		s.F(lib+"_dynamo/eval_frame.py", 451, "_fn"),
		s.F("/home/u/model.py", 88, "forward"),
		call, loop)
	eager := s.Stack(s.F("/home/u/model.py", 91, "forward"), call, loop)
	s.Alloc(0, 8*mib, inductor)
	s.Alloc(0, 4*mib, aotEager)
	s.Alloc(0, 2*mib, eager)
	r := Analyze(analysistest.Read(t, s, 0), DefaultOptions())
	got := map[string]int64{}
	for _, st := range r.Devices[0].TopSites {
		got[st.Site] += st.Bytes
		if strings.HasPrefix(st.Site, "model.py") && (st.File != "/home/u/model.py" || st.Line != 88 && st.Line != 91) {
			t.Errorf("site %q at %s:%d", st.Site, st.File, st.Line)
		}
	}
	want := map[string]int64{"model.py:88 forward (compiled)": 12 * mib, "model.py:91 forward": 2 * mib}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sites (-want +got):\n%s", diff)
	}
}
