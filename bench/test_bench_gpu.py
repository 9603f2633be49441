"""GPU benchmarks: every GPU variant, auto and auto_fast on a few shapes (LeNet's two layers, ResNet-50 /
AlexNet layers at batch 32, a MobileNetV2 depthwise and a ResNeXt-50 grouped layer). Results from a GPU
machine are kept under bench/results/<gpu-name>/ (bench/gpu_run.sh writes them), for pytest-benchmark's
own compare.

pytest-benchmark times one launch plus a stream synchronisation per call (so its clock stops after the
kernel, and it includes the host launch cost); extra_info adds the op time as `python -m pyconv bench`
measures it (op_ms: CUDA-graph replays, no host cost), GFLOP/s, GB/s, floor and % of floor for both.
"""
import itertools

import pytest

import pyconv
from pyconv.bench import ceilings, cudnn, operands, roofline, runner, timing
from pyconv.bench.shapes import Shape


def _skip_reason() -> str:
    """Why the GPU benchmarks cannot run here ("" when they can)."""
    try:
        if pyconv.device_count() > 0:
            return ""
    except pyconv.LibraryNotFoundError as exc:
        return f"libconv not loadable: {exc}"
    from pyconv import _lib
    return "no CUDA device on this machine" if _lib.lib().conv_built_with_cuda() else "libconv was built without CUDA"


SKIP_REASON = _skip_reason()
pytestmark = pytest.mark.skipif(bool(SKIP_REASON), reason=SKIP_REASON or "GPU present")

SHAPES = [
    Shape("lenet_c1_b1000", 1000, 1, 86, 86, 4, 7, 7),
    Shape("lenet_c3_b1000", 1000, 4, 40, 40, 16, 7, 7),
    Shape("resnet50_3x3_56_b32", 32, 64, 56, 56, 64, 3, 3, pad=(1, 1)),
    Shape("resnet50_1x1_56_b32", 32, 256, 56, 56, 64, 1, 1),
    Shape("alexnet_conv1_b32", 32, 3, 227, 227, 96, 11, 11, stride=(4, 4)),
    Shape("mobilenetv2_dw2_b32", 32, 144, 56, 56, 144, 3, 3, pad=(1, 1), groups=144),
    Shape("resnext50_g32_0_b1", 1, 128, 56, 56, 128, 3, 3, pad=(1, 1), groups=32),
]


@pytest.fixture(scope="module")
def gpu_ceilings():
    """Measured once for the module: the rates behind each benchmark's floor."""
    return ceilings.measure_gpu(pyconv.device_name(0))


def _variants() -> list:
    try:
        return [v.name for v in pyconv.variant_info() if v.on_device] + ["auto", "auto_fast"]
    except pyconv.LibraryNotFoundError:
        return []


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
@pytest.mark.parametrize("variant", _variants())
def test_gpu_variant(benchmark, variant, shape, gpu_ceilings):
    try:
        plan = pyconv.Conv2dPlan(shape.x_shape, shape.w_shape, shape.stride, shape.pad, shape.dilation, shape.groups,
                                 variant=variant)
    except pyconv.ConvUnsupportedError as exc:
        pytest.skip(f"{variant} does not run {shape.name}: {exc}")
    torch = cudnn.load_torch()[0]
    if shape.groups > 1 and torch is None:
        pytest.skip("grouped layers are timed through PyTorch's CUDA graphs: no torch with CUDA here")
    unit = roofline.unit_of(plan.variant, {})
    n = operands.set_count(shape, gpu_ceilings.cache_bytes, operands.free_bytes(True))
    sets = operands.OperandSets(shape, n, True, gpu_ceilings.cache_bytes, torch=torch)
    pyconv.synchronize()  # the plan's workspace and the sets are ready before other streams use them
    stream = pyconv.Stream()
    order = itertools.cycle(range(n))

    def call():
        i = next(order)
        plan.launch(*sets.pointers(i), stream)
        stream.synchronize()

    benchmark(call)
    extra = {"resolved": plan.variant, "n_sets": n, "gpu": gpu_ceilings.as_dict()}
    if benchmark.stats:  # None under --benchmark-disable
        extra.update(roofline.summary(shape, unit, gpu_ceilings, benchmark.stats.stats.median * 1e3))
    timer, side = runner.our_side(shape, plan, sets)
    op = timing.measure(side)
    extra["op_timer"] = timer
    extra.update({"op_" + k: v for k, v in roofline.summary(shape, unit, gpu_ceilings, op.median_ms).items()})
    extra.update({"op_ms": op.median_ms, "op_calls_per_graph": op.calls, "op_reps": op.reps})
    benchmark.extra_info.update(extra)
