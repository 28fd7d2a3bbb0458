#!/usr/bin/env python3
"""What is true of the recordings in ../shared/recorded (PyTorch 2.11 on an
H200), for analysis/recorded_test.go — from the programs that made them
(../shared/gpu, recorded/README.md and each run's <name>.facts.json) and
from the files themselves read with Python's pickle, gzip and json only,
not with torchmem.

For every snapshot it prints a Go row of recordedTruth:
  - Params: the bytes of the model's parameters, requested (tensor) bytes:
    <name>.facts.json's parameters_bytes (frozen_base_bytes + adapter_bytes
    for the LoRA run), measured.jsonl's for the estimate snapshots, and for
    the `torchmem record` runs the blocks Module.to made
    (torch/nn/modules/module.py _apply frames: rec_*.py build the model on
    the CPU and move it);
  - Buffers: the model's buffers besides (Llama's rotary inv_freq and
    original_inv_freq, head_dim/2 = 32 elements each, in the weights' dtype),
    and Untold: what the program made before the recording without frames
    that is no weight (cuda_graph's static input, 16×512 int64);
  - OptState: AdamW's state, requested bytes (facts.json / measured.jsonl,
    or 2 × Params for the record runs: AdamW keeps exp_avg and exp_avg_sq);
  - Workspaces: the 32 MiB cuBLAS workspaces live at the dump, 2 in every
    run: each thread's handle takes one at its first matmul on a stream and
    keeps it — the main thread and the autograd thread in a training run;
    cuda_graph's warm-up side stream and its capture stream (the script
    checks that the dump holds at least two blocks of that size);
  - no gradient is alive at any dump: every training program calls
    zero_grad(set_to_none=True) after its step (the OOM run dies in a
    forward, after one);
  - hf_llama_mixed_ckpt_train: AutocastCopies and AutocastBytes, autocast's
    weight copies: in the chrome trace of the same run, the [memory]
    allocations inside aten::_to_copy under aten::to directly under
    aten::linear, whose aten::to input is float with the 2-D shape of a
    weight (the AccumulateGrad ops' shapes); mapped to the snapshot's
    allocations by address and size at the same time (within 50 µs), in the
    snapshot's requested bytes;
  - the amp estimate snapshot (autocast, stacks="all"): AutocastCopies -1,
    not known: at::autocast::cached_cast casts activations and weights
    alike, and at batch 2 × 512 tokens the hidden states' bf16 casts (2 MiB)
    have exactly the size of the q and o weights' copies;
  - hf_llama_lora16_bf16_train: KVPeak, the requested bytes of the blocks
    allocated under transformers' cache_utils.py live at the snapshot's
    peak (snapshot_facts.py's replay: the first event of the highest
    allocated bytes);
  - record_ddp (rec_ddp.py, DistributedDataParallel with its defaults):
    DDPBuckets, the Reducer's flat gradient buckets over the run, in
    allocation order. find_unused_parameters off: one bucket of every
    gradient at construction (the sum of the parameters Module.to made),
    rebuilt before the second iteration's forward in the order the
    gradients became ready — the reverse of the registration order for an
    nn.Sequential — a bucket closing once it holds 1 MiB (the first,
    _DEFAULT_FIRST_BUCKET_BYTES) or bucket_cap_mb = 25 MiB (the others).
    The script checks that the first was allocated and freed and the
    rebuilt ones are live at the dump, with these requested sizes;
  - cuda_graph_inference: GraphOutput, the graph's static output
    (facts.json graph_output_bytes), the block live in the graph's private
    pool (segment_pool_id (1, 0)) besides its workspaces.

It also prints timelinePeak, PyTorch's own categories of the mixed run
(hf_llama_mixed_ckpt_train.memory_timeline.raw.json.gz, export_memory_timeline's
raw rows [t ns, action, bytes, category]): a category's bytes are its
PREEXISTING rows (action 1) plus the later rows (CREATE +n, DESTROY −n, and
INCREMENT_VERSION's −n/+n pair moving a tensor between categories), the
rows sorted by time, stably; the peak is the first row after which the total
is highest. PyTorch's categories there, and the tensors PyTorch calls
parameter that the window created (CREATE rows live at the peak: time,
bytes) — a parameter is never created inside a training step.

Run from the repository root: python3 testdata/facts/recorded_facts.py [SHARED_DIR]
"""

import bisect
import collections
import gzip
import importlib.util
import json
import os
import pickle
import sys

_spec = importlib.util.spec_from_file_location(
    "snapshot_facts", os.path.join(os.path.dirname(os.path.abspath(__file__)), "snapshot_facts.py"))
sf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sf)

WS = 32 << 20


