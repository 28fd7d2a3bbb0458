package main

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/torchmem/torchmem/check"
	"github.com/torchmem/torchmem/diff"
	st "github.com/torchmem/torchmem/internal/snapshottest"
)

// checkResult runs check --format json and decodes its one result.
func checkResult(t *testing.T, wantCode int, args ...string) *check.Result {
	t.Helper()
	code, out, stderr := runCLI(nil, append([]string{"check", "--format", "json"}, args...)...)
	if code != wantCode {
		t.Fatalf("check %v: exit %d, want %d\n%s", args, code, wantCode, stderr)
	}
	var cr check.Result
	if err := json.Unmarshal([]byte(out), &cr); err != nil {
		t.Fatal(err)
	}
	return &cr
}

// failedKeys lists the keys of a result's failed checks, sorted, and the
// smallest growth over the baseline among them.
func failedKeys(cr *check.Result) (keys []string, least int64) {
	least = -1
	for _, it := range cr.Checks {
		if it.Status != check.CheckFail {
			continue
		}
		keys = append(keys, it.Key)
		if it.Baseline != nil && (least < 0 || it.Actual-*it.Baseline < least) {
			least = it.Actual - *it.Baseline
		}
	}
	sort.Strings(keys)
	return keys, least
}

// TestCheckNoiseFloor: growth counts only above the noise floor (by
// default the larger of 16 MiB and 1% of the baseline's peak), on real
// pairs of runs and on simulated ones.
func TestCheckNoiseFloor(t *testing.T) {
	// wedsonlin's model at 256 tokens, then at 128: nothing grew for real
	// (the peak fell from 8.49 to 6.54 GiB), but three comparisons of 0%
	// tolerance failed before there was a floor: a 40 MiB gradient live at
	// the backward peak of one run and not the other, the autograd engine's
	// buffers +2 MiB, the gradients at the optimizer peak +480 KiB.
	long := shared(t, "snapshots", "wedsonlin_medium_256_training.pickle")
	short := shared(t, "snapshots", "wedsonlin_medium_128_training.pickle")
	cr := checkResult(t, exitOK, short, "--baseline", long)
	if cr.Failed != 0 || cr.Passed != 25 || cr.Floor == nil || *cr.Floor != check.DefaultFloor {
		t.Errorf("shorter sequence: %d failed, %d passed, floor %+v", cr.Failed, cr.Passed, cr.Floor)
	}
	for _, it := range cr.Checks {
		// 1% of the baseline's peak of 9,113,374,720 B (8.49 GiB).
		if it.Kind == check.CheckKindRegression && it.NoiseFloor != 91_133_747 {
			t.Errorf("%s: noise floor %d", it.Name, it.NoiseFloor)
		}
	}
	cr = checkResult(t, exitFailed, short, "--baseline", long, "--floor", "0")
	keys, _ := failedKeys(cr)
	if diff := cmp.Diff([]string{"phase:backward:autograd_detail", "phase:backward:gradient", "phase:optimizer:gradient"}, keys); diff != "" {
		t.Errorf("--floor 0 fails on noise (-want +got):\n%s", diff)
	}

	// Two ranks of a DDP job, rank 1 with twice the batch: the activations,
	// temporaries and the autograd engine's buffers grew by 128 MiB or more
	// and fail; the phases after backward differ only by the 32–64 KiB of
	// the larger input batch, and pass.
	rank0 := shared(t, "recorded", "record_ddp/snapshot_rank0_682.pickle")
	rank1 := shared(t, "recorded", "record_ddp/snapshot_rank1_683.pickle")
	cr = checkResult(t, exitFailed, rank1, "--baseline", rank0)
	keys, least := failedKeys(cr)
	real := []string{"peak", "phase:backward", "phase:backward:activation", "phase:backward:autograd_detail",
		"phase:forward", "phase:forward:activation", "phase:forward:temporary"}
	if diff := cmp.Diff(real, keys); diff != "" || least < 128<<20 {
		t.Errorf("twice the batch: least growth failed %d (-want +got):\n%s", least, diff)
	}
	cr = checkResult(t, exitFailed, rank1, "--baseline", rank0, "--floor", "0")
	if keys, least := failedKeys(cr); len(keys) != 15 || least > 64<<10 {
		t.Errorf("--floor 0: %d failed (least growth %d): %v", len(keys), least, keys)
	}

	// A category of 1 GiB that grows by 20% fails: three layers of a
	// model of hidden size 1024 at 1024 tokens keep 204 MiB of activations
	// per sample (1020 MiB at batch 5, 1224 MiB at batch 6); 1% of the
	// baseline's peak is less than 16 MiB, the floor.
	dir := t.TempDir()
	sim := func(name string, batch int64) string {
		c := st.TrainConfig{Layers: 3, Hidden: 1024, Seq: 1024, Batch: batch, Heads: 8, Steps: 2, NoBwdStack: true}
		return writeTemp(t, dir, name, st.Marshal(st.Train(c).Snapshot(), 4))
	}
	five, six := sim("b5.pickle", 5), sim("b6.pickle", 6)
	cr = checkResult(t, exitFailed, six, "--baseline", five)
	found := false
	for _, it := range cr.Checks {
		if it.Key != "phase:forward:activation" {
			continue
		}
		found = true
		if it.Status != check.CheckFail || *it.Baseline>>20 != 1020 || it.Actual>>20 != 1224 || it.NoiseFloor != 16<<20 ||
			!strings.Contains(it.Message, "1020 MiB → 1.20 GiB (+20.0%), more than the 0% tolerance and the 16.0 MiB noise floor") {
			t.Errorf("activations +20%%: %+v", it)
		}
	}
	if !found {
		t.Error("no check of the activations at the forward peak")
	}
}

