#!/usr/bin/env python3
"""Hand check of `torchmem diff` on two real snapshots of related runs.

This script is the independent check behind TestDiffRealSnapshots in
cmd/torchmem/diff_test.go. It reads two PyTorch CUDA memory snapshots with
Python's own `pickle` module (no torch, no torchmem code) and prints, per
device, the numbers `torchmem diff --format json BASE NEW` must report, and
their deltas (new - base).

What is compared, like with like, in allocator blocks (PyTorch's
memory_allocated() unit, the unit of torchmem's allocated figures): each
block's size comes from block_replay of testdata/facts/snapshot_facts.py
(the dump's size for blocks live at the dump, the caching allocator's rules
for the others); everything else here is this script's own:

  end_allocated   Σ size of the dump's blocks in state active_allocated (a
                  block pending free is no longer allocated).
  end_reserved    Σ total_size of the dump's segments.
  peak_allocated  the maximum of the allocated curve, which is rebuilt
                  BACKWARDS from end_allocated: before an `alloc` entry the
                  allocated bytes were (after − its block), before the entry
                  that ends a block's allocation (free_requested, or
                  free_completed without one) (after + its block). The curve's value
                  before the first entry counts too. torchmem replays
                  FORWARDS, pairing allocations with frees by address and
                  reconstructing blocks allocated before recording began, so
                  the two methods are independent.
  peak_reserved   reserved bytes at the peak (the first event reaching it),
                  rebuilt backwards from end_reserved over segment_alloc /
                  segment_map (−size) and segment_free / segment_unmap
                  (+size).
  initial_allocated  the curve's value before the first entry (memory
                  allocated before recording began).
  optimizer_peak, zero_grad_peak  the highest allocated value inside an
                  `Optimizer.step#…` (`Optimizer.zero_grad#…`) annotation
                  window START..END: after every entry whose time_us lies in
                  it; for a window without entries, the level during it
                  (after the last entry before it, or initial_allocated).
                  torchmem's optimizer (zero_grad) phase peak must equal it:
                  torchmem takes these phases from the same annotations.
  sites           bytes live at the peak per allocation site, the site being
                  "basename:line function" of the innermost frame of user
                  Python code (a .py file outside site-packages,
                  dist-packages, lib/python and torch/). Blocks allocated
                  before recording began and carrying no frames are
                  "<allocated before recording>": those freed (with no
                  allocation in the trace) after the peak, plus those live
                  at the dump that the trace never allocated. Blocks are
                  paired by address in a forward pass.

Run from the repository root:

    python3 testdata/gate/diff_facts.py \
        ../shared/snapshots/kkaitlyn_ctx128_fullstep.pickle \
        ../shared/snapshots/nothanmin_fullstep.pickle

It prints JSON; the numbers are copied into diffRealFacts in
cmd/torchmem/diff_test.go.
"""

import importlib.util
import json
import os
import pickle
import sys

_spec = importlib.util.spec_from_file_location(
    "snapshot_facts", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "facts", "snapshot_facts.py"))
snapshot_facts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(snapshot_facts)

LIVE = ("active_allocated", "active_pending_free")
LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python", "torch/")


def user_site(frames):
    for fr in frames or []:
        fn = fr["filename"]
        if not fn.endswith(".py"):
            continue
        if any(x in fn for x in LIBRARY):
            continue
        return "%s:%d %s" % (os.path.basename(fn), fr["line"], fr["name"])
    return None


