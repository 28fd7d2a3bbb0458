#!/usr/bin/env python3
"""Ground-truth facts about the CUDA caching allocator's state inside the real
snapshots: block sizes, cached free memory and fragmentation at chosen moments.

This script is the documented way the figures asserted by
analysis/allocator_state_test.go were produced. It reads the snapshots with
Python's own `pickle` (no torch) and replays them with its own code, written
from docs/snapshot-format.md and PyTorch's c10/cuda/CUDACachingAllocator.cpp,
not from torchmem's Go code.

The allocator facts it relies on (CUDACachingAllocator.cpp):

  - round_size: a request is rounded up to a multiple of 512 B (kMinBlockSize);
  - get_pool: requests of at most 1 MiB (kSmallSize) use the small pool and
    its 2 MiB segments, larger ones the large pool;
  - a block is carved from the start of the smallest free block that fits,
    and free neighbours are always merged, so the free block an allocation
    takes runs from its address to the next allocated block or the end of its
    segment;
  - should_split: with expandable segments, or in the small pool, the rest is
    split off when it is at least 512 B; in the large pool only when it is
    more than 1 MiB (kSmallSize) and the rounded request is below
    max_split_size. A rest that is not split stays inside the block: the block
    (what memory_allocated() and the dump's `size` count) is larger than the
    rounded request.

For every device of every snapshot it prints:

  - blocks: the blocks the trace allocates that are still live at the dump,
    how many of them the rule above sizes exactly as the dump does (`size`
    of the dump's block), and how many of those keep an unsplit rest;
  - for every `oom` entry, for the peak of allocated memory (requested
    bytes, the first maximum; the dump itself when there is no trace) and for
    the end (after the last entry, when there is a trace): the
    reserved bytes, the allocated bytes (requested and block units), the cached
    free bytes, the largest free block a request of the OOM's size could use
    (a request above 1 MiB never uses a 2 MiB small-pool segment), the free
    bytes inside segments that hold at least one live block
    (fragmentation) and the bytes of segments that hold none (wholly free
    cached segments).

Run from the repository root:

    python3 testdata/facts/allocator_state_facts.py            # ../shared/snapshots
    python3 testdata/facts/allocator_state_facts.py FILE...    # some files

The script never writes files.
"""

import os
import pickle
import sys

MIB = 1 << 20
SMALL_SIZE = MIB          # kSmallSize
SMALL_SEGMENT = 2 * MIB   # kSmallBuffer
MIN_BLOCK = 512           # kMinBlockSize
U64_MAX = (1 << 64) - 1


def round512(n):
    return MIN_BLOCK if n < MIN_BLOCK else (n + MIN_BLOCK - 1) // MIN_BLOCK * MIN_BLOCK


def load(path):
    with open(path, "rb") as f:
        data = pickle.load(f)
    if isinstance(data, list):
        return data, [], {}
    return data.get("segments", []), data.get("device_traces", []), data.get("allocator_settings") or {}


class Ranges:
    """Reserved address ranges: (start, end, expandable)."""

    def __init__(self, items):
        self.items = sorted(items)

    def add(self, start, size, expandable):
        self.items.append((start, start + size, expandable))
        self.items.sort()

    def remove(self, start, size):
        end = start + size
        out = []
        for a, b, x in self.items:
            if b <= start or a >= end:
                out.append((a, b, x))
                continue
            if a < start:
                out.append((a, start, x))
            if b > end:
                out.append((end, b, x))
        self.items = sorted(out)

    def merged(self):
        """Touching mapped pieces of an expandable segment are one range."""
        out = []
        for a, b, x in self.items:
            if out and x and out[-1][2] and out[-1][1] == a:
                out[-1] = (out[-1][0], b, x)
            else:
                out.append((a, b, x))
        return out

    def containing(self, addr):
        for a, b, x in self.items:
            if a <= addr < b:
                return a, b, x
        return None


