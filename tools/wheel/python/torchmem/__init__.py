"""torchmem: the post-mortem of PyTorch GPU memory.

This package is how the torchmem wheel is found from Python: the wheel puts
the torchmem binary (one static executable, the same as a release binary) on
the PATH of the environment it is installed into, and `python -m torchmem ...`
runs that binary. Nothing here analyses anything; run `torchmem --help`.
"""

import os
import sys
import sysconfig

__all__ = ["find_torchmem_bin"]


def find_torchmem_bin():
    """Return the path of the torchmem binary that this package installed.

    The wheel's file list (RECORD) says where pip put it: the scripts folder
    of the scheme it installed into (a virtual environment's bin/, --user's,
    --prefix's). Where that list points nowhere, the folders pip uses are
    tried: the interpreter's scripts folder, the user scheme's, and bin/ next
    to the package (pip install --target).
    """
    exe = "torchmem" + (sysconfig.get_config_var("EXE") or "")
    here = os.path.dirname(os.path.realpath(__file__))
    tried = []

    def found(path):
        path = os.fspath(path)
        tried.append(path)
        return os.path.isfile(path) and os.access(path, os.X_OK)

    try:
        from importlib.metadata import PackageNotFoundError, distribution

        dist = distribution("torchmem")
        mine = os.path.dirname(os.path.realpath(dist.locate_file("torchmem/__init__.py"))) == here
        for f in (dist.files or []) if mine else []:
            if f.name == exe and f.parts[0] != "torchmem":
                path = os.path.realpath(dist.locate_file(f))
                if found(path):
                    return path
    except (ImportError, PackageNotFoundError):
        pass

    candidates = [os.path.join(sysconfig.get_path("scripts"), exe)]
    if sys.version_info >= (3, 10):
        user = sysconfig.get_preferred_scheme("user")
    elif os.name == "nt":
        user = "nt_user"
    elif sys.platform == "darwin" and getattr(sys, "_framework", None):
        user = "osx_framework_user"
    else:
        user = "posix_user"
    candidates.append(os.path.join(sysconfig.get_path("scripts", scheme=user), exe))
    candidates.append(os.path.join(os.path.dirname(here), "bin", exe))
    for path in candidates:
        if found(path):
            return path
    raise FileNotFoundError("torchmem: the torchmem binary is not installed; looked at " + ", ".join(tried))