def device_facts(snap, dev):
    segs = [s for s in snap["segments"] if s.get("device", 0) == dev]
    trace = snap["device_traces"][dev] if dev < len(snap["device_traces"]) else []
    end_alloc = sum(b["size"] for s in segs for b in s["blocks"] if b["state"] == "active_allocated")
    end_res = sum(s["total_size"] for s in segs)
    # Block sizes by the entry that allocates a block and the entry that ends
    # its allocation.
    sized = snapshot_facts.block_replay(snap, dev)["Blocks"]
    opened = {b["alloc"]: b["size"] for b in sized if b["alloc"] >= 0}
    ended = {b["end"]: b["size"] for b in sized if b["end"] is not None}

    # Backward replay of allocated and reserved bytes.
    n = len(trace)
    alloc_after = [0] * n
    res_after = [0] * n
    a, r = end_alloc, end_res
    for i in range(n - 1, -1, -1):
        alloc_after[i], res_after[i] = a, r
        e = trace[i]
        act = e["action"]
        a -= opened.get(i, 0)
        a += ended.get(i, 0)
        if act in ("segment_alloc", "segment_map"):
            r -= e["size"]
        elif act in ("segment_free", "segment_unmap"):
            r += e["size"]
    initial = a
    peak, peak_i = initial, -1
    for i, v in enumerate(alloc_after):
        if v > peak:
            peak, peak_i = v, i
    peak_res = res_after[peak_i] if peak_i >= 0 else r

    # Phase peaks from the Optimizer.step / Optimizer.zero_grad annotations:
    # the highest allocated level inside a START..END window, the level at
    # the window's start (after the last entry before it) included.
    def window_peak(prefix):
        windows, start = [], None
        for ann in snap.get("external_annotations", []) or []:
            if ann.get("device", dev) != dev or not ann["name"].startswith(prefix):
                continue
            if ann["stage"] == "START":
                start = ann["time_us"]
            elif ann["stage"] == "END" and start is not None:
                windows.append((start, ann["time_us"]))
                start = None
        best = None
        for lo, hi in windows:
            before, inside = initial, None
            for i, e in enumerate(trace):
                t = e.get("time_us")
                if t is None or t > hi:
                    break
                if t < lo:
                    before = alloc_after[i]
                else:
                    inside = alloc_after[i] if inside is None else max(inside, alloc_after[i])
            level = before if inside is None else inside
            best = level if best is None else max(best, level)
        return best

    # Sites live at the peak: forward pass pairing by address.
    live = {}  # addr -> (site, alloc index or -1)
    blocks = []  # (site, alloc index, index where the allocation ends)
    for i, e in enumerate(trace):
        act = e["action"]
        if act == "alloc":
            live[e["addr"]] = (user_site(e.get("frames")) or "<other>", i)
        elif act in ("free_requested", "free_completed") and i in ended:
            if e["addr"] in live:
                site, ai = live.pop(e["addr"])
                blocks.append((ended[i], site, ai, i))
            else:
                blocks.append((ended[i], "<allocated before recording>", -1, i))
    traced_live = set(live)
    for addr, (site, ai) in live.items():
        blocks.append((opened[ai], site, ai, n))
    for s in segs:
        for b in s["blocks"]:
            if b["state"] in LIVE and b["address"] not in traced_live:
                site = user_site(b.get("frames"))
                if site is None:
                    site = "<allocated before recording>" if not b.get("frames") else "<other>"
                blocks.append((b["size"], site, -1, n))
    sites = {}
    for size, site, ai, fi in blocks:
        if ai <= peak_i < fi:
            sites[site] = sites.get(site, 0) + size
    return {
        "end_allocated": end_alloc,
        "end_reserved": end_res,
        "peak_allocated": peak,
        "peak_event": peak_i,
        "peak_reserved": peak_res,
        "initial_allocated": initial,
        "optimizer_peak": window_peak("Optimizer.step#"),
        "zero_grad_peak": window_peak("Optimizer.zero_grad#"),
        "sites": sites,
    }


def facts(path):
    with open(path, "rb") as f:
        snap = pickle.load(f)
    devs = sorted({s.get("device", 0) for s in snap["segments"]} |
                  {i for i, t in enumerate(snap["device_traces"]) if t})
    return {dev: device_facts(snap, dev) for dev in devs}


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: diff_facts.py BASE NEW")
    base, new = facts(sys.argv[1]), facts(sys.argv[2])
    out = {}
    for dev in sorted(set(base) | set(new)):
        b, n = base.get(dev, {}), new.get(dev, {})
        row = {}
        for k in ("peak_allocated", "peak_reserved", "end_allocated", "end_reserved",
                  "initial_allocated", "optimizer_peak", "zero_grad_peak"):
            bv, nv = b.get(k) or 0, n.get(k) or 0
            row[k] = {"base": bv, "new": nv, "delta": nv - bv}
        row["peak_event"] = {"base": b.get("peak_event"), "new": n.get("peak_event")}
        sites = {}
        bs, ns = b.get("sites", {}), n.get("sites", {})
        for s in sorted(set(bs) | set(ns)):
            if s == "<other>":
                continue
            sites[s] = {"base": bs.get(s, 0), "new": ns.get(s, 0), "delta": ns.get(s, 0) - bs.get(s, 0)}
        row["sites"] = sites
        out[str(dev)] = row
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
