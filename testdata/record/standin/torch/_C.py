"""torch._C: the allocator's out-of-memory observers."""

from . import _standin

oom_observers = []


def _cuda_attach_out_of_memory_observer(observer):
    _standin.log("_cuda_attach_out_of_memory_observer", observer)
    oom_observers.append(observer)
