#!/usr/bin/env python3
"""Allocation sites of code that torch.compile generated, in a real snapshot.

This script is the documented way the table of analysis/compiled_test.go was
produced. For every `alloc` trace entry of device 0 whose stack holds a frame
of generated code — Inductor's output code, a file c<52 chars>.py in a folder
named by its 2nd and 3rd characters (the cache: /tmp/torchinductor_USER/3u/
c3uxhj….py), or an FX GraphModule's <eval_with_key>.N — it names the site the
way a user reads a stack: past the generated frames, the first Python frame
of the user's own code (not PyTorch, not an installed package, not the
standard library), as "file.py:LINE function (compiled)". It prints the count
of entries per site, as a Go map literal.

    python3 testdata/facts/compiled_sites.py [SNAPSHOT]   # default: bcrafton

It reads the pickle with Python's own `pickle` (no torch) and never writes.
"""

import os
import pickle
import re
import sys
from collections import Counter

HASHED = re.compile(r"^c[a-z0-9]{51}\.py$")


def generated(fn):
    fn = fn.replace("\\", "/")
    if fn.startswith("<eval_with_key>") or ("/torchinductor_" in fn and fn.endswith(".py")):
        return True
    base = fn.rsplit("/", 1)[-1]
    parent = fn.rsplit("/", 2)[-2] if fn.count("/") >= 2 else ""
    return bool(HASHED.match(base)) and parent == base[1:3]


def library(fn):
    fn = fn.replace("\\", "/")
    return any(p in fn for p in ("/site-packages/", "/dist-packages/", "/lib/python3", "/torch/")) or \
        fn.startswith("torch/") or fn.startswith("<")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.join(here, "..", "..", "..", "shared", "snapshots", "genG_torch2.10x_bcrafton.pickle")
    path = sys.argv[1] if len(sys.argv) > 1 else default
    with open(path, "rb") as f:
        data = pickle.load(f)
    sites = Counter()
    for e in data["device_traces"][0]:
        if e["action"] != "alloc":
            continue
        frames = e.get("frames") or []
        seen = False
        for fr in frames:
            if generated(fr["filename"]):
                seen = True
                continue
            if seen and fr["filename"].endswith(".py") and not library(fr["filename"]):
                base = fr["filename"].replace("\\", "/").rsplit("/", 1)[-1]
                sites[f"{base}:{fr['line']} {fr['name']} (compiled)"] += 1
                break
        else:
            if seen:
                sites["(no user frame)"] += 1
    print("map[string]int{")
    for s, n in sorted(sites.items()):
        print(f'\t"{s}": {n},')
    print("}")


if __name__ == "__main__":
    main()
