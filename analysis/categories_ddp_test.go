package analysis

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/analysis/whatif"
	"github.com/torchmem/torchmem/internal/analysistest"
	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/snapshot"
)

// ddpBucket is one of the fixture's DDP buckets: its requested bytes and
// address.
type ddpBucket struct {
	size int64
	addr uint64
}

// ddpConstruct is DistributedDataParallel's constructor in the recording
// (train.py:12 model = DDP(model)): it broadcasts rank 0's parameters in
// one flat buffer of all of them (torch/distributed/utils.py
// _sync_params_and_buffers; gloo frees it when its work completes, at the
// next allocation), then the Reducer makes one bucket of every gradient
// (find_unused_parameters off: one bucket until the first iteration shows
// the order gradients become ready).
func (c *trainRun) ddpConstruct(x fx, weights []int64) {
	s := x.s
	var total int64
	for _, w := range weights {
		total += w
	}
	script := []*st.Dict{s.F("train.py", 12, "<module>")}
	bcast := s.Alloc(0, total, x.stack([]string{"at::native::empty_cuda(c10::ArrayRef<long>)", "torch::utils::flatten_dense_tensors(c10::ArrayRef<at::Tensor>)", "c10d::broadcast_coalesced(c10::intrusive_ptr<c10d::ProcessGroup> const&, c10::ArrayRef<at::Tensor>, unsigned long, int)"},
		[]*st.Dict{s.F("torch/distributed/utils.py", 326, "_sync_params_and_buffers"), s.F("torch/distributed/utils.py", 315, "_sync_module_states"), s.F("torch/nn/parallel/distributed.py", 883, "__init__")}, script))
	c.ddpBuckets = append(c.ddpBuckets, ddpBucket{total, s.Alloc(0, total, x.stack([]string{"at::native::empty_cuda(c10::ArrayRef<long>)", "c10d::Reducer::initialize_buckets(std::vector<c10d::Reducer::Bucket, std::allocator<c10d::Reducer::Bucket> >)", "c10d::Reducer::Reducer(std::vector<at::Tensor, std::allocator<at::Tensor> >)"},
		[]*st.Dict{s.F("torch/nn/parallel/distributed.py", 1255, "_ddp_init_helper"), s.F("torch/nn/parallel/distributed.py", 896, "__init__")}, script))})
	s.Free(0, bcast)
}

// ddpRebuild is the Reducer's one rebuild of its buckets, at the start of
// the second iteration's forward (DistributedDataParallel._pre_forward):
// it broadcasts the new assignment (the parameters' indices and the
// buckets' sizes, int32 tensors freed at once), frees the first bucket and
// makes the new ones — the gradients in the order they became ready (the
// last layer's first), a bucket closing once it holds 1 MiB (the first) or
// the cap (the others).
func (c *trainRun) ddpRebuild(x fx, weights []int64) {
	s := x.s
	stack := func(cpp string) *st.List {
		return x.stack([]string{"at::native::empty_cuda(c10::ArrayRef<long>)", cpp, "c10d::Reducer::rebuild_buckets()"},
			[]*st.Dict{s.F("torch/nn/parallel/distributed.py", 1584, "_pre_forward"), s.F("torch/nn/parallel/distributed.py", 1695, "forward"), s.F("torch/nn/modules/module.py", 1787, "_call_impl")},
			[]*st.Dict{s.F("train.py", 21, "<module>")})
	}
	var sizes []int64
	var cur int64
	for i := len(weights) - 1; i >= 0; i-- {
		cur += weights[i]
		if limit := c.ddpCap; len(sizes) == 0 && cur >= 1<<20 || cur >= limit {
			sizes = append(sizes, cur)
			cur = 0
		}
	}
	if cur > 0 {
		sizes = append(sizes, cur)
	}
	sync := stack("c10d::Reducer::sync_bucket_indices(std::vector<std::vector<unsigned long> >&)")
	idx := s.Alloc(0, int64(len(weights)+1)*4, sync)
	n := s.Alloc(0, int64(len(sizes))*4, sync)
	s.Free(0, n)
	s.Free(0, idx)
	s.Free(0, c.ddpBuckets[0].addr)
	for _, sz := range sizes {
		c.ddpBuckets = append(c.ddpBuckets, ddpBucket{sz, s.Alloc(0, sz, stack("c10d::Reducer::initialize_buckets(std::vector<c10d::Reducer::Bucket, std::allocator<c10d::Reducer::Bucket> >)"))})
	}
}

