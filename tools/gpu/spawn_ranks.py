"""WORLD rank processes of one script (spawned, so each imports torch afresh), bounded in
time: what tools/gpu's Python checks share."""
import os
import sys
import time
import traceback

import torch.multiprocessing as mp


def _guarded(target, *args):
    """A rank: an exception is printed and ends it with status 1 (not a hang of its peers
    waiting on a rank whose Python error went unseen)."""
    try:
        target(*args)
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)


def run_ranks(target, world, args, deadline_s):
    """Runs target(rank, world, *args) in WORLD processes, waits at most deadline_s for them
    all, kills what is left, and returns {rank: exit code} of those that did not exit 0
    (negative: the signal that ended it; None: it hung)."""
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_guarded, args=(target, r, world, *args)) for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.time() + deadline_s
    for p in procs:
        p.join(max(0.1, deadline - time.time()))
    for p in procs:
        if p.is_alive():
            p.kill()
    return {r: p.exitcode for r, p in enumerate(procs) if p.exitcode != 0}
