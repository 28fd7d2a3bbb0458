#!/usr/bin/env python3
"""Ground truth for the categories of memory allocated before recording, on
the real files of ../shared (analysis/categories_kinds_test.go), computed
with Python's pickle, gzip and json only — not with torchmem.

  bcrafton (genG_torch2.10x_bcrafton.pickle): one AdamW step, no zero_grad:
    gradients accumulate in place into .grad tensors made before the
    recording. The blocks live at the dump that the trace never allocated
    and that carry no frames are the candidates. The optimizer state is the
    blocks allocated inside the Optimizer.step#AdamW.step window and kept
    (the step also frees the state it replaces). AdamW keeps 2 tensors per
    parameter, so a size s stands for P(s) = state(s) / 2 parameters: per
    size, the P(s) candidates of lowest address are parameters, the next P(s)
    gradients (the address order only decides which of two equal requests is
    which; requested bytes do not depend on it). Candidates of 8,519,680 B
    (PyTorch's default cuBLAS workspace) are workspaces.
  hta_memory_timeline_categories.raw.json.gz: PyTorch's own categories. The
    memory of a category is its PREEXISTING rows plus its CREATE rows minus
    its DESTROY rows, INCREMENT_VERSION moving bytes from one category to
    another (rows sorted by time, stably); the peak is the first row after
    which the total is highest.
  cranberrii (genB_torch2.1_cranberrii.pickle): QLoRA. Gradients are the
    blocks allocated in backward (from the first allocation with a
    torch/_tensor.py backward frame) and live at the dump; the LoRA weights
    are candidates of a gradient's size; the other candidates are the frozen
    base weights (4-bit packed weights and their quantization state, the
    fp16 embeddings), less the workspaces. Frames of bitsandbytes' 4-bit
    matmul in the trace say the base is quantized.
  albi2, zijiandu: dumps without history: per device, the blocks without
    frames, and among them those of the cuBLAS workspace size.
  lfielike (genD_torch2.4_lfielike_state_only.pickle): generation with a
    quantized key/value cache in a copy of transformers' cache_utils.py
    (cache_utils_V2.py update_new): the blocks live at the dump with a frame
    in a file named cache_utils*.py are the cache, and those with frames in
    no such file are not (figures asserted by TestLfielikeKVCache).

Sizes are given as requested bytes and as blocks (the dump's `size`).
Run from the repository root: python3 testdata/facts/category_facts.py [SHARED_DIR]
"""

import collections
import gzip
import json
import os
import pickle
import sys

WORKSPACE = 2 * 4096 * 1024 + 8 * 16 * 1024  # 8,519,680


def load(shared, name):
    with open(os.path.join(shared, "snapshots", name), "rb") as f:
        return pickle.load(f)


def live_untraced(data, dev=0):
    """Blocks active_allocated at the dump that no trace alloc opened."""
    trace = data["device_traces"][dev] if data["device_traces"] else []
    opened = {e["addr"] for e in trace if e["action"] == "alloc"}
    return [b for s in data["segments"] if s["device"] == dev for b in s["blocks"]
            if b["state"] == "active_allocated" and b["address"] not in opened]


def sums(blocks):
    return {"blocks": len(blocks), "requested": sum(b["requested_size"] for b in blocks),
            "bytes": sum(b["size"] for b in blocks)}


