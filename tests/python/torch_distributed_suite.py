"""PyTorch's own distributed test suite (torch/testing/_internal/distributed/
distributed_test.py, shipped in python3-torch) run with backend "plexus".

The backend opts into the suite's feature-gated tests as a plugin with DDP and subgroup
support and declares nothing unsupported. Run by torch_distributed_suite.sh with a private
plexusd; extra arguments go to unittest (-k NAME selects tests).
"""
import os
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
stubs = os.path.join(here, "stubs")  # expecttest
sys.path.insert(0, stubs)
# The fork server below is a new interpreter: it finds the stubs through the environment.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [stubs, os.environ.get("PYTHONPATH")]))
os.environ.setdefault("BACKEND", "plexus")
os.environ.setdefault("WORLD_SIZE", "2")
if "TEMP_DIR" not in os.environ:  # (setdefault would make a directory in every process)
    os.environ["TEMP_DIR"] = tempfile.mkdtemp(prefix="plexus-dist-suite.")

import plexus_torch  # noqa: E402,F401  (registers the backend)
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

DistTestCases.backend_feature["plugin"].add("plexus")
DistTestCases.backend_feature["ddp"].add("plexus")
DistTestCases.backend_feature["subgroup"].add("plexus")

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


import unittest  # noqa: E402

import torch  # noqa: E402
import torch.multiprocessing  # noqa: E402

# Each test starts its two ranks afresh. The suite's own way ("spawn") makes every rank
# import torch and the suite again: about 1.5 s of CPU each, 207 s of the suite's 279
# tests on 2 cores. A fork server that imported them once forks each rank ready (53 s).
# ("fork" would copy the test runner itself, whose state the suite changes per test; tried,
# 78 more tests skipped.) Named modules, not "__main__": Python 3.11's fork server keeps
# only keys of the preparation data that spawn never writes, so a "__main__" preload is
# skipped; each rank then runs this file again, cheaply, as everything it imports is loaded.
_FORKSERVER = torch.multiprocessing.get_context("forkserver")
_FORKSERVER.set_forkserver_preload(
    ["torch", "plexus_torch", "torch.testing._internal.distributed.distributed_test"])


class _ForkserverProcess(_FORKSERVER.Process):
    """A rank forked by the fork server with the environment of the moment it is made (just
    before it starts): the suite sets TEMP_DIR and INIT_METHOD per test, which spawn would
    pass on and the fork server (started once, with the environment of then) would not."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._environ = dict(os.environ)

    def run(self):
        os.environ.clear()
        os.environ.update(self._environ)
        super().run()


class TestPlexusBackend(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._start_processes(_ForkserverProcess)


# These fail for every backend (gloo too) on Debian's torch 1.13 with Python 3.11: DDP there
# imports torch.distributed._shard, which trips a dataclass "mutable default" check.
_SHARD_IMPORT_BROKEN = [
    "test_DistributedDataParallelCPU",
    "test_DistributedDataParallelCPU_grad_is_view",
    "test_ddp_create_graph",
    "test_ddp_logging_data_cpu",
    "test_static_graph_api_cpu",
]
for _name in _SHARD_IMPORT_BROKEN if torch.__version__.startswith("1.") else []:
    setattr(TestPlexusBackend, _name, unittest.skip(
        "torch.distributed._shard does not import on Debian's torch 1.13 with Python 3.11 "
        "(any backend)")(getattr(TestPlexusBackend, _name)))

# Torch 2.x names any backend registered from outside torch "custom" in DDP's logging data
# (the ProcessGroup's getBackendName() gives its BackendType, CUSTOM), while dist.get_backend
# names it "plexus"; this test compares the two. No backend but torch's own can pass it.
if not torch.__version__.startswith("1.") and os.environ["BACKEND"] == "plexus":
    TestPlexusBackend.test_ddp_logging_data_cpu = unittest.skip(
        "torch 2.x's DDP logging names every out-of-tree backend 'custom', not its name")(
            TestPlexusBackend.test_ddp_logging_data_cpu)


if __name__ == "__main__":
    run_tests()
