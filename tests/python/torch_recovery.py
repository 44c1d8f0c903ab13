"""DDP that loses a node and goes on (tests/cluster/torch_recovery_cluster_test.sh runs one
process per namespace node). Ranks 0..3 train a small model with backend "plexus"; at step
STEP_KILL the harness kills node 2's daemon and rank. The survivors' step fails naming the
node within 2 s of the kill; they shrink the group without rank 2 (plexus_torch.shrink_group,
no Store, no new rendezvous), rebuild DDP on it and train on with 3 ranks, every rank ending
with identical parameters. Then a replacement rank on node 2 (a fresh daemon there) joins
the group's growth back to 4 (grow_group / join_grown_group), and all 4 train on.

usage: torch_recovery.py --rank R --dir SHARED_DIR [--replacement]
Writes SHARED_DIR/ready.<rank> when it has trained STEP_KILL steps; reads killed_at (ns,
CLOCK_REALTIME) that the harness writes before the kill. Exits 0 on success.
"""
import os
import sys
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import plexus_torch

WORLD = 4
VICTIM = 2
STEP_KILL = 5
STEPS_SHRUNK = 10
STEPS_GROWN = 10


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


def train(ddp, opt, gen, steps):
    for _ in range(steps):
        x = torch.randn(16, 32, generator=gen)
        y = torch.randn(16, 4, generator=gen)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()


def params_equal(net, group, size, what):
    """Every rank's parameters, gathered over `group`, equal this rank's."""
    mine = torch.cat([p.detach().flatten() for p in net.parameters()])
    every = [torch.empty_like(mine) for _ in range(size)]
    dist.all_gather(every, mine, group=group)
    for r, other in enumerate(every):
        if not torch.equal(other, mine):
            raise AssertionError(f"{what}: rank {r}'s parameters differ from this rank's")


def member(rank, d):
    dist.init_process_group("plexus", init_method=f"file://{d}/store", rank=rank,
                            world_size=WORLD, timeout=timedelta(seconds=60))
    net = model()
    group = dist.new_group(list(range(WORLD)), backend="plexus")
    ddp = DDP(net, process_group=group)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1234 + rank)
    train(ddp, opt, gen, STEP_KILL)
    open(f"{d}/ready.{rank}", "w").close()
    if rank == VICTIM:
        time.sleep(120)  # killed with its node
        return
    failed = None
    for _ in range(1000):  # until the kill fails a step
        try:
            train(ddp, opt, gen, 1)
        except RuntimeError as e:
            failed = (time.time_ns(), str(e))
            break
    assert failed is not None, "no step failed after the kill"
    killed_ns = int(open(f"{d}/killed_at").read())
    took = (failed[0] - killed_ns) / 1e9
    assert "n2" in failed[1], f"the failure does not name node n2: {failed[1]}"
    assert took < 2.0, f"the step failed {took:.2f} s after the kill (bound: 2 s)"
    print(f"rank {rank}: the step failed {took:.3f} s after the kill: {failed[1][:160]}",
          flush=True)
    start = time.time()
    shrunk = plexus_torch.shrink_group(group, [VICTIM])
    new_rank = rank if rank < VICTIM else rank - 1
    assert shrunk.rank() == new_rank and shrunk.size() == WORLD - 1, (shrunk.rank(), shrunk.size())
    ddp = DDP(net, process_group=shrunk)
    train(ddp, opt, gen, STEPS_SHRUNK)
    params_equal(net, shrunk, WORLD - 1, "after training on 3 ranks")
    print(f"rank {rank}: shrunk to rank {new_rank} of 3 in {time.time() - start:.3f} s; trained "
          f"{STEPS_SHRUNK} steps, parameters equal on every rank", flush=True)
    if new_rank == 0:
        with open(f"{d}/grow_id.tmp", "wb") as f:
            f.write(plexus_torch.grow_id(shrunk))
        os.rename(f"{d}/grow_id.tmp", f"{d}/grow_id")
    grown = plexus_torch.grow_group(shrunk, WORLD)
    assert grown.rank() == new_rank and grown.size() == WORLD
    finish(net, opt, gen, grown, rank)


def replacement(d):
    for _ in range(6000):
        if os.path.exists(f"{d}/grow_id"):
            break
        time.sleep(0.01)
    grown = plexus_torch.join_grown_group(open(f"{d}/grow_id", "rb").read(), WORLD - 1, WORLD)
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    finish(net, opt, torch.Generator().manual_seed(99), grown, "replacement")


def finish(net, opt, gen, grown, who):
    # DDP starts every rank from rank 0's parameters: the replacement takes the survivors'.
    ddp = DDP(net, process_group=grown)
    train(ddp, opt, gen, STEPS_GROWN)
    params_equal(net, grown, WORLD, "after the growth")
    print(f"rank {who}: grown back to {WORLD} ranks; trained {STEPS_GROWN} steps, parameters "
          f"equal on every rank", flush=True)


def main():
    args = sys.argv[1:]
    rank = int(args[args.index("--rank") + 1])
    d = args[args.index("--dir") + 1]
    try:
        if "--replacement" in args:
            replacement(d)
        else:
            member(rank, d)
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)
    sys.stdout.flush()
    os._exit(0)  # the broken default group is left as it is


if __name__ == "__main__":
    main()
