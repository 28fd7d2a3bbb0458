#!/usr/bin/env python3
"""Derive, independently of torchmem's Go code, how the memory live at the end
of three real training snapshots splits into parameters, gradients and
optimizer state. The totals it prints are the expected values of
analysis/truth_test.go.

Usage: python3 derive_training_truth.py [../../../shared/snapshots]

Each file holds one training step recorded with
torch.cuda.memory._record_memory_history(stacks="all"): forward, backward and
an AdamW step (a custom AdamW in a torch.optim.Optimizer subclass), with
external_annotations for Optimizer.step (and Optimizer.zero_grad), then
_dump_snapshot. Only the pickle module is used.

How the truth is read from a file (device 0):

1. Replay the trace: an `alloc` opens a block at its address, `free_completed`
   closes it. A block active in the dump-time segments that no trace `alloc`
   opened was allocated before recording began ("pre-existing").
2. Phases from the trace itself: backward starts at the allocation whose
   frames hold torch/_tensor.py `backward` (the grad seed made by
   _make_grads); the optimizer step is the Optimizer.step#AdamW.step
   annotation window (time_us).
3. Optimizer state = blocks live at the dump that were allocated inside the
   Optimizer.step window, or (notHanmin, whose state was created in an
   earlier, unrecorded step) pre-existing blocks whose own frames are the
   optimizer's `step` under torch/optim/optimizer.py `wrapper`. AdamW keeps
   exp_avg and exp_avg_sq per parameter: the sizes must come in pairs.
4. Gradient candidates = blocks live at the dump allocated between the start
   of backward and the optimizer step (the autograd engine's threads: these
   allocations have C++ frames only).
5. Parameter candidates = pre-existing blocks never freed, without optimizer
   frames (parameters were created before recording).
6. A parameter has exactly one gradient and two AdamW tensors of its own size,
   so for every size s: parameters(s) = min(P(s), G(s), O(s)/2). The script
   asserts that the gradients and the optimizer state pair up exactly, and
   lists what is left over in each group with the evidence for what it is
   (cuBLAS workspaces are recognised by their frames: at::cuda::getNewWorkspace
   under getCurrentCUDABlasHandle; 8,519,680 B = 4096 KiB*2 + 16 KiB*8 and
   33,554,432 B = 4096 KiB*8 are PyTorch's default workspace sizes).

Pairing is by trace size, i.e. requested bytes (for pre-existing blocks the
block's requested_size): a parameter and its gradient ask for the same bytes,
while the allocator may give their blocks different unsplit rests. The totals
are printed in both units; torchmem's allocated_bytes and categories count
the allocator's blocks (the dump's `size` of each block, all live at the
dump), PyTorch's memory_allocated() unit.

7. The gradients of the previous step (notHanmin: created before recording,
   freed by Optimizer.zero_grad after the forward): pre-existing blocks whose
   free falls inside the Optimizer.zero_grad annotation window, in both
   units; their block sizes come from block_replay of
   testdata/facts/snapshot_facts.py, since they are not in the dump.
"""
import collections
import importlib.util
import os
import pickle
import sys

_spec = importlib.util.spec_from_file_location(
    "snapshot_facts", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "facts", "snapshot_facts.py"))
snapshot_facts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(snapshot_facts)

FILES = ["wedsonlin_medium_128_training.pickle", "kkaitlyn_ctx128_fullstep.pickle", "nothanmin_fullstep.pickle"]


def py_frames(frames):
    return [f for f in frames or [] if f["filename"].endswith(".py")]


def has_name(frames, *subs):
    return any(any(s in f["name"] for s in subs) for f in frames or [])


def optimizer_frames(frames):
    """The block was made by an optimizer step: its innermost Python frame is
    a `step` function called by torch/optim/optimizer.py's wrapper."""
    pys = py_frames(frames)
    for i, f in enumerate(pys[:-1]):
        if f["name"] == "step" and pys[i + 1]["filename"].endswith("torch/optim/optimizer.py"):
            return True
    return False


