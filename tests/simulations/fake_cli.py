"""A stand-in for ``sanitas`` in the warm-worker tests: each point prints the worker's pid and does
what its arguments say (succeed, fail, raise, die, hang)."""

from __future__ import annotations

import os
import sys
import time

CALLS = 0  # points this worker process has served


def main(argv: list[str]) -> int:
    global CALLS
    CALLS += 1
    print(f"pid={os.getpid()} calls={CALLS}", flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    action = argv[0]
    if action == "fail":
        return 3
    if action == "raise":
        raise RuntimeError("a bug in the point")
    if action == "die":
        os._exit(9)
    if action == "die-once":  # argv[1]: a marker file; the first attempt creates it and dies
        if not os.path.exists(argv[1]):
            open(argv[1], "w").close()
            os._exit(9)
    if action == "hang":
        time.sleep(60)
    return 0
