#!/usr/bin/env python3
"""Ground-truth facts about the real PyTorch CUDA memory snapshots.

This script is the documented way the table `realSnapshotFacts` in
snapshot/realfiles_table_test.go was produced. It reads every snapshot listed in
MANIFEST.json of the shared snapshots folder with Python's own `pickle`
module (no torch needed: the files are plain dicts / lists, see
docs/snapshot-format.md §0) and prints, for each file, a Go composite literal
of type `fileFacts`:

  - Format: snapshot.FormatSnapshotPickle for a dict pickle,
    snapshot.FormatSegmentList for a bare list of segments;
  - Segments: number of segments, and Σ total_size, Σ allocated_size,
    Σ active_size over all segments;
  - BlockStates: number of blocks per `state` (names as PyTorch spells them;
    a name torchmem does not know is counted as "unknown");
  - Devices: the devices torchmem's model must hold, ordered by ID: one per
    index of device_traces (even when its trace is empty) plus one per
    `segment["device"]` value. For each: its number of segments, its number
    of trace entries and the count per action (unknown names -> "unknown"),
    and Σ allocated_size (blocks, PyTorch's memory_allocated() unit) and
    Σ requested_size of its segments;
  - OOMs: every `oom` trace entry as {device, index in that device's trace,
    size, device_free};
  - ExternalAnnotations: len(external_annotations) (0 when absent);
    Annotations: what torchmem's model must hold after pairing START/END:
    the number of START entries plus the END entries that match no open
    START of the same (device, name);
  - HasSettings / ExpandableSegments: allocator_settings present, and its
    expandable_segments value (false when absent);
  - Frames: number of distinct (filename, line, name) over all frames in
    blocks, segments, trace entries and 2.0 block `history` entries, with
    line 2**64-1 taken as -1 (PyTorch writes -1 as unsigned);
    MaxLine: the largest line after that mapping (0 when there are no frames);
    UnknownLineFrames: how many distinct frames have line -1;
    FramesSHA256: the first 16 hex digits of the SHA-256 of the distinct
    frames sorted by (filename, line, name), each written as
    "filename\\x00line\\x00name\\n" (line in decimal, UTF-8).

With --analysis it prints instead the table `realAllocatedFacts` of
analysis/realfiles_test.go: for every device with a trace or segments, the
allocated bytes (in allocator blocks) and the requested bytes at the end and
at the peak, from its own replay of the trace (block_replay below), which
must end at the dump's Σ allocated_size and Σ requested_size.

Run from the repository root:

    python3 testdata/facts/snapshot_facts.py                # ../shared/snapshots
    python3 testdata/facts/snapshot_facts.py /path/to/snapshots
    python3 testdata/facts/snapshot_facts.py --analysis [/path/to/snapshots]

--recorded reads ../shared/recorded and its subfolders instead (tables
recorded*Facts), --measured this repository's own GPU recordings in
testdata/estimate/measured (tables measured*Facts). Then replace the `var realSnapshotFacts` block in
snapshot/realfiles_table_test.go (or `var realAllocatedFacts` in
analysis/realfiles_test.go) with the output, then run gofmt -w on the file.
The script never writes files. It also checks the invariants it relies on
and reports violations on stderr (exit status 1).
"""

import gzip
import hashlib
import json
import os
import pickle
import sys
from collections import Counter

