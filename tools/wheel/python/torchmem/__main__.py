"""`python -m torchmem ARGS...` runs the torchmem binary with ARGS.

On POSIX the Python process becomes torchmem (os.execv): the same process
id, signals, standard streams and exit status, so `python -m torchmem record
-- python train.py` is `torchmem record -- python train.py`. Windows has no
exec: torchmem runs as a child and its exit status is passed on.
"""

import os
import sys

from torchmem import find_torchmem_bin


def main():
    try:
        exe = find_torchmem_bin()
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    argv = [exe] + sys.argv[1:]
    if sys.platform == "win32":
        import subprocess

        try:
            return subprocess.call(argv)
        except KeyboardInterrupt:
            return 130
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, argv)


if __name__ == "__main__":
    sys.exit(main())
