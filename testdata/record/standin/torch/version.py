"""torch.version: a CPU-only build has cuda None."""

from . import _standin

cuda = None if _standin.CUDA == "none" else "12.4"
hip = None
