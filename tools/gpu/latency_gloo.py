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

from spawn_ranks import run_ranks


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
        bad = run_ranks(rank_main, world, (f"{d}/store", iters, warmup), deadline_s=30)
    if bad:
        print(f"FAIL gloo ranks failed or hung (rank: exit code): {bad}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