def derive(path):
    d = pickle.load(open(path, "rb"))
    trace = d["device_traces"][0]
    ann = {(a["name"].split("#")[0], a["stage"]): a["time_us"] for a in d.get("external_annotations", [])}
    opt_start, opt_end = ann[("Optimizer.step", "START")], ann[("Optimizer.step", "END")]

    backward_start = None
    live = {}  # addr -> (index, entry)
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            live[e["addr"]] = (i, e)
            if backward_start is None and any(
                f["filename"].endswith("torch/_tensor.py") and f["name"] == "backward" for f in e.get("frames", [])
            ):
                backward_start = i
        elif e["action"] == "free_completed":
            live.pop(e["addr"], None)
    assert backward_start is not None, "no torch/_tensor.py backward frame"

    blocks = [b for s in d["segments"] if s["device"] == 0 for b in s["blocks"] if b["state"] == "active_allocated"]
    P, G, O, other = [], [], [], []
    for b in blocks:
        if b["address"] in live:
            i, e = live[b["address"]]
            rec = dict(size=e["size"], rounded=b["size"], frames=e.get("frames", []), index=i)
            if opt_start <= e["time_us"] <= opt_end:
                O.append(rec)
            elif backward_start <= i and e["time_us"] < opt_start:
                G.append(rec)
            else:
                other.append(("allocated in the trace outside backward/optimizer (forward outputs kept: logits, loss)", rec))
        else:
            rec = dict(size=b["requested_size"], rounded=b["size"], frames=b["frames"], index=None)
            if optimizer_frames(b["frames"]):
                O.append(rec)
            elif not b["frames"]:
                P.append(rec)
            else:
                other.append(("pre-existing with frames", rec))

    cP = collections.Counter(r["size"] for r in P)
    cG = collections.Counter(r["size"] for r in G)
    cO = collections.Counter(r["size"] for r in O)
    assert all(v % 2 == 0 for v in cO.values()), "AdamW state must come in pairs"
    params = {s: min(cP[s], cG[s], cO[s] // 2) for s in cG if min(cP[s], cG[s], cO[s] // 2) > 0}
    # The optimizer state pairs exactly with the parameters that have gradients.
    assert {s: c // 2 for s, c in cO.items()} == params, (cO, params)

    def take(recs, counts, label):
        left = collections.Counter(counts)
        kept, rest = [], []
        for r in sorted(recs, key=lambda r: (r["index"] is None, r["index"] or 0)):
            if left[r["size"]] > 0:
                left[r["size"]] -= 1
                kept.append(r)
            else:
                rest.append(r)
        return kept, rest

    p_kept, p_rest = take(P, params, "parameter")
    g_kept, g_rest = take(G, params, "gradient")
    o_kept = O
    out = collections.OrderedDict()
    out["parameter"] = sum(r["size"] for r in p_kept)
    out["gradient"] = sum(r["size"] for r in g_kept)
    out["optimizer_state"] = sum(r["size"] for r in o_kept)
    out["n_parameters"] = len(p_kept)
    out["parameter_blocks"] = sum(r["rounded"] for r in p_kept)
    out["gradient_blocks"] = sum(r["rounded"] for r in g_kept)
    out["optimizer_state_blocks"] = sum(r["rounded"] for r in o_kept)
    out["allocated_end_blocks"] = sum(b["size"] for b in blocks)
    rep = snapshot_facts.block_replay(d, 0)
    assert rep["EndAllocated"] == out["allocated_end_blocks"]
    out["peak_blocks"], out["peak_event"] = rep["PeakAllocated"], rep["PeakEvent"]
    if ("Optimizer.zero_grad", "START") in ann:
        z0, z1 = ann[("Optimizer.zero_grad", "START")], ann[("Optimizer.zero_grad", "END")]
        freed = {i for i, e in enumerate(trace) if e["action"] == "free_requested" and z0 <= e["time_us"] <= z1}
        old = [b for b in rep["Blocks"] if b["alloc"] < 0 and b["end"] in freed]
        out["zero_grad_frees_old"] = len(old)
        out["zero_grad_frees_old_requested"] = sum(b["req"] for b in old)
        out["zero_grad_frees_old_blocks"] = sum(b["size"] for b in old)
        live_at_peak = [b for b in old if b["end"] > rep["PeakEvent"]]
        assert len(live_at_peak) == len(old), "freed before the peak"
    assert len(g_kept) == len(p_kept) and len(o_kept) == 2 * len(p_kept)
    assert out["gradient"] == out["parameter"] and out["optimizer_state"] == 2 * out["parameter"]
    print(f"== {os.path.basename(path)}")
    print(f"   backward starts at trace index {backward_start}; Optimizer.step {opt_start}..{opt_end} us")
    for k, v in out.items():
        print(f"   {k:30s} {v:>16,d}")
    total = sum(b["requested_size"] for b in blocks)
    print(f"   live at the dump: {len(blocks)} blocks, {total:,d} B requested")
    for size, n in sorted(collections.Counter(r["size"] for r in p_rest).items()):
        why = "cuBLAS workspace size" if size in (8519680, 33554432) else "buffer or input batch (no gradient, no optimizer state)"
        print(f"   left over, pre-existing: {n:3d} x {size:>12,d} B  {why}")
    for r in g_rest:
        why = "cuBLAS workspace (frames)" if has_name(r["frames"], "getNewWorkspace", "getCurrentCUDABlasHandle") else "not a parameter size"
        print(f"   left over, backward:       1 x {r['size']:>12,d} B  {why}")
    for why, r in other:
        what = "cuBLAS workspace (frames)" if has_name(r["frames"], "getNewWorkspace", "getCurrentCUDABlasHandle") else why
        print(f"   other:                     1 x {r['size']:>12,d} B  {what}")
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "..", "shared", "snapshots")
    for f in FILES:
        derive(os.path.join(root, f))


if __name__ == "__main__":
    main()