// TestDDPBucketsFixture: DistributedDataParallel's Reducer keeps flat
// buckets of the gradients besides each parameter's .grad — one bucket of
// every gradient from its construction to the second forward, then buckets
// of about the cap, kept for good. They are gradient memory by the rule
// that names them, whatever the stacks (the Reducer's frames, or the run
// of allocations opening a forward that adds up to one step's gradients —
// or, with gradient_as_bucket_view=True, where backward frees each
// gradient once copied into its bucket, to the parameters), for any bucket
// count and model size; the parameter broadcast of the
// constructor and the rebuild's index tensors are not buckets. Without
// DDP, no block is taken for one. A bucket of a cuBLAS workspace's size
// (4×2048² fp32 weights make one of 32 MiB) is still a bucket.
func TestDDPBucketsFixture(t *testing.T) {
	for _, kind := range frameKinds {
		for _, tc := range []struct {
			layers int
			hidden int64
			cap    int64
		}{{2, 512, 25 << 20}, {8, 1024, 25 << 20}, {8, 1024, 1 << 20}, {24, 768, 4 << 20}, {4, 2048, 25 << 20}} {
			t.Run(fmt.Sprintf("%s, %d×%d, cap %d MiB", kind, tc.layers, tc.hidden, tc.cap>>20), func(t *testing.T) {
				for _, mode := range []struct{ ddp, view bool }{{false, false}, {false, true}, {true, false}, {true, true}} {
					ddp := mode.ddp
					c := trainRun{layers: tc.layers, hidden: tc.hidden, tokens: 2048, steps: 4, bucketView: mode.view}
					if ddp {
						c.ddpCap = tc.cap
					}
					x := fx{st.NewSim(), kind}
					c.run(x)
					snap := analysistest.Read(t, x.s, 0)
					h := history.Build(snap, snap.Device(0))
					var got []ddpBucket
					for bi := range h.Blocks {
						if b := &h.Blocks[bi]; b.Rule() == history.RuleDDPBucket {
							got = append(got, ddpBucket{b.Requested, b.Addr})
							if b.Category != result.Gradient {
								t.Errorf("bucket of %d B is %s", b.Requested, b.Category)
							}
						}
					}
					want := c.ddpBuckets
					if !slices.Equal(got, want) {
						t.Errorf("DDP %v, bucket view %v: buckets %v, want %v", ddp, mode.view, got, want)
					}
					if ddp && len(want) < 3 {
						t.Fatalf("the fixture made %d buckets", len(want))
					}
					if end := requestedAtEndOf(h); ddp && end[result.Gradient] != c.weightBytes || end[result.Activation] != 0 || end[result.InputData] != 0 {
						t.Errorf("DDP %v, bucket view %v: at the end gradient %d, activation %d, input %d; want %d, 0, 0",
							ddp, mode.view, end[result.Gradient], end[result.Activation], end[result.InputData], c.weightBytes)
					}
				}
			})
		}
	}
}

// TestDDPBucketsRealFiles: on every real file, the blocks taken for DDP's
// buckets are exactly the Reducer's buckets of the two DDP ranks of
// ../shared/recorded/record_ddp (the construction's bucket of every
// gradient, then the rebuilt ones of about 25 MiB that recorded_facts.py
// derives from the model's parameters), with their frames, with the
// user's frames only and with no frames; no other file has any.
func TestDDPBucketsRealFiles(t *testing.T) {
	truth := map[string][]int64{}
	for _, r := range recordedTruths {
		truth[r.File] = r.DDPBuckets
	}
	shared := st.SharedDir(t, "")
	for _, path := range st.SharedInputs(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(path, shared), "/")
		want := truth[strings.TrimPrefix(rel, "recorded/")]
		frames := []string{"all frames"}
		if want != nil {
			frames = append(frames, "user frames", "no frames")
		}
		for _, kind := range frames {
			t.Run(rel+", "+kind, func(t *testing.T) {
				s, err := load.Open(path, snapshot.Options{})
				if err != nil {
					t.Skipf("%v", err) // a file the loader refuses: other tests say why
				}
				keepFrames(s, kind)
				for _, d := range s.Devices {
					h := history.Build(s, d)
					var got []int64
					for bi := range h.Blocks {
						if b := &h.Blocks[bi]; b.Rule() == history.RuleDDPBucket && b.Category == result.Gradient {
							got = append(got, b.Requested)
						}
					}
					if !slices.Equal(got, want) {
						t.Errorf("device %d: DDP buckets %v, want %v", d.ID, got, want)
					}
				}
			})
		}
	}
}

// keepFrames drops the frames a recording of that kind lacks: PyTorch's
// and libraries' (user frames), or all of them (no frames).
func keepFrames(s *snapshot.Snapshot, kind string) {
	if kind == "all frames" {
		return
	}
	for i, stack := range s.Stacks {
		var keep []snapshot.FrameID
		for _, id := range stack {
			f := s.Frames[id].Filename
			if kind == "user frames" && strings.HasSuffix(f, ".py") && !strings.Contains(f, "/torch/") && !strings.Contains(f, "site-packages") {
				keep = append(keep, id)
			}
		}
		s.Stacks[i] = keep
	}
}

