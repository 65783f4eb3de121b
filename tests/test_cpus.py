"""Worker counts and pinning follow the cores a process is given, not the host's count."""

import os
import subprocess
import sys

import pytest

from curate.cpus import cpu_count, usable_cpus

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity")


def test_usable_cpus_match_the_affinity_mask():
    assert usable_cpus() == sorted(os.sched_getaffinity(0))
    assert cpu_count() == len(os.sched_getaffinity(0))


def test_a_process_confined_to_one_core_plans_for_one():
    # as `taskset -c 0 curate ...` or a cgroup cpuset would confine a run
    code = ("import os; os.sched_setaffinity(0, {0});"
            "from curate.cpus import cpu_count, usable_cpus;"
            "from curate.measure.stage import default_workers_per_gpu;"
            "from curate.diversify.calibrate_pool import default_calibrate_workers;"
            "from curate.sandbox import Sandbox;"
            "print(usable_cpus(), cpu_count(), default_workers_per_gpu(1),"
            " default_calibrate_workers(), Sandbox().workers)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert out.stdout.split() == ["[0]", "1", "1", "1", "1"], out.stdout
