#!/usr/bin/env python3
"""Ground-truth facts for the roll-up tests on the real multi-device and
multi-process inputs (analysis/rollup/realfiles_test.go), computed without
torchmem, with Python's own pickle, gzip and json modules:

  - the 3-device OOM snapshot (genF_torch2.8_constructorsun_OOM_expandable_3dev):
    per device, the peak of allocated bytes in allocator blocks
    (memory_allocated()'s unit), from block_replay of snapshot_facts.py
    beside this script (blocks sized by the caching allocator's rules,
    ending at the dump's allocated_size), and the time_us of its first oom
    entry;
  - the DDP trace (hta_ddp_training_gpu_memory): distributedInfo, and per
    CUDA device the highest "Total Allocated" of its [memory] events;
  - for the roll-up of both files analysed together: the worst row, the
    median peak, the imbalance and the first OOM.

Run from the repository root:  python3 testdata/facts/rollup_facts.py [SHARED_DIR]
"""

import gzip
import importlib.util
import json
import os
import pickle
import statistics
import sys

_spec = importlib.util.spec_from_file_location(
    "snapshot_facts", os.path.join(os.path.dirname(os.path.abspath(__file__)), "snapshot_facts.py"))
blocks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(blocks)


def snapshot_facts(path):
    with open(path, "rb") as f:
        data = pickle.load(f)
    devices = {seg["device"] for seg in data["segments"]}
    out = {}
    for dev, trace in enumerate(data["device_traces"]):
        if not trace and dev not in devices:
            continue
        peak = blocks.block_replay(data, dev)["PeakAllocated"]
        oom_time = next((e["time_us"] for e in trace if e["action"] == "oom"), None)
        out[dev] = (peak, oom_time)
    return out


def trace_facts(path):
    with gzip.open(path, "rt") as f:
        data = json.load(f)
    peaks = {}
    for e in data["traceEvents"]:
        if e.get("name") != "[memory]":
            continue
        a = e["args"]
        if a.get("Device Type") != 1:  # CUDA
            continue
        dev = a["Device Id"]
        peaks[dev] = max(peaks.get(dev, 0), a["Total Allocated"])
    return data.get("distributedInfo"), peaks


def main():
    shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join("..", "shared")
    snap = snapshot_facts(os.path.join(shared, "snapshots", "genF_torch2.8_constructorsun_OOM_expandable_3dev.pickle"))
    for dev, (peak, oom) in sorted(snap.items()):
        print(f"3dev device {dev}: peak {peak} oom_time_us {oom}")
    info, peaks = trace_facts(os.path.join(shared, "traces", "hta_ddp_training_gpu_memory.json.gz"))
    print(f"ddp distributedInfo {info}")
    for dev, peak in sorted(peaks.items()):
        print(f"ddp device {dev}: peak {peak}")
    rows = [p for p, _ in snap.values()] + list(peaks.values())
    worst = max(rows)
    med = statistics.median(rows)
    print(f"together: rows {len(rows)} worst {worst} median {med} imbalance {round(worst / med, 4)}")
    ooms = sorted((t, d) for d, (_, t) in snap.items() if t is not None)
    print(f"together: ooms {len(ooms)} first device {ooms[0][1]} at {ooms[0][0]}")


if __name__ == "__main__":
    main()
