"""torch.cuda: lazy initialisation as PyTorch does it, and a simulated OOM.

As in PyTorch, CUDA is initialised on first use (_lazy_init), which first
runs the calls queued with _lazy_call, and an allocation that fails calls
the out-of-memory observers before raising OutOfMemoryError.
"""

from .. import _C, _standin

_queued_calls = []


class OutOfMemoryError(RuntimeError):
    pass


def is_initialized():
    return _standin.state["initialized"]


def is_available():
    _standin.log("torch.cuda.is_available")
    return _standin.CUDA == "1"


def _lazy_call(fn, **kwargs):
    _standin.log("torch.cuda._lazy_call", fn)
    if is_initialized():
        fn()
    else:
        _queued_calls.append(fn)


def _lazy_init():
    if is_initialized():
        return
    if _standin.CUDA != "1":
        raise RuntimeError("stand-in: no CUDA device")
    _standin.log("torch.cuda._lazy_init")
    for fn in _queued_calls:
        fn()  # PyTorch wraps a failure as DeferredCudaCallError
    _standin.state["initialized"] = True


def init():
    _lazy_init()


def _standin_oom(size):
    """An allocation of size bytes that does not fit."""
    _lazy_init()
    _standin.state["oom"] = True
    for observer in _C.oom_observers:
        observer(0, size, 80 << 30, 910 << 20)
    raise OutOfMemoryError("CUDA out of memory. Tried to allocate %d bytes (stand-in)" % size)


from . import memory  # noqa: E402,F401