def bcrafton(shared):
    d = load(shared, "genG_torch2.10x_bcrafton.pickle")
    trace = d["device_traces"][0]
    ann = {a["stage"]: a["time_us"] for a in d["external_annotations"] if a["name"].startswith("Optimizer.step#AdamW")}
    lo, hi = ann["START"], ann["END"]
    live = {}
    kept, replaced = [], []
    opened = set()
    for e in trace:
        if e["action"] == "alloc":
            live[e["addr"]] = e
            opened.add(e["addr"])
        elif e["action"] == "free_completed":
            if e["addr"] not in live and lo <= e["time_us"] <= hi:
                replaced.append(e["size"])
            live.pop(e["addr"], None)
    kept = [e["size"] for e in live.values() if lo <= e["time_us"] <= hi]
    cand = [b for b in live_untraced(d) if not b["frames"]]
    k = 2  # AdamW: exp_avg, exp_avg_sq
    per = collections.Counter()
    for sz, n in collections.Counter(kept).items():
        per[sz] = max(per[sz], n // k)
    for sz, n in collections.Counter(replaced).items():
        per[sz] = max(per[sz], n // k)
    by_size = collections.defaultdict(list)
    for b in sorted(cand, key=lambda b: b["address"]):
        by_size[b["requested_size"]].append(b)
    params, grads, work, rest = [], [], [], []
    for sz, bl in by_size.items():
        p = per[sz]
        params += bl[:p]
        grads += bl[p:2 * p]
        for b in bl[2 * p:]:
            (work if sz == WORKSPACE else rest).append(b)
    state = [b for s in d["segments"] for b in s["blocks"] if b["state"] == "active_allocated" and b["address"] in live
             and lo <= live[b["address"]]["time_us"] <= hi]
    return {"parameter": sums(params), "gradient": sums(grads), "optimizer_state": sums(state),
            "workspace": sums(work), "unknown": sums(rest), "parameters": sum(per.values()),
            "state_tensors": len(kept), "replaced_state_tensors": len(replaced)}


def hta(shared):
    with gzip.open(os.path.join(shared, "traces", "hta_memory_timeline_categories.raw.json.gz"), "rt") as f:
        rows = json.load(f)
    names = ["parameter", "optimizer_state", "input", "temporary", "activation", "gradient", "autograd_detail", "unknown"]
    cur = collections.Counter()
    for t, action, n, cat in rows:
        if action == 1:  # PREEXISTING
            cur[names[cat]] += n
    events = sorted((r for r in rows if r[1] != 1 and r[2] != 0), key=lambda r: r[0])
    peak, peak_at, at_peak = sum(cur.values()), -1, dict(cur)
    for i, (t, action, n, cat) in enumerate(events):
        cur[names[cat]] += n
        if sum(cur.values()) > peak:
            peak, peak_at, at_peak = sum(cur.values()), i, dict(cur)
    return {"peak": peak, "peak_event": peak_at, "at_peak": at_peak, "at_end": dict(cur)}


def cranberrii(shared):
    d = load(shared, "genB_torch2.1_cranberrii.pickle")
    trace = d["device_traces"][0]
    backward = next(i for i, e in enumerate(trace) if e["action"] == "alloc" and any(
        f["filename"].endswith("torch/_tensor.py") and f["name"] == "backward" for f in e.get("frames", [])))
    live = {}
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            live[e["addr"]] = i
        elif e["action"] == "free_completed":
            live.pop(e["addr"], None)
    grads = collections.Counter(b["requested_size"] for s in d["segments"] for b in s["blocks"]
                                if b["state"] == "active_allocated" and live.get(b["address"], -1) >= backward)
    cand = live_untraced(d)
    lora, frozen, work = [], [], []
    left = collections.Counter(grads)
    for b in sorted(cand, key=lambda b: b["address"]):
        if left[b["requested_size"]] > 0:
            left[b["requested_size"]] -= 1
            lora.append(b)
        elif b["requested_size"] == WORKSPACE and not b["frames"]:
            work.append(b)
        else:
            frozen.append(b)
    bnb4 = sum(1 for e in trace for f in e.get("frames", []) if "bitsandbytes" in f["filename"] and "4bit" in f["name"])
    end = sum(b["size"] for s in d["segments"] for b in s["blocks"] if b["state"] == "active_allocated")
    return {"lora_parameters": sums(lora), "frozen_base": sums(frozen), "workspace": sums(work),
            "bitsandbytes_4bit_frames": bnb4, "allocated_end": end,
            "frozen_share_of_end": round(sum(b["size"] for b in frozen) / end, 3)}


def no_history(shared, name):
    d = load(shared, name)
    out = {}
    for dev in sorted({s["device"] for s in d["segments"]}):
        blocks = [b for s in d["segments"] if s["device"] == dev for b in s["blocks"] if b["state"] == "active_allocated"]
        bare = [b for b in blocks if not b["frames"]]
        work = [b for b in bare if b["requested_size"] == WORKSPACE]
        work = work if len(work) <= 4 else []
        out[dev] = {"all": sums(blocks), "no_frames": sums([b for b in bare if b not in work]), "workspace_by_size": sums(work)}
    return out


def kv_cache(shared, name):
    d = load(shared, name)
    live = [b for s in d["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
    cache = [b for b in live if any(os.path.basename(f["filename"]).startswith("cache_utils") for f in b["frames"] or [])]
    framed = [b for b in live if b["frames"] and b not in cache]
    return {"kv_cache": sums(cache), "other_with_frames": sums(framed), "all": sums(live)}


def main():
    shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join("..", "shared")
    out = {"bcrafton": bcrafton(shared), "hta_memory_timeline": hta(shared), "cranberrii": cranberrii(shared),
           "albi2": no_history(shared, "edge_2dev_expandable_no_trace_albi2.pickle"),
           "zijiandu": no_history(shared, "genB_torch2.1_zijiandu_state_only_diffusion.pickle"),
           "lfielike": kv_cache(shared, "genD_torch2.4_lfielike_state_only.pickle")}
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
