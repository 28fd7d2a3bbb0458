# The start-up hook of `torchmem record` (embedded in the torchmem binary).
#
# torchmem writes this file into a private folder that it puts first on
# PYTHONPATH, so every Python process of the recorded command imports it at
# start-up as `sitecustomize`. It records and changes nothing else:
#
# - It runs the user's own sitecustomize (the next one on sys.path), if any,
#   and takes its own folder out of sys.path again.
# - It waits for the program to import torch (an import hook, so a process that
#   never imports torch never pays for it), then asks torch to call it when the
#   program first initialises CUDA (torch.cuda._lazy_call): recording starts
#   then, before the first allocation, and never initialises CUDA by itself.
# - Recording: torch.cuda.memory._record_memory_history (the string API of
#   torch >= 2.1, the boolean one of 2.0; 1.13 keeps live blocks' stacks
#   only), an out-of-memory observer that
#   dumps DIR/oom_snapshot_rank{R}_{pid}.pickle before the error propagates,
#   a dump to DIR/snapshot_rank{R}_{pid}.pickle at exit, on SIGUSR1, and on
#   a SIGTERM that the program leaves unhandled (then the signal is raised
#   again with its default action, which ends the process), and,
#   with --trace, a profiler trace of a few optimizer steps. Every file is
#   written under a new temporary name and renamed over its own, so a link
#   planted in DIR is replaced, never written through.
# - What it did (or why it recorded nothing) goes to a status file in its
#   folder, one JSON object a line, which torchmem reads after the command.
#
# Nothing here may raise into the program: every step catches its errors and
# reports them in the status file.
#
# Python 3.8+ (torch 2.0 supports 3.8).

import os
import sys