ACTIONS = ["alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "snapshot", "oom"]
STATES = ["inactive", "active_allocated", "active_pending_free"]
U64_MINUS_ONE = (1 << 64) - 1

problems = []


def problem(msg):
    problems.append(msg)


def frame_key(fr, where):
    line = fr["line"]
    if line == U64_MINUS_ONE:
        line = -1
    elif not (-(1 << 63) <= line < (1 << 63)):
        problem(f"{where}: frame line {line} does not fit int64")
    extra = set(fr) - {"filename", "line", "name"}
    if extra:
        problem(f"{where}: frame has extra keys {sorted(extra)} (FX fields?): key ignores them")
    return (fr["filename"], line, fr["name"])


def load(path):
    """The pickle at path, gunzipped when its name ends in .gz."""
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        return pickle.load(f)


def facts(path, name=None):
    data = load(path)
    if isinstance(data, dict):
        fmt = "snapshot.FormatSnapshotPickle"
        segments = data.get("segments", [])
        traces = data.get("device_traces", [])
        annotations = data.get("external_annotations", [])
        settings = data.get("allocator_settings")
    elif isinstance(data, list):
        fmt = "snapshot.FormatSegmentList"
        segments, traces, annotations, settings = data, [], [], None
    else:
        raise SystemExit(f"{path}: top level is {type(data).__name__}")
    name = name or os.path.basename(path)

    frames = set()

    def add_frames(lst, where):
        for fr in lst or []:
            frames.add(frame_key(fr, where))

    # Segments and blocks.
    seg_per_dev = Counter()
    alloc_per_dev = Counter()
    req_per_dev = Counter()
    total = allocated = active = 0
    states = Counter()
    for si, seg in enumerate(segments):
        seg_per_dev[seg["device"]] += 1
        alloc_per_dev[seg["device"]] += seg["allocated_size"]
        req_per_dev[seg["device"]] += seg.get("requested_size", 0)
        total += seg["total_size"]
        allocated += seg["allocated_size"]
        active += seg["active_size"]
        add_frames(seg.get("frames"), f"{name} segment {si}")
        bsum = asum = rsum = 0
        for bi, blk in enumerate(seg["blocks"]):
            st = blk["state"]
            states[st if st in STATES else "unknown"] += 1
            bsum += blk["size"]
            if st == "active_allocated":
                asum += blk["size"]
                rsum += blk.get("requested_size", 0)
            add_frames(blk.get("frames"), f"{name} segment {si} block {bi}")
            for hi, h in enumerate(blk.get("history") or []):
                add_frames(h.get("frames"), f"{name} segment {si} block {bi} history {hi}")
        if bsum != seg["total_size"]:
            problem(f"{name} segment {si}: Σ block size {bsum} != total_size {seg['total_size']}")
        if asum != seg["allocated_size"]:
            problem(f"{name} segment {si}: Σ active_allocated block size {asum} != allocated_size {seg['allocated_size']}")
        if "requested_size" in seg and rsum != seg["requested_size"]:
            problem(f"{name} segment {si}: Σ active_allocated requested_size {rsum} != requested_size {seg['requested_size']}")

    # Devices: every index of device_traces, plus every device with segments.
    dev_ids = set(range(len(traces))) | set(seg_per_dev)
    devices = []
    ooms = []
    for dev in sorted(dev_ids):
        trace = traces[dev] if dev < len(traces) else []
        actions = Counter()
        for i, e in enumerate(trace):
            a = e["action"]
            actions[a if a in ACTIONS else "unknown"] += 1
            add_frames(e.get("frames"), f"{name} device {dev} entry {i}")
            if a == "oom":
                ooms.append((dev, i, e["size"], e["device_free"]))
        devices.append((dev, seg_per_dev[dev], len(trace), actions, alloc_per_dev[dev], req_per_dev[dev]))

    # external_annotations: START, plus END that closes no open START.
    open_ = Counter()
    starts = unmatched_end = 0
    for a in annotations:
        k = (a.get("device"), a.get("name"))
        if a["stage"] == "START":
            starts += 1
            open_[k] += 1
        elif a["stage"] == "END":
            if open_[k]:
                open_[k] -= 1
            else:
                unmatched_end += 1
        else:
            problem(f"{name}: annotation stage {a['stage']!r}")

    has_settings = settings is not None
    expandable = bool(settings.get("expandable_segments", False)) if has_settings else False

    lines = [fr[1] for fr in frames]
    h = hashlib.sha256()
    for fn, line, nm in sorted(frames):
        h.update(f"{fn}\x00{line}\x00{nm}\n".encode("utf-8", "surrogatepass"))

    return {
        "File": name,
        "Format": fmt,
        "Segments": len(segments),
        "TotalSize": total,
        "AllocatedSize": allocated,
        "ActiveSize": active,
        "BlockStates": states,
        "Devices": devices,
        "OOMs": ooms,
        "ExternalAnnotations": len(annotations),
        "Annotations": starts + unmatched_end,
        "HasSettings": has_settings,
        "ExpandableSegments": expandable,
        "Frames": len(frames),
        "MaxLine": max(lines) if lines else 0,
        "UnknownLineFrames": sum(1 for l in lines if l == -1),
        "FramesSHA256": h.hexdigest()[:16],
    }


MIB = 1 << 20


def round_size(n, divisions):
    """The caching allocator's round_size: at least 512 B, a multiple of 512 B,
    or the next of `div` steps between two powers of two when
    roundup_power2_divisions sets div > 1 for n's interval (1 MiB, 2 MiB, …)."""
    if n < 512:
        return 512
    k = min(max(0, n.bit_length() - 1 - 20), 15)
    div = divisions.get(1 << k, 0)
    if div > 1 and n > 512 * div:
        if n & (n - 1) == 0:
            return n
        floor = 1 << (n.bit_length() - 1)
        step = floor >> (div.bit_length() - 1)
        if step == 0:
            return floor << 1
        low = n & ~(step - 1)
        return n if low == n else low + step
    return (n + 511) // 512 * 512


def dump_blocks(segments):
    """Active blocks of the dump by address (2.0 blocks have no address: walk
    the segment, as MemoryViz does)."""
    out = {}
    for seg in segments:
        addr = seg["address"]
        for blk in seg["blocks"]:
            if blk["state"] in ("active_allocated", "active_pending_free"):
                out[blk.get("address", addr)] = blk
            addr += blk["size"]
    return out


def block_replay(data, dev):
    """Replays device `dev` in the allocator's unit and returns the allocated
    and requested bytes at the end and at the peak (the first event where the
    allocated blocks are highest; index -1 = before the first event), and the
    blocks (addr, req, size, alloc: trace index or -1, end: index where the
    allocation ends or None).

    Block sizes, from c10/cuda/CUDACachingAllocator.cpp: a block is its
    request rounded by round_size; in the large pool (rounded > 1 MiB)
    without expandable segments, the allocator carves the block from the start
    of a free block that runs to the next live block or the end of the
    segment, and keeps the rest when it is 1 MiB or less (should_split), or
    when the request is at least max_split_size. Blocks live at the dump take
    the dump's size (and the rule must give the same). A block allocated
    before the trace and freed in it is its rounded request, grown to the next
    live block when the gap is 1 MiB or less (free blocks of the large pool
    are always larger), or to the next block allocated right after it.
    Allocation ends at free_requested (or free_completed without one): a
    block pending free is not allocated."""
    segments_all = data.get("segments", []) if isinstance(data, dict) else data
    trace = data.get("device_traces", []) if isinstance(data, dict) else []
    trace = trace[dev] if dev < len(trace) else []
    segs = [g for g in segments_all if g["device"] == dev]
    settings = (data.get("allocator_settings") if isinstance(data, dict) else None) or {}
    expandable = bool(settings.get("expandable_segments")) or any(g.get("is_expandable") for g in segs) or \
        any(e["action"] in ("segment_map", "segment_unmap") for e in trace)
    max_split = settings.get("max_split_size", -1)
    max_split = max_split if isinstance(max_split, int) and max_split > 0 else None
    divisions = {}
    for k, v in (settings.get("roundup_power2_divisions") or {}).items():
        divisions[int(k)] = v
    dumped = dump_blocks(segs)

    # Segments before the first event: undo the trace's segment events.
    seg_now = {g["address"]: g["total_size"] for g in segs}
    for e in reversed(trace):
        if e["action"] == "segment_alloc":
            seg_now.pop(e["addr"], None)
        elif e["action"] == "segment_free":
            seg_now[e["addr"]] = e["size"]

    # Pass 1: lifetimes. A block: addr, req, size, alloc (-1: before the
    # trace), end (index where allocation ends), gone (free_completed).
    blocks, live = [], {}
    for i, e in enumerate(trace):
        a, act = e.get("addr"), e["action"]
        if act == "alloc":
            if a in live:  # a lost free: the old block ends here
                old = live.pop(a)
                old["end"] = old["end"] if old["end"] is not None else i
                old["gone"] = i
            b = {"addr": a, "req": e["size"], "alloc": i, "end": None, "gone": None, "frames": e.get("frames") or []}
            blocks.append(b)
            live[a] = b
        elif act in ("free_requested", "free_completed"):
            b = live.get(a)
            if b is None:
                b = {"addr": a, "req": e["size"], "alloc": -1, "end": None, "gone": None}
                blocks.append(b)
                live[a] = b
            if b["end"] is None:
                b["end"] = i
            if act == "free_completed":
                b["gone"] = i
                del live[a]
    for a, blk in dumped.items():
        if a in live:
            live[a]["dump"] = blk
        else:
            blocks.append({"addr": a, "req": blk.get("requested_size") or blk["size"], "alloc": -1,
                           "end": None, "gone": None, "dump": blk, "frames": blk.get("frames") or [],
                           "pending": blk["state"] == "active_pending_free"})

    # Pass 2: sizes, replaying the large-pool layout forwards.
    def large(b):
        return not expandable and round_size(b["req"], divisions) > MIB

    for b in blocks:
        b["size"] = b["dump"]["size"] if "dump" in b else round_size(b["req"], divisions)
    active = {b["addr"]: b for b in blocks if b["alloc"] < 0 and large(b)}

    def segment_of(a):
        for ga, gs in seg_now.items():
            if ga <= a < ga + gs:
                return ga, ga + gs
        return None

    def next_edge(a):
        g = segment_of(a)
        if g is None:
            return None
        return min([x for x in active if a < x < g[1]] + [g[1]])

    def keeps(rounded, rest):
        return 0 < rest and (rest <= MIB or (max_split is not None and rounded >= max_split))

    guessed = {a for a, b in active.items() if "dump" not in b}

    def settle_by_next(b):
        nxt = next_edge(b["addr"])
        if nxt is not None and (nxt - b["addr"] == b["size"] or keeps(b["size"], nxt - b["addr"] - b["size"])):
            b["size"] = nxt - b["addr"]
            guessed.discard(b["addr"])

    for a in list(guessed):
        settle_by_next(active[a])
    mismatches = unknown = 0
    by_alloc = {b["alloc"]: b for b in blocks if b["alloc"] >= 0}
    by_gone = {b["gone"]: b for b in blocks if b["gone"] is not None}
    for i, e in enumerate(trace):
        gb = by_gone.get(i)
        if gb is not None and active.get(gb["addr"]) is gb:
            if gb["addr"] in guessed:
                settle_by_next(gb)
                if gb["addr"] in guessed:
                    unknown += 1
                    guessed.discard(gb["addr"])
            del active[gb["addr"]]
        if e["action"] == "segment_alloc":
            seg_now[e["addr"]] = e["size"]
        elif e["action"] == "segment_free":
            seg_now.pop(e["addr"], None)
        b = by_alloc.get(i)
        if b is None:
            continue
        old = active.get(b["addr"])
        if old is not None:  # a lost free
            del active[b["addr"]]
        size = round_size(b["req"], divisions)
        if large(b):
            nxt = next_edge(b["addr"])
            if nxt is not None and keeps(size, nxt - b["addr"] - size):
                size = nxt - b["addr"]
            g = segment_of(b["addr"])
            before = [x for x in active if g is not None and g[0] <= x < b["addr"]]
            if before and max(before) in guessed:
                # This allocation began a free block: the block before it
                # ended at its address.
                x = max(before)
                active[x]["size"] = b["addr"] - x
                guessed.discard(x)
            active[b["addr"]] = b
        if "dump" in b:
            mismatches += size != b["size"]
        else:
            b["size"] = size

    # Pass 3: the curves.
    delta = Counter()
    rdelta = Counter()
    alloc = req = 0
    for b in blocks:
        if b.get("pending"):
            continue
        if b["alloc"] < 0:
            alloc += b["size"]
            req += b["req"]
        else:
            delta[b["alloc"]] += b["size"]
            rdelta[b["alloc"]] += b["req"]
        if b["end"] is not None:
            delta[b["end"]] -= b["size"]
            rdelta[b["end"]] -= b["req"]
    peak = (alloc, -1, req)
    for i in range(len(trace)):
        alloc += delta[i]
        req += rdelta[i]
        if alloc > peak[0]:
            peak = (alloc, i, req)
    return {"EndAllocated": alloc, "EndRequested": req, "PeakAllocated": peak[0], "PeakEvent": peak[1],
            "PeakRequested": peak[2], "Mismatches": mismatches, "Unsized": unknown, "Blocks": blocks}


def allocated_facts(path, name=None):
    """The realAllocatedFacts rows of one file: every device with a trace or
    segments."""
    data = load(path)
    name = name or os.path.basename(path)
    segments = data.get("segments", []) if isinstance(data, dict) else data
    traces = data.get("device_traces", []) if isinstance(data, dict) else []
    devs = sorted({g["device"] for g in segments} | {d for d, t in enumerate(traces) if t})
    rows = []
    for dev in devs:
        r = block_replay(data, dev)
        trace = traces[dev] if dev < len(traces) else []
        r["OOMs"] = [oom_facts(r["Blocks"], i) for i, e in enumerate(trace) if e["action"] == "oom"]
        segs = [g for g in segments if g["device"] == dev]
        if segs:
            want = sum(g["allocated_size"] for g in segs)
            if r["EndAllocated"] != want:
                problem(f"{name} device {dev}: replay ends at {r['EndAllocated']} allocated, the dump says {want}")
            if all("requested_size" in g for g in segs):
                want = sum(g["requested_size"] for g in segs)
                if r["EndRequested"] != want:
                    problem(f"{name} device {dev}: replay ends at {r['EndRequested']} requested, the dump says {want}")
        if r["Mismatches"]:
            problem(f"{name} device {dev}: {r['Mismatches']} blocks live at the dump are sized otherwise by the rules")
        rows.append((name, dev, r))
    return rows


def oom_facts(blocks, i):
    """What is allocated at the oom entry i: blocks and requested bytes in
    all, and of the blocks whose allocation frames show Module.to (the
    model's weights: torch/nn/modules/module.py `_apply` or `convert`) and
    attention (a frame named scaled_dot_product…)."""
    live = [b for b in blocks if not b.get("pending") and b["alloc"] <= i and (b["end"] is None or b["end"] > i)]

    def has(b, pred):
        return any(pred(f) for f in b.get("frames", []))

    module_to = [b for b in live if has(b, lambda f: f["filename"].endswith("torch/nn/modules/module.py") and f["name"] in ("_apply", "convert"))]
    attention = [b for b in live if has(b, lambda f: "scaled_dot_product" in f["name"])]
    return {"Event": i, "Allocated": sum(b["size"] for b in live), "Requested": sum(b["req"] for b in live),
            "ModuleTo": sum(b["size"] for b in module_to), "ModuleToBlocks": len(module_to),
            "Attention": sum(b["size"] for b in attention), "AttentionRequested": sum(b["req"] for b in attention)}


def go_allocated(rows, prefix="real", flags="--analysis"):
    out = [f"// Produced by: python3 testdata/facts/snapshot_facts.py {flags}",
           f"var {prefix}AllocatedFacts = []allocatedFacts{{"]
    for name, dev, r in rows:
        out.append(f'\t{{File: "{name}", Device: {dev}, EndAllocated: {r["EndAllocated"]}, '
                   f'EndRequested: {r["EndRequested"]}, PeakAllocated: {r["PeakAllocated"]}, '
                   f'PeakEvent: {r["PeakEvent"]}, PeakRequested: {r["PeakRequested"]}, Unsized: {r["Unsized"]}}},')
    out.append("}")
    out.append("")
    out.append("// At each oom entry: allocated (blocks) and requested bytes, and the blocks")
    out.append("// made by Module.to (module.py _apply/convert frames) and by attention")
    out.append("// (scaled_dot_product frames).")
    out.append(f"var {prefix}OOMFacts = []oomFacts{{")
    for name, dev, r in rows:
        for o in r["OOMs"]:
            out.append(f'\t{{File: "{name}", Device: {dev}, Event: {o["Event"]}, Allocated: {o["Allocated"]}, '
                       f'Requested: {o["Requested"]}, ModuleTo: {o["ModuleTo"]}, ModuleToBlocks: {o["ModuleToBlocks"]}, '
                       f'Attention: {o["Attention"]}, AttentionRequested: {o["AttentionRequested"]}}},')
    out.append("}")
    return "\n".join(out)


def go_counts(c, order):
    keys = [k for k in order if c.get(k)] + sorted(k for k in c if k not in order and c[k])
    return "map[string]int{" + ", ".join(f'"{k}": {c[k]}' for k in keys) + "}"


def go_literal(f):
    out = ["\t{"]
    out.append(f'\t\tFile: "{f["File"]}",')
    out.append(f'\t\tFormat: {f["Format"]},')
    out.append(f'\t\tSegments: {f["Segments"]}, TotalSize: {f["TotalSize"]}, '
               f'AllocatedSize: {f["AllocatedSize"]}, ActiveSize: {f["ActiveSize"]},')
    out.append(f'\t\tBlockStates: {go_counts(f["BlockStates"], STATES + ["unknown"])},')
    out.append("\t\tDevices: []deviceFacts{")
    for dev, nseg, nev, actions, alloc, req in f["Devices"]:
        out.append(f"\t\t\t{{ID: {dev}, Segments: {nseg}, Events: {nev}, "
                   f"Actions: {go_counts(actions, ACTIONS + ['unknown'])}, "
                   f"AllocatedSize: {alloc}, RequestedSize: {req}}},")
    out.append("\t\t},")
    if f["OOMs"]:
        out.append("\t\tOOMs: []oomFact{")
        for dev, i, size, free in f["OOMs"]:
            out.append(f"\t\t\t{{Device: {dev}, Index: {i}, Size: {size}, DeviceFree: {free}}},")
        out.append("\t\t},")
    out.append(f'\t\tExternalAnnotations: {f["ExternalAnnotations"]}, Annotations: {f["Annotations"]},')
    out.append(f'\t\tHasSettings: {str(f["HasSettings"]).lower()}, '
               f'ExpandableSegments: {str(f["ExpandableSegments"]).lower()},')
    out.append(f'\t\tFrames: {f["Frames"]}, MaxLine: {f["MaxLine"]}, '
               f'UnknownLineFrames: {f["UnknownLineFrames"]}, FramesSHA256: "{f["FramesSHA256"]}",')
    out.append("\t},")
    return "\n".join(out)


def recorded_names(folder):
    """The snapshots of recorded/: its *.pickle.gz and those of its
    subfolders (record_*/*.pickle, estimate/*.small.pickle.gz), as paths
    relative to it."""
    names = []
    for root, _, files in os.walk(folder):
        for n in files:
            if n.endswith((".pickle", ".pickle.gz")):
                names.append(os.path.relpath(os.path.join(root, n), folder))
    return sorted(names)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    args = sys.argv[1:]
    analysis = "--analysis" in args
    recorded = "--recorded" in args
    measured = "--measured" in args
    args = [a for a in args if a not in ("--analysis", "--recorded", "--measured")]
    folder = args[0] if args else os.path.join(repo, "..", "shared", "recorded" if recorded else "snapshots")
    if measured and not args:
        folder = os.path.join(repo, "testdata", "estimate", "measured")
    manifest = os.path.join(folder, "MANIFEST.json")
    if recorded or measured:
        names = recorded_names(folder)
    elif os.path.exists(manifest):
        with open(manifest) as f:
            names = sorted(m["file"] for m in json.load(f))
    else:
        names = sorted(n for n in os.listdir(folder) if n.endswith((".pickle", ".pkl")))
    prefix = "recorded" if recorded else "measured" if measured else "real"
    flags = " ".join(f for f in ("--recorded" if recorded else "", "--measured" if measured else "",
                                 "--analysis" if analysis else "") if f)
    if analysis:
        rows = []
        for n in names:
            rows += allocated_facts(os.path.join(folder, n), n)
        print(go_allocated(rows, prefix, flags))
    else:
        print(("// Produced by: python3 testdata/facts/snapshot_facts.py " + flags).rstrip())
        print(f"var {prefix}SnapshotFacts = []fileFacts{{")
        for n in names:
            print(go_literal(facts(os.path.join(folder, n), n)))
        print("}")
    for p in problems:
        print("snapshot_facts.py:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