// TestProjectionDDPRanks: the two ranks of ../shared/recorded/record_ddp
// run one model, rank 1 at twice rank 0's batch. Rank 0's snapshot
// projected to twice its batch is rank 1's measured peak within 1%: DDP's
// buckets are the gradients' size whatever the batch (taken for
// activations, they made the projection 6.2% too high).
func TestProjectionDDPRanks(t *testing.T) {
	var measured int64
	for _, f := range recordedAllocatedFacts {
		if f.File == "record_ddp/snapshot_rank1_683.pickle" {
			measured = f.PeakAllocated
		}
	}
	s := analysistest.OpenShared(t, "recorded", "record_ddp/snapshot_rank0_682.pickle")
	r, err := Project(s, DefaultOptions(), whatif.Size{Batch: 8, Seq: 512}, whatif.Size{Batch: 16, Seq: 512}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := float64(r.TotalBytes-measured) / float64(measured)
	t.Logf("rank 0 at batch 16: projected %d, rank 1 measured %d (%+.4f%%)", r.TotalBytes, measured, 100*e)
	if measured == 0 || e > 0.01 || e < -0.01 {
		t.Errorf("projected %d, rank 1 measured %d: %+.2f%%", r.TotalBytes, measured, 100*e)
	}
}

// TestDDPBucketViewSuggestion: a DDP run that keeps each parameter's .grad
// beside the Reducer's buckets is told to make the gradients views of the
// buckets (gradient_as_bucket_view=True), saving what the same run made
// that way saves at its peak — measured here by running it so — less at
// most one gradient (the one autograd just made, which the Reducer copies
// and frees) and the 1 MiB the allocator may leave unsplit in its block:
// never more. A run that already does it, or keeps no buckets, is not told.
func TestDDPBucketViewSuggestion(t *testing.T) {
	for _, kind := range frameKinds {
		for _, tc := range []struct {
			layers         int
			hidden, tokens int64
			cap            int64
			told           bool // the saving is above the floor: the run must be told
		}{{8, 1024, 256, 25 << 20, true}, {4, 2048, 512, 25 << 20, true}, {12, 768, 128, 4 << 20, true}, {8, 1024, 2048, 25 << 20, false}} {
			t.Run(fmt.Sprintf("%s, %d×%d, %d tokens", kind, tc.layers, tc.hidden, tc.tokens), func(t *testing.T) {
				analyze := func(ddp, view bool) (*result.Result, int64) {
					c := trainRun{layers: tc.layers, hidden: tc.hidden, tokens: tc.tokens, steps: 4, ws: 32 << 20, bucketView: view}
					if ddp {
						c.ddpCap = tc.cap
					}
					x := fx{st.NewSim(), kind}
					c.run(x)
					return Analyze(analysistest.Read(t, x.s, 0), DefaultOptions()), tc.hidden * tc.hidden * 4
				}
				find := func(r *result.Result) *result.Suggestion {
					for i := range r.Suggestions {
						if r.Suggestions[i].ID == "ddp_bucket_view" {
							return &r.Suggestions[i]
						}
						if id := r.Suggestions[i].ID; id == "set_to_none" || id == "activation_checkpointing" {
							t.Errorf("suggestion %s: %s", id, r.Suggestions[i].Because)
						}
					}
					return nil
				}
				kept, grad := analyze(true, false)
				views, _ := analyze(true, true)
				plain, _ := analyze(false, false)
				measured := kept.Devices[0].Peak.AllocatedBytes - views.Devices[0].Peak.AllocatedBytes
				sg := find(kept)
				switch {
				case sg == nil && tc.told:
					t.Fatalf("no ddp_bucket_view suggestion; made with views the run peaks %d B lower", measured)
				case sg != nil && (sg.EstimatedSavingsBytes > measured || sg.EstimatedSavingsBytes < measured-grad-1<<20):
					t.Errorf("ddp_bucket_view saves %d, made with views the run peaks %d B lower (one gradient %d)", sg.EstimatedSavingsBytes, measured, grad)
				case sg != nil && !tc.told:
					t.Errorf("ddp_bucket_view saving %d B at a peak of forward's activations (measured %d)", sg.EstimatedSavingsBytes, measured)
				}
				if sg != nil {
					t.Logf("saving %d, measured %d", sg.EstimatedSavingsBytes, measured)
				}
				if find(views) != nil {
					t.Error("the run with gradient_as_bucket_view=True is told to use it")
				}
				if find(plain) != nil {
					t.Error("a run without DDP is told about DDP's buckets")
				}
			})
		}
	}
}