def _torchmem_hook():
    state_dir = os.environ.get("TORCHMEM_RECORD_STATE", "")
    out_dir = os.environ.get("TORCHMEM_RECORD_DIR", "")
    here = os.path.dirname(os.path.realpath(__file__))

    # This folder is on PYTHONPATH only to be found; the program's sys.path is
    # what it would be without torchmem.
    def same(p):
        try:
            return os.path.realpath(p or os.curdir) == here
        except (TypeError, ValueError):
            return False

    sys.path[:] = [p for p in sys.path if not same(p)]

    if not state_dir or not out_dir or not same(state_dir):
        return  # PYTHONPATH copied out of a torchmem run: do nothing

    import _thread  # threading is imported when torch is, not before

    pid = os.getpid()
    lock = _thread.allocate_lock()
    rank = os.environ.get("RANK") or os.environ.get("LOCAL_RANK") or "0"
    if not rank.isdigit():
        rank = "0"

    def status(event, **fields):
        import time

        fields.update(event=event, pid=os.getpid(), time=time.time())
        if event == "python":  # at every Python start: no json import for it
            line = '{"event": "python", "pid": %d, "time": %r, "version": "%d.%d.%d"}\n' % (
                (fields["pid"], fields["time"]) + tuple(sys.version_info[:3]))
        else:
            import json

            line = json.dumps(fields) + "\n"
        try:
            with lock:
                with open(os.path.join(state_dir, "status-%d.jsonl" % os.getpid()), "a") as f:
                    f.write(line)
        except Exception:
            pass

    def describe(err):
        return "%s: %s" % (type(err).__name__, err)

    try:
        max_entries = int(os.environ.get("TORCHMEM_RECORD_MAX_ENTRIES", "100000"))
    except ValueError:
        max_entries = 100000
    stacks = os.environ.get("TORCHMEM_RECORD_STACKS", "python")
    umask = os.umask(0)  # read it: set it back at once (start-up, one thread)
    os.umask(umask)
    file_mode = 0o666 & ~umask  # what open() would give the files
    trace_steps = os.environ.get("TORCHMEM_RECORD_TRACE", "") == "1"

    status("python")

    rec = {"torch": None, "recording": False, "profiler": None, "trace_done": False}

    def new_temp(name, suffix):
        """A new file in DIR that no one else made (O_EXCL, never through a
        link), renamed over its real name once written: a link planted in
        DIR at either name is replaced, never followed."""
        import tempfile

        fd, tmp = tempfile.mkstemp(prefix=".torchmem-%s-" % name, suffix=suffix, dir=out_dir)
        try:
            os.fchmod(fd, file_mode)
        except Exception:
            pass
        return fd, tmp

    def dump(kind):
        """Write torch's snapshot to DIR, through a temporary name."""
        torch = rec["torch"]
        name = "%s_rank%s_%d.pickle" % ("oom_snapshot" if kind == "oom" else "snapshot", rank, pid)
        path = os.path.join(out_dir, name)
        tmp = None
        try:
            import pickle

            snap = torch.cuda.memory._snapshot()
            fd, tmp = new_temp(name, ".tmp")
            with os.fdopen(fd, "wb") as f:
                pickle.dump(snap, f)
            os.replace(tmp, path)
            status("dump", kind=kind, path=path, rank=int(rank))
        except Exception as err:
            status("error", what="dump " + kind, error=describe(err))
            if tmp is not None:
                try:
                    os.remove(tmp)
                except OSError:
                    pass

    def on_oom(device, alloc, device_total, device_free):
        # Called by the caching allocator right before it raises
        # OutOfMemoryError; the dump is complete when the error propagates.
        if os.getpid() == pid:
            status("oom", device=device, request=alloc, device_free=device_free)
            dump("oom")

    def start_history(torch):
        mem = torch.cuda.memory
        if hasattr(mem, "_record_memory_history_legacy"):
            # torch >= 2.1: the string API (a bool first argument would take
            # the legacy path).
            mem._record_memory_history(enabled="all", context="all", stacks=stacks, max_entries=max_entries)
            return "string"
        import inspect

        params = inspect.signature(mem._record_memory_history).parameters
        if "trace_alloc_max_entries" not in params:
            # torch 1.13: _record_memory_history(enabled, device), the stacks
            # of live blocks only: a snapshot without history.
            mem._record_memory_history(True)
            return "state"
        # torch 2.0: _record_memory_history(enabled: bool, record_context,
        # trace_alloc_max_entries, trace_alloc_record_context, device,
        # record_context_cpp); its default of 1 trace entry records no history.
        mem._record_memory_history(
            True,
            record_context=True,
            trace_alloc_max_entries=max_entries,
            trace_alloc_record_context=True,
            record_context_cpp=(stacks == "all"),
        )
        return "legacy"

    def start_trace(torch):
        """Profile a few optimizer steps: skip one, warm up one, record three."""
        try:
            from torch.optim.optimizer import register_optimizer_step_post_hook
            from torch.profiler import ProfilerActivity, profile, schedule
        except Exception as err:
            status("error", what="trace", error="this torch has no global optimizer step hook: " + describe(err))
            return
        name = "trace_rank%s_%d.json.gz" % (rank, pid)
        path = os.path.join(out_dir, name)

        def ready(prof):
            tmp = None
            try:
                fd, tmp = new_temp(name, ".json.gz")  # .gz: torch compresses
                os.close(fd)
                prof.export_chrome_trace(tmp)
                os.replace(tmp, path)
                status("dump", kind="trace", path=path, rank=int(rank))
            except Exception as err:
                status("error", what="trace export", error=describe(err))
                if tmp is not None:
                    try:
                        os.remove(tmp)
                    except OSError:
                        pass
            rec["trace_done"] = True  # the step hook stays, idle: removing it
            # while the optimizer runs its hooks would break their loop

        def after_step(optimizer, args, kwargs):
            if os.getpid() != pid or rec["trace_done"]:
                return
            try:
                prof = rec["profiler"]
                if prof is None:
                    # Start after the first step, which builds the optimizer
                    # state and is rarely like the others.
                    prof = profile(
                        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                        schedule=schedule(wait=0, warmup=1, active=3, repeat=1),
                        on_trace_ready=ready,
                        profile_memory=True,
                        record_shapes=True,
                        with_stack=True,
                    )
                    rec["profiler"] = prof
                    prof.start()
                else:
                    prof.step()
            except Exception as err:
                status("error", what="trace", error=describe(err))
                rec["trace_done"] = True

        register_optimizer_step_post_hook(after_step)
        status("trace", steps=3)

    def on_cuda_init():
        # Run by torch.cuda._lazy_init, in the thread that first uses CUDA; an
        # exception here would break that first use, so none leaves.
        torch = rec["torch"]
        if rec["recording"] or os.getpid() != pid:
            return
        try:
            api = start_history(torch)
            rec["recording"] = True
            status("recording", api=api, max_entries=max_entries, stacks=stacks)
        except Exception as err:
            status("error", what="_record_memory_history", error=describe(err))
            return
        try:
            torch._C._cuda_attach_out_of_memory_observer(on_oom)
        except Exception as err:
            status("error", what="out-of-memory observer", error=describe(err))
        if trace_steps:
            start_trace(torch)

    def on_usr1(prev):
        def handler(signum, frame):
            if rec["recording"]:
                dump("signal")
            else:
                status("signal", recording=False)
            if callable(prev):
                prev(signum, frame)

        return handler

    def on_term(signum, frame):
        # SIGTERM with no handler of the program's (torchrun and batch
        # schedulers stop jobs with it): dump, then let the signal do what it
        # would have done — end the process, as killed by SIGTERM.
        import signal

        if rec["recording"] and os.getpid() == pid:
            dump("sigterm")
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        except Exception:
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    def at_exit():
        if os.getpid() != pid:
            return  # a forked child: the snapshot is its parent's
        torch = rec["torch"]
        if rec["recording"]:
            prof = rec["profiler"]
            if prof is not None and not rec["trace_done"]:
                try:
                    prof.stop()
                except Exception as err:
                    status("error", what="trace stop", error=describe(err))
            dump("exit")
            return
        why = "the program never used CUDA"
        try:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if getattr(torch.version, "cuda", None) is None and getattr(torch.version, "hip", None) is None:
                    why = "torch %s is built without CUDA" % torch.__version__
                elif not torch.cuda.is_available():
                    why = "torch %s finds no CUDA device (is_available() is False)" % torch.__version__
        except Exception as err:
            why += " (%s)" % describe(err)
        status("not_recording", why=why)

    def on_torch(torch):
        rec["torch"] = torch
        status("torch", version=str(getattr(torch, "__version__", "?")))
        import atexit

        atexit.register(at_exit)
        try:
            import signal
            import threading

            if hasattr(signal, "SIGUSR1") and threading.current_thread() is threading.main_thread():
                prev = signal.getsignal(signal.SIGUSR1)
                signal.signal(signal.SIGUSR1, on_usr1(prev))
                status("sigusr1")
                # Only where SIGTERM would end the process unhandled: a
                # program's own handler (set before or after) or an ignored
                # SIGTERM is left as it is.
                if hasattr(signal, "SIGTERM") and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                    signal.signal(signal.SIGTERM, on_term)
                    status("sigterm")
        except Exception as err:
            status("error", what="signal handlers", error=describe(err))
        try:
            if torch.cuda.is_initialized():
                on_cuda_init()
            else:
                torch.cuda._lazy_call(on_cuda_init)
        except Exception as err:
            status("error", what="torch.cuda._lazy_call", error=describe(err))

    # The import hook: finds torch's spec with the other finders, and runs
    # on_torch once torch's __init__ has finished. The module keeps its own
    # loader (nothing in torch sees the wrapper). The import system needs
    # only these methods (importlib.abc is not imported at every start).
    class Loader:
        def __init__(self, spec):
            self.spec = spec
            self.loader = spec.loader

        def create_module(self, spec):
            return self.loader.create_module(spec)

        def exec_module(self, module):
            self.spec.loader = self.loader
            module.__loader__ = self.loader
            self.loader.exec_module(module)
            try:
                on_torch(module)
            except Exception as err:
                status("error", what="torch import hook", error=describe(err))

    class Finder:
        def find_spec(self, name, path, target=None):
            if name != "torch" or self not in sys.meta_path:
                return None
            # Ask the finders after this one, as the import system would.
            sys.meta_path.remove(self)
            spec = None
            try:
                for finder in list(sys.meta_path):
                    find = getattr(finder, "find_spec", None)
                    spec = find(name, path, target) if find is not None else None
                    if spec is not None:
                        break
            finally:
                if spec is None:
                    sys.meta_path.insert(0, self)  # not found (yet): keep watching
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            spec.loader = Loader(spec)
            return spec

    sys.meta_path.insert(0, Finder())


def _torchmem_chain():
    """Import the user's own sitecustomize as Python would have."""
    ours = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401  (the next one on sys.path)
    except ImportError as err:
        if getattr(err, "name", None) != "sitecustomize":
            raise
        if ours is not None:
            sys.modules["sitecustomize"] = ours


try:
    _torchmem_hook()
except Exception as _err:  # never break the program's start-up
    sys.stderr.write("torchmem record: the start-up hook failed (%s: %s); nothing is recorded\n" % (type(_err).__name__, _err))
_torchmem_chain()