def device_facts(segments, trace, settings, dev):
    dump_segs = [s for s in segments if s["device"] == dev]
    expandable = bool(settings.get("expandable_segments")) or any(s.get("is_expandable") for s in dump_segs) or \
        any(e["action"] in ("segment_map", "segment_unmap") for e in trace)
    max_split = settings.get("max_split_size", -1)
    if max_split is None or max_split < 0 or max_split >= U64_MAX:
        max_split = None

    # Dump-time blocks live at the dump, by address.
    dump_live = {}
    for s in dump_segs:
        addr = s["address"]
        for b in s["blocks"]:
            a = b.get("address", addr)
            if b["state"] in ("active_allocated", "active_pending_free"):
                dump_live[a] = b
            addr = a + b["size"]

    # Segments before the first entry: undo every segment entry from the dump.
    ranges = Ranges([(s["address"], s["address"] + s["total_size"], bool(s.get("is_expandable"))) for s in dump_segs])
    for e in reversed(trace):
        a = e["action"]
        if a in ("segment_alloc", "segment_map"):
            ranges.remove(e["addr"], e["size"])
        elif a == "segment_free":
            ranges.add(e["addr"], e["size"], False)
        elif a == "segment_unmap":
            ranges.add(e["addr"], e["size"], True)

    # Blocks live before the first entry: freed without an allocation, or
    # live at the dump without one.
    seen, pre = set(), {}
    for e in trace:
        a = e["action"]
        if a == "alloc":
            seen.add(e["addr"])
        elif a == "free_completed" and e["addr"] not in seen and e["addr"] not in pre:
            pre[e["addr"]] = e["size"]
    live_end = set()
    for e in trace:
        if e["action"] == "alloc":
            live_end.add(e["addr"])
        elif e["action"] == "free_completed":
            live_end.discard(e["addr"])
    for a, b in dump_live.items():
        if a not in live_end and a not in pre:
            pre[a] = b.get("requested_size") or b["size"]

    def tail(addr, rounded, live, seg):
        """The rest of the free block an allocation at addr does not split off."""
        if seg is None or expandable:
            return 0
        nxt = min([a for a in live if seg[0] <= a < seg[1] and a > addr] + [seg[1]])
        gap = nxt - (addr + rounded)
        if gap <= 0:
            return 0
        if rounded <= SMALL_SIZE:  # small pool: split at >= 512 B
            return 0
        if max_split is not None and rounded >= max_split:
            return gap
        return gap if gap <= SMALL_SIZE else 0

    # live: addr -> [requested, extent]
    live = {}
    for a, size in pre.items():
        live[a] = [size, dump_live[a]["size"] if a in dump_live and a not in live_end else round512(size)]
    for a in sorted(live):
        if a in dump_live and a not in live_end:
            continue
        live[a][1] += tail(a, live[a][1], live, ranges.containing(a))

    def state(request):
        segs = ranges.merged()
        cached = largest = in_live = wholly = 0
        for a, b, x in segs:
            blocks = sorted((ad, ad + v[1]) for ad, v in live.items() if a <= ad < b)
            cur, free = a, []
            for s, e in blocks:
                if s > cur:
                    free.append(s - cur)
                cur = max(cur, e)
            if cur < b:
                free.append(b - cur)
            cached += sum(free)
            if blocks:
                in_live += sum(free)
            else:
                wholly += b - a
            if request <= SMALL_SIZE or x or b - a != SMALL_SEGMENT:
                largest = max([largest] + free)
        return {"reserved": sum(b - a for a, b, _ in segs),
                "allocated_requested": sum(v[0] for v in live.values()),
                "allocated_blocks": sum(v[1] for v in live.values()),
                "cached_free": cached, "largest_free": largest,
                "free_in_live_segments": in_live, "wholly_free_segments": wholly}

    # First pass: the peak of requested bytes (first maximum).
    cur = sum(v[0] for v in live.values())
    peak, peak_val = -1, cur
    tmp = {a: v[0] for a, v in live.items()}
    for i, e in enumerate(trace):
        a = e["action"]
        if a == "alloc":
            if e["addr"] in tmp:
                cur -= tmp[e["addr"]]
            tmp[e["addr"]] = e["size"]
            cur += e["size"]
        elif a == "free_completed":
            cur -= tmp.pop(e["addr"], e["size"])
        if cur > peak_val:
            peak, peak_val = i, cur
    if not trace:
        peak = -1

    moments = {}
    if peak == -1:
        moments[("peak", -1)] = state(0)
    checked = exact = with_rest = 0
    for i, e in enumerate(trace):
        a = e["action"]
        if a == "alloc":
            r = round512(e["size"])
            live.pop(e["addr"], None)  # a lost free: the address is reused
            live[e["addr"]] = [e["size"], r + tail(e["addr"], r, live, ranges.containing(e["addr"]))]
        elif a == "free_completed":
            live.pop(e["addr"], None)
        elif a in ("segment_alloc", "segment_map"):
            ranges.add(e["addr"], e["size"], a == "segment_map")
        elif a in ("segment_free", "segment_unmap"):
            ranges.remove(e["addr"], e["size"])
        if a == "oom":
            moments[("oom", i)] = state(e["size"])
        if i == peak:
            moments[("peak", i)] = state(0)
    if trace:
        moments[("end", len(trace) - 1)] = state(0)
    for a, v in live.items():
        if a in dump_live and a in live_end:
            checked += 1
            exact += v[1] == dump_live[a]["size"]
            with_rest += v[1] > round512(v[0])
    return {"expandable": expandable, "blocks_checked": checked, "blocks_exact": exact, "blocks_with_rest": with_rest,
            "moments": moments}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    folder = os.path.join(os.path.dirname(os.path.dirname(here)), "..", "shared", "snapshots")
    files = sys.argv[1:] or sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith((".pickle", ".pkl")))
    bad = 0
    for path in files:
        segments, traces, settings = load(path)
        devs = sorted(set(range(len(traces))) | {s["device"] for s in segments})
        for dev in devs:
            trace = traces[dev] if dev < len(traces) else []
            if not trace and not any(s["device"] == dev for s in segments):
                continue
            f = device_facts(segments, trace, settings, dev)
            print(f"{os.path.basename(path)} device {dev} expandable={f['expandable']}: "
                  f"{f['blocks_exact']} of {f['blocks_checked']} blocks allocated in the trace and live at the dump "
                  f"sized as the dump ({f['blocks_with_rest']} with an unsplit rest)")
            bad += f["blocks_checked"] - f["blocks_exact"]
            for (kind, i), m in sorted(f["moments"].items(), key=lambda kv: kv[0][1]):
                print(f"    {kind} at event {i}: " + ", ".join(f"{k} {v:,}" for k, v in m.items()))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