def load(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        return pickle.load(f)


def module_to_params(data):
    """Requested bytes of the blocks Module.to made that live at the dump."""
    trace = data["device_traces"][0]
    live = {}
    for e in trace:
        if e["action"] == "alloc":
            live[e["addr"]] = e
        elif e["action"] == "free_completed":
            live.pop(e["addr"], None)
    return sum(e["size"] for e in live.values() if any(
        f["filename"].endswith("torch/nn/modules/module.py") and f["name"] == "_apply" for f in e.get("frames", [])))


def module_to_sizes(data):
    """Requested bytes of the blocks Module.to made, in allocation order."""
    return [e["size"] for e in data["device_traces"][0] if e["action"] == "alloc" and any(
        f["filename"].endswith("torch/nn/modules/module.py") and f["name"] == "_apply" for f in e.get("frames", []))]


def ddp_buckets(name, data):
    """DDP's buckets of a rec_ddp.py rank (see the docstring), checked
    against the file."""
    sizes = module_to_sizes(data)
    buckets, cur = [sum(sizes)], 0
    for n in reversed(sizes):
        cur += n
        if cur >= ((1 << 20) if len(buckets) == 1 else (25 << 20)):
            buckets.append(cur)
            cur = 0
    if cur:
        buckets.append(cur)
    trace = data["device_traces"][0]
    first = [i for i, e in enumerate(trace) if e["action"] == "alloc" and e["size"] == buckets[0]]
    freed = [i for i, e in enumerate(trace) if e["action"] == "free_completed" and e["size"] == buckets[0]]
    if not first or not freed:
        sf.problem(f"{name}: no block of the construction's bucket ({buckets[0]} B) allocated and freed")
    live = collections.Counter(b["requested_size"] for s in data["segments"] for b in s["blocks"]
                               if b["state"] == "active_allocated")
    for n, k in collections.Counter(buckets[1:]).items():
        if live[n] < k:
            sf.problem(f"{name}: {k} rebuilt buckets of {n} B expected live at the dump, {live[n]} found")
    return buckets


def workspaces(data):
    """How many blocks of 32 MiB live at the dump (weights and state may
    have the size too)."""
    return sum(1 for s in data["segments"] for b in s["blocks"]
               if b["state"] == "active_allocated" and b["requested_size"] == WS)


def autocast_copies(shared, data):
    """autocast's weight copies of the mixed run (count, requested bytes)."""
    with gzip.open(os.path.join(shared, "recorded", "hf_llama_mixed_ckpt_train.trace.json.gz"), "rt") as f:
        tr = json.load(f)
    base = tr["baseTimeNanoseconds"]
    ops = collections.defaultdict(list)
    shapes = set()
    for e in tr["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            ops[e["tid"]].append((e["ts"], e["ts"] + e["dur"], e["name"], e.get("args", {})))
            if e["name"] == "torch::autograd::AccumulateGrad":
                a = e["args"]
                dims = a.get("Input Dims", [[]])[0]
                if len(dims) == 2 and a.get("Input type", [""])[0] == "float":
                    shapes.add(tuple(dims))
    starts = {}
    for t in ops:
        ops[t].sort()
        starts[t] = [o[0] for o in ops[t]]
    copies = []
    for e in tr["traceEvents"]:
        if e.get("name") != "[memory]" or e["args"].get("Device Type") != 1 or e["args"]["Bytes"] <= 0:
            continue
        t, ts = e["tid"], e["ts"]
        k = bisect.bisect_right(starts[t], ts)
        enc = [o for o in ops[t][max(0, k - 400):k] if o[1] >= ts]  # the ops open at ts, outermost first
        names = [o[2] for o in enc]
        if "aten::_to_copy" not in names or "aten::to" not in names:
            continue
        i = names.index("aten::to")
        a = enc[i][3]
        if i > 0 and names[i - 1] == "aten::linear" and tuple(a.get("Input Dims", [[]])[0]) in shapes and a.get("Input type", [""])[0] == "float":
            copies.append(((base + int(ts * 1000)) // 1000, e["args"]["Addr"], e["args"]["Bytes"]))
    trace = data["device_traces"][0]
    by = collections.defaultdict(list)
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            by[e["addr"]].append(i)
    n = total = 0
    for t, addr, size in copies:
        best = [i for i in by[addr] if abs(trace[i]["time_us"] - t) <= 50]
        if len(best) != 1:
            sf.problem(f"autocast copy at {addr:#x} {t}: {len(best)} snapshot allocations match")
            continue
        e = trace[best[0]]
        n += 1
        total += e["size"]
    return n, total


def kv_at_peak(data):
    r = sf.block_replay(data, 0)
    peak = r["PeakEvent"]
    trace = data["device_traces"][0]
    total = 0
    for b in r["Blocks"]:
        if b["alloc"] < 0 or not (b["alloc"] <= peak and (b["end"] is None or b["end"] > peak)):
            continue
        if any(f["filename"].endswith("transformers/cache_utils.py") for f in trace[b["alloc"]].get("frames", [])):
            total += b["req"]
    return total


TIMELINE_NAMES = ["parameter", "optimizer_state", "input", "temporary", "activation", "gradient", "autograd_detail", "unknown"]


def timeline_peak(shared):
    with gzip.open(os.path.join(shared, "recorded", "hf_llama_mixed_ckpt_train.memory_timeline.raw.json.gz"), "rt") as f:
        rows = json.load(f)
    cur = collections.Counter()
    for t, action, n, cat in rows:
        if action == 1:
            cur[TIMELINE_NAMES[cat]] += n
    events = sorted((r for r in rows if r[1] != 1 and r[2] != 0), key=lambda r: r[0])
    peak, at, at_i = sum(cur.values()), dict(cur), -1
    for i, (t, action, n, cat) in enumerate(events):
        cur[TIMELINE_NAMES[cat]] += n
        if sum(cur.values()) > peak:
            peak, at, at_i = sum(cur.values()), dict(cur), i
    # parameter tensors the window created and that are live at the peak:
    # CREATE rows not yet destroyed (a DESTROY of the same size and category
    # after the CREATE, before the peak, ends the earliest such tensor)
    live = []
    for i, (t, action, n, cat) in enumerate(events[:at_i + 1]):
        if TIMELINE_NAMES[cat] != "parameter":
            continue
        if action == 2:
            live.append((t, n))
        elif action == 4:
            for k, (t0, n0) in enumerate(live):
                if n0 == -n:
                    del live[k]
                    break
    return events[at_i][0], at, live


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "..", "shared")
    rec = os.path.join(shared, "recorded")
    measured = {}
    for line in open(os.path.join(rec, "estimate", "measured.jsonl")):
        m = json.loads(line)
        if "snapshot" in m:
            measured["estimate/" + m["snapshot"]["file"]] = m
    print("// Produced by: python3 testdata/facts/recorded_facts.py")
    print("var recordedTruths = []recordedTruth{")
    for name in sf.recorded_names(rec):
        data = load(os.path.join(rec, name))
        if workspaces(data) < 2:
            sf.problem(f"{name}: fewer than two 32 MiB blocks live at the dump")
        row = {"File": name, "Workspaces": 2}
        stem = name.split(".")[0]
        facts_path = os.path.join(rec, stem + ".facts.json")
        facts = json.load(open(facts_path)) if os.path.exists(facts_path) else {}
        if name in measured:
            m = measured[name]
            row.update(Params=m["parameters_bytes"], OptState=m["optimizer_state_bytes"])
            if m["arch"] == "llama":
                row["Buffers"] = 2 * 32 * 4
            if m["mode"] == "amp":
                row["AutocastCopies"] = -1  # not known: see the docstring
        elif "frozen_base_bytes" in facts:
            row.update(Params=facts["frozen_base_bytes"] + facts["adapter_bytes"], OptState=facts["optimizer_state_bytes"],
                       Buffers=2 * 32 * 2, KVPeak=kv_at_peak(data))
        elif name.startswith("hf_llama_mixed"):
            row.update(Params=facts["parameters_bytes"], OptState=2 * facts["parameters_bytes"], Buffers=2 * 32 * 4)
            row["AutocastCopies"], row["AutocastBytes"] = autocast_copies(shared, data)
        elif name.startswith("cuda_graph"):
            row.update(Params=facts["parameters_bytes"], Untold=16 * 512 * 8, GraphOutput=facts["graph_output_bytes"])
        else:  # torchmem record runs: the model moved to the GPU by Module.to
            p = module_to_params(data)
            row.update(Params=p, OptState=2 * p)
            if name.startswith("record_ddp/"):
                row["DDPBuckets"] = ddp_buckets(name, data)
        fields = ", ".join(f"{k}: " + ("[]int64{" + ", ".join(map(str, v)) + "}" if isinstance(v, list) else json.dumps(v))
                           for k, v in row.items())
        print(f"\t{{{fields}}},")
    print("}")
    t, cats, created = timeline_peak(shared)
    print()
    print("// Produced by: python3 testdata/facts/recorded_facts.py")
    print(f"var timelinePeak = timelineFacts{{TimeNS: {t}, Categories: map[string]int64{{" +
          ", ".join(f'"{k}": {v}' for k, v in sorted(cats.items())) + "},")
    print("\tCreatedParameters: [][2]int64{" + ", ".join(f"{{{a}, {b}}}" for a, b in created) + "}}")
    for p in sf.problems:
        print("recorded_facts.py:", p, file=sys.stderr)
    return 1 if sf.problems else 0


if __name__ == "__main__":
    sys.exit(main())
