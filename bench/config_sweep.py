"""Times every launch configuration of a variant on the layers of a suite, beside cuDNN: which
configuration wins where, and by how much, before the tuner picks among them.

    python3 bench/config_sweep.py grouped_direct --suite groups --batch 32 --compare fp16 \\
        --layers mobilenetv2/dw2 efficientnet_b0/dw3_2 --configs nhwc_p2_t128 nhwc_narrow_r4p2_t128

Each row: the layer, each configuration's median op time in microseconds (CUDA-graph replays between
two events, operand sets cycled past the L2, as `python -m pyconv bench` times them), the fastest, its %
of the floor, cuDNN's time at the comparison's precision and cuDNN / fastest. A configuration that
refuses the layer shows "-". Needs PyTorch (graph timing, fp16 / bf16 / NHWC operands) and a GPU.
"""
import argparse
import math
import sys

import pyconv
from pyconv import ConvError, ConvRuntimeError
from pyconv.bench import comparisons, operands, roofline, runner, timing
from pyconv.bench.ceilings import measure_gpu
from pyconv.bench.cudnn import Cudnn, load_torch
from pyconv.bench.shapes import load_suite


def time_config(shape, comparison, variant, config, sets, budget_ms):
    """Median ms of one configuration on the sets (the bench's own graph protocol, runner.our_side), or
    None where it refuses the layer."""
    try:
        plan = pyconv.Conv2dPlan(shape.x_shape, shape.w_shape, shape.stride, shape.pad, shape.dilation,
                                 shape.groups, variant=variant, config=config, precision=comparison.precision,
                                 dtype=comparison.dtype, layout=comparison.layout, w_layout=comparison.w_layout)
    except (ConvError, ConvRuntimeError):  # the configuration refuses the layer
        return None
    pyconv.synchronize()  # the plan's workspace came from the legacy stream
    _, side = runner.our_side(shape, plan, sets)
    return timing.measure(side, budget_ms).median_ms


def us(ms: float) -> str:
    """Microseconds with a hundredth's resolution below 10 (batch-1 layers of a few microseconds)."""
    v = 1e3 * ms
    return f"{v:.2f}" if v < 10 else f"{v:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variant")
    parser.add_argument("--suite", default="groups")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--compare", default="fp16", choices=sorted(comparisons.COMPARISONS))
    parser.add_argument("--layers", nargs="+", help="layer names of the suite (default: all)")
    parser.add_argument("--configs", nargs="+", help="configurations (default: all of the variant's)")
    parser.add_argument("--budget-ms", type=float, default=timing.DEFAULT_BUDGET_MS)
    args = parser.parse_args()
    torch, why = load_torch()
    if torch is None:
        raise SystemExit(f"config_sweep needs PyTorch with CUDA: {why}")
    comparison = comparisons.COMPARISONS[args.compare]
    configs = args.configs or pyconv.variant_configs(args.variant)
    shapes = [s for s in load_suite(args.suite, [args.batch]) if not args.layers or s.name in args.layers]
    ceilings = measure_gpu(pyconv.device_name(0))
    cudnn = Cudnn(torch)
    unit = roofline.unit_of(args.variant, {})  # the unit the variant declares: its floor's rate
    print(f"# {args.variant} on {args.suite} B={args.batch} {args.compare}, {pyconv.device_name(0)}; us")
    print("| layer | " + " | ".join(configs) + " | fastest | % floor | cuDNN | cuDNN / fastest |")
    print("| --- |" + " ---: |" * (len(configs) + 4))
    ratios = []
    for shape in shapes:
        n = operands.set_count(shape, ceilings.cache_bytes, operands.free_bytes(True), comparison.dtype)
        sets = operands.OperandSets(shape, n, True, ceilings.cache_bytes, dtype=comparison.dtype,
                                    layout=comparison.layout, torch=torch)
        times = [time_config(shape, comparison, args.variant, c, sets, args.budget_ms) for c in configs]
        cudnn_ms = timing.measure(cudnn.run_for(shape, sets, comparison.cudnn), args.budget_ms).median_ms
        ran = [(t, c) for t, c in zip(times, configs) if t is not None]
        cells = ["-" if t is None else us(t) for t in times]
        if ran:
            best, name = min(ran)
            pct = roofline.summary(shape, unit, ceilings, best, comparison.dtype)["pct_of_floor"]
            ratios.append(cudnn_ms / best)
            tail = [name, f"{pct:.0f}%", us(cudnn_ms), f"{cudnn_ms / best:.2f}"]
        else:
            tail = ["-", "-", us(cudnn_ms), "-"]
        print(f"| {shape.name} | " + " | ".join(cells + tail) + " |", flush=True)
        del sets
        cudnn.release()
    if ratios:
        print(f"# geometric mean cuDNN / fastest: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}x "
              f"over {len(ratios)} layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
