#!/usr/bin/env python3
"""Ground-truth facts about the real PyTorch CUDA memory snapshots.

This script is the documented way the table `realSnapshotFacts` in
snapshot/realfiles_test.go was produced. It reads every snapshot listed in
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
    of trace entries and the count per action (unknown names -> "unknown");
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

Run from the repository root:

    python3 testdata/facts/snapshot_facts.py                # ../shared/snapshots
    python3 testdata/facts/snapshot_facts.py /path/to/snapshots

and replace the `var realSnapshotFacts` block at the end of
snapshot/realfiles_test.go with the output, then run
`gofmt -w snapshot/realfiles_test.go`. The script never writes files.
It also checks the invariants it relies on and reports violations on
stderr (exit status 1).
"""

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


def facts(path):
    with open(path, "rb") as f:
        data = pickle.load(f)
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
    name = os.path.basename(path)

    frames = set()

    def add_frames(lst, where):
        for fr in lst or []:
            frames.add(frame_key(fr, where))

    # Segments and blocks.
    seg_per_dev = Counter()
    total = allocated = active = 0
    states = Counter()
    for si, seg in enumerate(segments):
        seg_per_dev[seg["device"]] += 1
        total += seg["total_size"]
        allocated += seg["allocated_size"]
        active += seg["active_size"]
        add_frames(seg.get("frames"), f"{name} segment {si}")
        bsum = 0
        for bi, blk in enumerate(seg["blocks"]):
            st = blk["state"]
            states[st if st in STATES else "unknown"] += 1
            bsum += blk["size"]
            add_frames(blk.get("frames"), f"{name} segment {si} block {bi}")
            for hi, h in enumerate(blk.get("history") or []):
                add_frames(h.get("frames"), f"{name} segment {si} block {bi} history {hi}")
        if bsum != seg["total_size"]:
            problem(f"{name} segment {si}: Σ block size {bsum} != total_size {seg['total_size']}")

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
        devices.append((dev, seg_per_dev[dev], len(trace), actions))

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
    for dev, nseg, nev, actions in f["Devices"]:
        out.append(f"\t\t\t{{ID: {dev}, Segments: {nseg}, Events: {nev}, "
                   f"Actions: {go_counts(actions, ACTIONS + ['unknown'])}}},")
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


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(repo, "..", "shared", "snapshots")
    manifest = os.path.join(folder, "MANIFEST.json")
    if os.path.exists(manifest):
        with open(manifest) as f:
            names = sorted(m["file"] for m in json.load(f))
    else:
        names = sorted(n for n in os.listdir(folder) if n.endswith((".pickle", ".pkl")))
    print("// Produced by: python3 testdata/facts/snapshot_facts.py")
    print("var realSnapshotFacts = []fileFacts{")
    for n in names:
        print(go_literal(facts(os.path.join(folder, n))))
    print("}")
    for p in problems:
        print("snapshot_facts.py:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
