"""A stand-in for PyTorch, for the tests of `torchmem record` only.

CI has no GPU and no torch, so the tests put this package, named `torch`, on
PYTHONPATH. It is not PyTorch: it has just the functions torchmem's start-up
hook calls, each of which writes the call to $TORCHMEM_STANDIN_LOG (one JSON
object a line) so that a test can assert what the hook asked of torch, and
when. The snapshots it "takes" are pickles made by torchmem's own writer
(internal/snapshottest), named by the test:

  TORCHMEM_STANDIN_SNAPSHOT      what _snapshot() returns before an OOM
  TORCHMEM_STANDIN_OOM_SNAPSHOT  what it returns once _standin_oom() ran
  TORCHMEM_STANDIN_TRACE         the chrome trace export_chrome_trace writes
  TORCHMEM_STANDIN_API           "string" (torch >= 2.1), "legacy" (2.0) or
                                 "state" (1.13)
  TORCHMEM_STANDIN_CUDA          "1" CUDA available, "0" none found,
                                 "none" a CPU-only build
"""

from . import _standin

__version__ = {"string": "2.5.1", "legacy": "2.0.1", "state": "1.13.1"}[_standin.API] + "+standin"

from . import _C, cuda, optim, profiler, version  # noqa: E402,F401

_standin.log("import torch")
