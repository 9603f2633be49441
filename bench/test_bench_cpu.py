"""CPU benchmarks, the ones CI runs (.ci/bench-cpu) against the committed baseline of its machine class
(bench/results/cpu-ci/baseline.json): the cpu variant on small shapes, and a fixed NumPy workload that
is not pyconv's (test_machine_reference), by which the check tells a slower or busier machine from a
slower pyconv.

The cpu variant returns when y is written, so pytest-benchmark's clock stops after the work. Operand
sets are cycled past the last-level cache as in `python -m pyconv bench`. extra_info: GFLOP/s, GB/s,
the floor and % of floor from CPU ceilings measured in the same session.
"""
import itertools

import numpy as np
import pytest

import pyconv
from pyconv.bench import ceilings, operands, roofline
from pyconv.bench.shapes import Shape

SHAPES = [
    Shape("lenet_c1_b8", 8, 1, 86, 86, 4, 7, 7),
    Shape("lenet_c3_b8", 8, 4, 40, 40, 16, 7, 7),
    Shape("conv3x3_pad1_b4", 4, 16, 32, 32, 16, 3, 3, pad=(1, 1)),
    Shape("conv1x1_b4", 4, 64, 28, 28, 32, 1, 1),
]


# The machine reference: an fp32 matmul of this size runs 0.32 ms on one core of CI's machine class,
# compute-bound from L2 as the cpu variant's small shapes are, so a slower clock, a busy sibling core or
# a slower machine stretches both alike.
REFERENCE_N = 256


@pytest.fixture(scope="module")
def cpu_ceilings():
    """Measured once for the module: the rates behind each benchmark's floor."""
    return ceilings.measure_cpu()


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_cpu_variant(benchmark, shape, cpu_ceilings):
    plan = pyconv.Conv2dPlan(shape.x_shape, shape.w_shape, shape.stride, shape.pad, shape.dilation, variant="cpu")
    n = operands.set_count(shape, cpu_ceilings.cache_bytes, operands.free_bytes(False))
    sets = operands.OperandSets(shape, n, False, cpu_ceilings.cache_bytes)
    order = itertools.cycle(range(n))

    def call():
        i = next(order)
        plan.launch(sets.xs[i], sets.ws[i], sets.ys[i])

    benchmark(call)
    benchmark.extra_info.update({"n_sets": n, "cpu": cpu_ceilings.as_dict()})
    if benchmark.stats:  # None under --benchmark-disable
        benchmark.extra_info.update(roofline.summary(shape, "fp32", cpu_ceilings, benchmark.stats.stats.median * 1e3))


def test_machine_reference(benchmark):
    """Not pyconv's code: NumPy's matmul on fixed operands (one thread under .ci/bench-cpu's
    OMP_NUM_THREADS=1). .ci/bench-cpu divides each cpu-variant time by this one before comparing
    with the baseline."""
    rng = np.random.default_rng(0)
    a = rng.random((REFERENCE_N, REFERENCE_N), dtype=np.float32)
    b = rng.random((REFERENCE_N, REFERENCE_N), dtype=np.float32)
    out = np.empty_like(a)
    benchmark(np.matmul, a, b, out=out)
