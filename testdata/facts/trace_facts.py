#!/usr/bin/env python3
"""Facts of the real chrome traces and memory timelines, for the rows of
TestTraceRealFiles (snapshot/trace_real_test.go), computed with Python's
json and gzip only — not with torchmem.

For a chrome trace (a dict with traceEvents):
  - devices: one per (Device Type, Device Id) of the [memory] events, as
    torchmem numbers them (Device Type 0 is the host: id -1; 1 is CUDA, 6
    ROCm's HIP); per device its number of [memory] events and its baseline:
    the first event's (in time order, stably) Total Allocated less its
    Bytes, -1 when it has no Total Allocated;
  - grads: the torch::autograd::AccumulateGrad ops;
  - markers: the ProfilerStep#N, Optimizer.step#…, Optimizer.zero_grad#…
    and enumerate(DataLoader)#… spans (cpu_op or user_annotation);
  - distributed: distributedInfo's rank, world size and backend.
For a memory timeline (export_memory_timeline's raw rows [time, action,
bytes, category]): one CUDA device whose events are the rows other than
PREEXISTING (action 1) and whose baseline is the PREEXISTING bytes.

Run from the repository root:
    python3 testdata/facts/trace_facts.py [SHARED_DIR]
It prints one line per trace of traces/ and recorded/ (recursively).
"""

import collections
import gzip
import json
import os
import sys

KINDS = {0: "cpu", 1: "cuda", 6: "rocm"}
MARKERS = [("ProfilerStep#", "step"), ("Optimizer.step#", "optimizer"),
           ("Optimizer.zero_grad#", "zero_grad"), ("enumerate(DataLoader)#", "data")]


def trace_facts(path):
    with gzip.open(path, "rt") as f:
        data = json.load(f)
    if isinstance(data, list):
        pre = sum(r[2] for r in data if r[1] == 1)
        return {"devices": [(0, "cuda", sum(1 for r in data if r[1] != 1), pre)], "grads": 0, "markers": {}}
    events = data.get("traceEvents", [])
    mem = collections.defaultdict(list)
    grads = 0
    markers = collections.Counter()
    for e in events:
        name = e.get("name", "")
        if name == "[memory]":
            a = e.get("args", {})
            typ, dev = a.get("Device Type"), a.get("Device Id")
            key = (-1 if typ == 0 else dev, KINDS.get(typ, "other"))
            mem[key].append((float(e.get("ts", 0)), a))
            continue
        if e.get("ph") != "X":
            continue
        if name == "torch::autograd::AccumulateGrad":
            grads += 1
        if e.get("cat") in ("cpu_op", "user_annotation"):
            for prefix, kind in MARKERS:
                if name.startswith(prefix):
                    markers[kind] += 1
    devices = []
    for key in sorted(mem):
        recs = sorted(mem[key], key=lambda r: r[0])
        a = recs[0][1]
        base = a["Total Allocated"] - a.get("Bytes", 0) if "Total Allocated" in a else -1
        devices.append((key[0], key[1], len(recs), base))
    d = data.get("distributedInfo")
    dist = (d.get("rank"), d.get("world_size"), d.get("backend")) if d else None
    return {"devices": devices, "grads": grads, "markers": dict(markers), "distributed": dist}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "..", "shared")
    for sub in ("traces", "recorded"):
        for root, _, files in sorted(os.walk(os.path.join(shared, sub))):
            for n in sorted(files):
                if n.endswith(".json.gz"):
                    p = os.path.join(root, n)
                    print(os.path.relpath(p, shared), json.dumps(trace_facts(p)))


if __name__ == "__main__":
    main()
