"""torch.cuda.memory: the two recording APIs and _snapshot()."""

import os
import pickle

from .. import _standin


def _snapshot(device=None):
    _standin.log("torch.cuda.memory._snapshot")
    name = "TORCHMEM_STANDIN_OOM_SNAPSHOT" if _standin.state["oom"] else "TORCHMEM_STANDIN_SNAPSHOT"
    with open(os.environ[name], "rb") as f:
        return pickle.load(f)


if _standin.API == "string":
    # torch >= 2.1
    def _record_memory_history_legacy(enabled, *args, **kwargs):
        _standin.log("torch.cuda.memory._record_memory_history_legacy", enabled, *args, **kwargs)

    def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=2**63 - 1, device=None):
        if isinstance(enabled, bool):
            return _record_memory_history_legacy(enabled, context, stacks, max_entries, device)
        _standin.log("torch.cuda.memory._record_memory_history", enabled, context=context, stacks=stacks, max_entries=max_entries)

    def _dump_snapshot(filename="dump_snapshot.pickle"):
        with open(filename, "wb") as f:
            pickle.dump(_snapshot(), f)

elif _standin.API == "state":
    # torch 1.13
    def _record_memory_history(enabled, device=None):
        _standin.log("torch.cuda.memory._record_memory_history", enabled, device=device)

else:
    # torch 2.0
    def _record_memory_history(
        enabled,
        record_context=True,
        trace_alloc_max_entries=1,
        trace_alloc_record_context=False,
        device=None,
        record_context_cpp=False,
    ):
        _standin.log(
            "torch.cuda.memory._record_memory_history",
            enabled,
            record_context=record_context,
            trace_alloc_max_entries=trace_alloc_max_entries,
            trace_alloc_record_context=trace_alloc_record_context,
            record_context_cpp=record_context_cpp,
        )
