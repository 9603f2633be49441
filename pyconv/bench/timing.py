"""The measuring protocol, one for every side — our GPU plans and cuDNN (graph_run: PyTorch CUDA-graph
replays of the same calls on the same operands; without PyTorch, our fp32 NCHW problems through
conv2d_time, which captures and replays the same way in C), the host variant (a host clock around
synchronous calls) — so that their numbers compare.

A Side is run(calls, warmup, reps) -> per-call ms of each of reps timed rounds, where a round is
`calls` calls cycling through the operand sets, after `warmup` untimed rounds; and min_calls, the
shortest round that still cycles through every set (a graph replays the same calls every round, so on
the GPU that is one call per set; the host side carries its rotation on from round to round, so one).
measure() first probes with PROBE_REPS rounds of min_calls, then sizes the real run from the probe:
rounds of about REPLAY_MS (so event resolution and the graph launch vanish into it), as many as fit in
the time budget (MIN_REPS..MAX_REPS). A case whose single round costs more than 2/5 of the budget
keeps the probe's median: slow naive variants on large shapes cost seconds, not minutes, and their
rows say how many rounds stand behind them.
"""
from __future__ import annotations

import contextlib
import itertools
import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable, NamedTuple

from .._lib import check, ffi, lib

REPLAY_MS = 1.0
MAX_CALLS = 100
PROBE_REPS = 3
MIN_REPS, MAX_REPS = 5, 50
DEFAULT_BUDGET_MS = 20.0


@dataclass(frozen=True)
class Timing:
    median_ms: float   # per call
    min_ms: float
    max_ms: float
    calls: int         # calls per timed round (per graph)
    reps: int          # timed rounds the median is over

    @classmethod
    def of(cls, times, calls: int) -> "Timing":
        return cls(statistics.median(times), min(times), max(times), calls, len(times))


class Side(NamedTuple):
    run: Callable
    min_calls: int


def measure(side: Side, budget_ms: float = DEFAULT_BUDGET_MS) -> Timing:
    least = side.min_calls
    probe = side.run(least, 1, PROBE_REPS)
    per_call = max(statistics.median(probe), 1e-6)
    calls = min(max(math.ceil(REPLAY_MS / per_call), least), max(MAX_CALLS, least))
    round_ms = calls * per_call
    if round_ms * MIN_REPS > 2 * budget_ms:
        return Timing.of(probe, least)
    reps = min(max(int(budget_ms / round_ms), MIN_REPS), MAX_REPS)
    return Timing.of(side.run(calls, 2, reps), calls)


def device_run(variant_id: int, params, sets, workspace, workspace_bytes: int) -> Side:
    """Our GPU side without PyTorch (fp32 NCHW problems, the legacy conv_params): conv2d_time captures
    `calls` launches into a graph and times its replays."""
    f, l = ffi(), lib()
    xs, ws, ys = (f.new("float*[]", [f.cast("float*", a) for a in arrays])
                  for arrays in zip(*(sets.pointers(i) for i in range(sets.n))))
    ws_ptr = f.cast("void*", workspace.ptr) if workspace is not None else f.NULL

    def run(calls: int, warmup: int, reps: int) -> list:
        median, times = f.new("float*"), f.new("float[]", reps)
        check(l.conv2d_time(variant_id, params, xs, ws, ys, sets.n, ws_ptr, workspace_bytes, f.NULL, calls,
                            warmup, reps, median, times))
        return list(times)
    return Side(run, sets.n)


def graph_run(torch, call: Callable, n: int, context: Callable = contextlib.nullcontext) -> Side:
    """A GPU side through PyTorch's CUDA graphs, the same for cuDNN and for our plans: call(i) enqueues
    the work of operand set i on torch's current stream and returns what must stay alive (an output).
    Each set is called once eagerly first, on a side stream as torch asks before a capture (cuDNN's
    benchmark mode picks its algorithm there; a failure shows here, not inside the capture); then
    `calls` calls cycling through the sets are captured into one graph, whose replays are timed between
    events. `context` (e.g. TF32 on) is entered around all of it."""

    def run(calls: int, warmup: int, reps: int) -> list:
        with context():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for i in range(n):
                    call(i)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            alive = [None] * n  # one output per set stays alive, cycling like the inputs
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                for i in range(calls):
                    alive[i % n] = call(i % n)
            for _ in range(warmup):
                graph.replay()
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                      for _ in range(reps)]
            for start, stop in events:
                start.record()
                graph.replay()
                stop.record()
            torch.cuda.synchronize()
            times = [start.elapsed_time(stop) / calls for start, stop in events]
            del graph, alive
            return times
    return Side(run, n)


# The host side's first run warms up for this long (at least one call): BLAS threads left spinning by
# the ceilings' matmul just before (OpenBLAS spins up to 2^28 cycles before it sleeps) held the cpu
# variant's OpenMP threads back on a 2-core machine, LeNet C1 at B = 2 taking 8 ms a call instead of
# 0.4 for ~35 ms, and measure() kept those calls where its probe alone filled the budget.
HOST_WARMUP_MS = 200.0


def host_run(plan, sets) -> Side:
    """Our host side (the cpu variant, a pyconv.Conv2dPlan): its calls return when y is written, so a
    host clock is exact. The rotation carries on across rounds, so a round may be a single call.
    Operands go as addresses (the sets are the plan's by construction; a layout check would read an
    NHWC array with one channel as NCHW, which is the same memory)."""
    turn = itertools.count()
    warmed = False

    def one_round(calls: int) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            plan.launch(*sets.pointers(next(turn) % sets.n))
        return (time.perf_counter() - start) * 1e3 / calls

    def run(calls: int, warmup: int, reps: int) -> list:
        nonlocal warmed
        if not warmed:
            until = time.perf_counter() + HOST_WARMUP_MS / 1e3
            one_round(1)
            while time.perf_counter() < until:
                one_round(1)
            warmed = True
        for _ in range(warmup):
            one_round(calls)
        return [one_round(calls) for _ in range(reps)]
    return Side(run, 1)
