#!/usr/bin/env python3
"""Ground-truth facts for the roll-up tests on the real multi-device and
multi-process inputs (rollup/realfiles_test.go), computed without
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
    median peak, the imbalance (the worst peak over the median peak of the
    other rows) and the first OOM;
  - the folders torchmem record wrote (recorded/record_ddp, record_oom):
    each rank's peak as above, the imbalance of the two DDP ranks, and of
    the OOM run's two files (one process) the OOM's request and time in
    each, its peak and the allocated bytes at the exit dump (its active
    blocks); the peak of the trace run's snapshot and the allocated bytes at
    the end of its trace.

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
    others = list(rows)
    others.remove(worst)
    imb = round(worst / statistics.median(others), 4)
    print(f"together: rows {len(rows)} worst {worst} median {med} imbalance {imb}")
    ooms = sorted((t, d) for d, (_, t) in snap.items() if t is not None)
    print(f"together: ooms {len(ooms)} first device {ooms[0][1]} at {ooms[0][0]}")

    rec = os.path.join(shared, "recorded")
    ddp = {}
    for name in sorted(os.listdir(os.path.join(rec, "record_ddp"))):
        (peak, _), = snapshot_facts(os.path.join(rec, "record_ddp", name)).values()
        ddp[name] = peak
        print(f"record_ddp {name}: peak {peak}")
    p0, p1 = ddp.values()
    print(f"record_ddp: imbalance {round(max(p0, p1) / min(p0, p1), 4)}")
    for name in sorted(os.listdir(os.path.join(rec, "record_oom"))):
        with open(os.path.join(rec, "record_oom", name), "rb") as f:
            data = pickle.load(f)
        ooms = [(e["size"], e["time_us"]) for t in data["device_traces"] for e in t if e["action"] == "oom"]
        alloc = sum(b["size"] for s in data["segments"] for b in s["blocks"] if b["state"] == "active_allocated")
        (peak, _), = snapshot_facts(os.path.join(rec, "record_oom", name)).values()
        print(f"record_oom {name}: peak {peak} ooms (size, time_us) {ooms} allocated at the dump {alloc}")
    for name in sorted(os.listdir(os.path.join(rec, "record_trace"))):
        if name.endswith(".pickle"):
            (peak, _), = snapshot_facts(os.path.join(rec, "record_trace", name)).values()
            print(f"record_trace {name}: peak {peak}")
        else:
            with gzip.open(os.path.join(rec, "record_trace", name), "rt") as f:
                mem = [e for e in json.load(f)["traceEvents"] if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1]
            last = max(mem, key=lambda e: e["ts"])["args"]["Total Allocated"]
            print(f"record_trace {name}: CUDA Total Allocated at its last [memory] event {last}")


if __name__ == "__main__":
    main()
