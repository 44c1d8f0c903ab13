"""The peer's figure beside plexus-bench's 8 B allreduce latency: torch.distributed's gloo,
WORLD ranks on this node, ITERS timed allreduces of 8 bytes (two float32) after WARMUP.
Prints the largest of the ranks' median per-iteration times (as plexus-bench --stat median).

usage: latency_gloo.py WORLD ITERS WARMUP
"""
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, world, store, iters, warmup):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    t = torch.ones(2, dtype=torch.float32)
    times = []
    for i in range(warmup + iters):
        t0 = time.perf_counter()
        dist.all_reduce(t)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    median = torch.tensor([statistics.median(times) * 1e6])
    dist.all_reduce(median, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"FIGURE gloo {world} ranks: median {median.item():.2f} us", flush=True)
    dist.destroy_process_group()


def main():
    world, iters, warmup = (int(a) for a in sys.argv[1:4])
    with tempfile.TemporaryDirectory() as d:
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=rank_main, args=(r, world, f"{d}/store", iters, warmup))
                 for r in range(world)]
        for p in procs:
            p.start()
        deadline = time.time() + 30
        for p in procs:
            p.join(max(0.1, deadline - time.time()))
        if any(p.exitcode != 0 for p in procs):
            for p in procs:
                if p.is_alive():
                    p.kill()
            print("FAIL a gloo rank failed", flush=True)
            sys.exit(1)


if __name__ == "__main__":
    main()
