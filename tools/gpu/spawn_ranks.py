"""WORLD rank processes of one script (spawned, so each imports torch afresh), bounded in
time: what tools/gpu's Python checks share."""
import time

import torch.multiprocessing as mp


def run_ranks(target, world, args, deadline_s):
    """Runs target(rank, world, *args) in WORLD processes, waits at most deadline_s for them
    all, kills what is left, and returns {rank: exit code} of those that did not exit 0
    (negative: the signal that ended it; None: it hung)."""
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=target, args=(r, world, *args)) for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.time() + deadline_s
    for p in procs:
        p.join(max(0.1, deadline - time.time()))
    for p in procs:
        if p.is_alive():
            p.kill()
    return {r: p.exitcode for r, p in enumerate(procs) if p.exitcode != 0}
