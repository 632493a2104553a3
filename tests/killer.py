"""A process that dies like ``kill -9`` at its k-th file-system operation (fsync or rename) inside extrap.io.

``python -c KILLER k ARGV...`` runs ``extrap ARGV`` and exits with status 137 at the k-th call, with no cleanup
and no finally blocks, so that a test can resume what the death left behind.
"""

KILLER = """
import os, sys
import extrap.io as io
from extrap.cli import main

k, calls = int(sys.argv[1]), [0]

def dying(real):
    def op(*a, **kw):
        calls[0] += 1
        if calls[0] == k:
            os._exit(137)  # like kill -9: no cleanup, no finally blocks
        return real(*a, **kw)
    return op

io.os.fsync, io.os.replace = dying(io.os.fsync), dying(io.os.replace)
sys.exit(main(sys.argv[2:]))
"""
