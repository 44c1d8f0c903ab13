# plexus_torch.weights against a private plexusd (PLEXUS_SOCKET): a model's state_dict
# published by one process and pulled into another model by another, bit for bit; a list
# round trip; waiting for a newer version; and the refusals as Python exceptions.
import multiprocessing as mp
import sys

import torch

import plexus_torch
from plexus_torch import weights


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))


def puller(name, version, conn):
    try:
        model = make_model(seed=999)  # other values: the pull must replace every one
        got = weights.pull(name, model.state_dict(), version=None, timeout=30)
        expected = make_model(seed=version).state_dict()
        same = all(torch.equal(model.state_dict()[k], expected[k]) for k in expected)
        conn.send((got, same, weights.latest(name)))
    except Exception as e:  # reported to the parent, which fails
        conn.send(("error", repr(e), None))


def check(condition, what):
    if not condition:
        print("FAIL: " + what)
        sys.exit(1)
    print("ok " + what)


def main():
    name = "policy-%d" % mp.current_process().pid
    check(weights.latest(name) is None, "latest of a model never published is None")
    for version in (1, 2):
        weights.publish(name, make_model(seed=version).state_dict(), version)
    check(weights.latest(name) == 2, "latest is the newest version published")

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=puller, args=(name, 2, child))
    p.start()
    got, same, latest = parent.recv()
    p.join(60)
    check(got == 2 and same is True and latest == 2,
          "another process pulled version 2 into its own model's state_dict, bit for bit (%s)" %
          ((got, same, latest),))

    # A list of tensors, one of them in the pool: names are the indices.
    pooled = plexus_torch.empty_like(torch.empty(1 << 18, dtype=torch.float32))
    pooled.copy_(torch.arange(1 << 18, dtype=torch.float32))
    ints = torch.arange(1000, dtype=torch.int64)
    weights.publish(name + "-list", [pooled, ints], 7)
    out = [torch.zeros(1 << 18), torch.zeros(1000, dtype=torch.int64)]
    check(weights.pull(name + "-list", out) == 7 and torch.equal(out[0], pooled) and
          torch.equal(out[1], ints), "a list round trip, one tensor from the pool")

    # Waiting for a newer version, then timing out.
    try:
        weights.pull(name, make_model(seed=0).state_dict(), newer_than=2, timeout=0.3)
        check(False, "a pull of a version newer than the newest timed out")
    except TimeoutError as e:
        check("came in time" in str(e), "a pull of a version newer than the newest timed out: %s" % e)

    try:
        weights.publish(name, make_model(seed=1).state_dict(), 2)
        check(False, "a version going back was refused")
    except ValueError as e:
        check("not newer than" in str(e), "a version going back was refused: %s" % e)

    try:
        weights.publish(name, {"w": torch.zeros(4, 4).t()}, 3)
        check(False, "a non-contiguous tensor was refused")
    except ValueError as e:
        check("contiguous" in str(e), "a non-contiguous tensor was refused, named: %s" % e)

    key = weights.key(name)
    check(isinstance(key, bytes) and len(key) == 128, "a key is the 128 bytes of a unique id")
    try:
        weights.subscribe(key, name + "-replica")
        check(False, "subscribing on the publisher's own node was refused")
    except ValueError as e:
        check("this node's own" in str(e), "subscribing on the publisher's own node was refused: %s" % e)

    wrong = make_model(seed=0).state_dict()
    wrong["0.weight"] = torch.zeros(3)
    try:
        weights.pull(name, wrong, timeout=0)
        check(False, "a tensor of the wrong size was refused")
    except ValueError as e:
        check("0.weight" in str(e), "a tensor of the wrong size was refused, named: %s" % e)


if __name__ == "__main__":
    main()
