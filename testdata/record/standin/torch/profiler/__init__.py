"""torch.profiler: a schedule of wait, warmup and active steps; the trace
exported is $TORCHMEM_STANDIN_TRACE."""

import enum
import gzip
import os
import shutil

from .. import _standin


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1


def schedule(*, wait, warmup, active, repeat=0, skip_first=0):
    _standin.log("torch.profiler.schedule", wait=wait, warmup=warmup, active=active, repeat=repeat)
    return {"wait": wait, "warmup": warmup, "active": active}


class profile:
    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, **kwargs):
        _standin.log("torch.profiler.profile", activities=[a.name for a in activities or []], **kwargs)
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.done = False

    def start(self):
        _standin.log("profile.start")

    def step(self):
        _standin.log("profile.step")
        self.step_num += 1
        s = self.schedule
        if not self.done and self.step_num == s["wait"] + s["warmup"] + s["active"]:
            self.done = True
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)

    def stop(self):
        _standin.log("profile.stop")

    def export_chrome_trace(self, path):
        _standin.log("profile.export_chrome_trace", path)
        opener = gzip.open if path.endswith(".gz") else open
        with open(os.environ["TORCHMEM_STANDIN_TRACE"], "rb") as src, opener(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