// TestCheckDiffSameSites: on the yiyi pair (a 1.3B model, then a larger
// one that filled 11 GiB), check and diff name the sites alike. The
// weights are allocated at pytorch_backend.py:195 in the first run and
// :190 in the second; check called the site new ("0 B → 11.0 GiB") while
// diff matched it with its old line.
func TestCheckDiffSameSites(t *testing.T) {
	base := shared(t, "snapshots", "genA_torch2.0_yiyi_1.3b_snapshot.pickle")
	run := shared(t, "snapshots", "genA_torch2.0_yiyi_oom_snapshot.pickle")
	code, out, stderr := runCLI(nil, "diff", "--format", "json", base, run)
	if code != exitOK {
		t.Fatalf("diff: exit %d %s", code, stderr)
	}
	var d diff.Result
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	bySite := map[string]diff.SiteDiff{}
	for _, sd := range d.Devices[0].Sites {
		bySite[sd.Site] = sd
	}
	for _, sd := range d.Devices[0].PhaseSites {
		bySite[sd.Site] = sd
	}
	cr := checkResult(t, exitFailed, run, "--baseline", base)
	named := 0
	for _, it := range cr.Checks {
		for _, s := range it.Sites {
			named++
			sd, ok := bySite[s.Site]
			if !ok || sd.BaseSite != s.BaselineSite || sd.Bytes.Base != *s.Baseline || sd.Bytes.New != s.Bytes {
				t.Errorf("%s: check names %s; diff %+v", it.Name, s.Describe(), sd)
			}
			if s.Site != "pytorch_backend.py:190 allocate" || s.BaselineSite != "pytorch_backend.py:195 allocate" {
				t.Errorf("%s: site %s", it.Name, s.Describe())
			}
		}
	}
	if named != 3 { // the peak, the unknown phase's peak and the parameters at it
		t.Errorf("%d sites named", named)
	}
	_, text, _ := runCLI(nil, "check", run, "--baseline", base)
	if want := "grew most: pytorch_backend.py:190 allocate (was pytorch_backend.py:195 allocate) 5.29 GiB →\n          11.0 GiB (+5.74 GiB)"; !strings.Contains(text, want) {
		t.Errorf("check says\n%s\nwant %q", text, want)
	}
}
