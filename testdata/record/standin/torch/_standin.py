"""The stand-in's call log and settings (see torch/__init__.py)."""

import json
import os

API = os.environ.get("TORCHMEM_STANDIN_API", "string")
CUDA = os.environ.get("TORCHMEM_STANDIN_CUDA", "1")
state = {"initialized": False, "oom": False}


def _plain(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return "<%s>" % type(v).__name__


def log(call, *args, **kwargs):
    path = os.environ.get("TORCHMEM_STANDIN_LOG")
    if not path:
        return
    entry = {
        "call": call,
        "args": _plain(list(args)),
        "kwargs": _plain(kwargs),
        "pid": os.getpid(),
        "cuda_initialized": state["initialized"],
    }
    with open(path, "a") as f:
        f.write(json.dumps(entry) + "\n")
