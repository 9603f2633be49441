"""One shape at a time: for each comparison and variant a plan (auto resolved and tuned first, or the
library's reason why not), operand sets in the comparison's dtype and layout, our op times, cuDNN's at
the matching precision on the same sets, and one Row per (comparison, variant). Each side is timed cold
(cycling through sets larger than the cache) and hot (one set); cuDNN cold twice, its faster run the anchor."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass, field

import numpy as np

from .. import _problem, api, device
from .._lib import ConvError, ConvRuntimeError, check, ffi, lib
from . import cudnn as cudnn_side
from . import operands, roofline, timing
from .ceilings import Ceilings
from .comparisons import VARIANTS, Comparison, variants_in
from .shapes import Shape


@dataclass
class Row:
    shape: Shape
    variant: str
    compare: str = VARIANTS.name  # the comparison (comparisons.py)
    dtype: str = "float32"        # of x, w and y
    layout: str = "NCHW"          # of x and y (w: MKKC with NHWC)
    status: str = "ok"        # ok | unsupported | unavailable | error | invalid shape | not run
    message: str = ""         # why, when not ok (the library's message)
    resolved: str = ""        # the concrete variant (differs for auto / auto_fast)
    config: str = ""          # its launch configuration
    unit: str = ""
    timer: str = ""           # torch graph | conv2d_time | host clock
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    calls: int | None = None  # calls per timed round (graph)
    reps: int | None = None
    n_sets: int | None = None
    cache_resident: bool = False
    stats: dict = field(default_factory=dict)        # roofline.summary of median_ms
    hot_ms: float | None = None  # ours on one operand set, hot in the cache (median_ms: cycled sets, cold)
    cudnn_precision: str = ""
    cudnn_ms: float | None = None  # cold, the faster of cudnn_runs (its strongest: the anchor)
    cudnn_runs: tuple = ()         # cuDNN's cold medians of two runs (before and after its hot one)
    cudnn_hot_ms: float | None = None
    cudnn_note: str = ""      # why there is no cuDNN time
    cudnn_stats: dict = field(default_factory=dict)  # roofline.summary of cudnn_ms on cuDNN's unit

    @property
    def speedup_vs_cudnn(self) -> float | None:
        """cuDNN's time / ours: above 1, ours is faster."""
        if not self.median_ms or not self.cudnn_ms:
            return None
        return self.cudnn_ms / self.median_ms

    @property
    def speedup_hot_vs_cudnn(self) -> float | None:
        """The same with both sides' operands hot."""
        if not self.hot_ms or not self.cudnn_hot_ms:
            return None
        return self.cudnn_hot_ms / self.hot_ms

    @property
    def cudnn_unstable(self) -> bool:
        """cuDNN's two runs of this shape differ by more than UNSTABLE: its anchor is not one number."""
        runs = [t for t in self.cudnn_runs if t]
        return len(runs) == 2 and max(runs) > UNSTABLE * min(runs)

    def as_dict(self) -> dict:
        d = self.shape.as_dict()
        d.update({k: v for k, v in asdict(self).items() if k not in ("shape", "stats", "cudnn_stats")})
        for key in ("unit", "gflops", "gbytes_per_s", "floor_ms", "floor_bound", "pct_of_floor"):
            d[key] = self.stats.get(key, d.get(key))
        d["cudnn_floor_ms"] = self.cudnn_stats.get("floor_ms")
        d["cudnn_pct_of_floor"] = self.cudnn_stats.get("pct_of_floor")
        d["speedup_vs_cudnn"] = self.speedup_vs_cudnn
        d["speedup_hot_vs_cudnn"] = self.speedup_hot_vs_cudnn
        d["cudnn_runs"] = list(self.cudnn_runs)
        d["cudnn_unstable"] = self.cudnn_unstable
        return d


UNSTABLE = 1.10  # cuDNN's two runs of a shape further apart than this are reported with both times


_ROW_STATUS = {"CONV_ERR_UNSUPPORTED": "unsupported", "CONV_ERR_TOO_LARGE": "unsupported",
               "CONV_ERR_NO_DEVICE": "unavailable", "CONV_ERR_NO_CUDA_BUILD": "unavailable"}


def _failure(exc: Exception) -> tuple:
    """(row status, message) of a library exception: the library's own message, and "error" for
    anything but a shape or a machine the variant cannot run (which the CLI's exit status reports)."""
    status = getattr(exc, "status", None)
    name = ffi().string(lib().conv_status_string(status)).decode() if isinstance(status, int) else ""
    return _ROW_STATUS.get(name, "error"), getattr(exc, "message", "") or str(exc)


def _limit(exc: ConvError) -> tuple:
    """(row status, message) of a ConvError: raised by the bench itself (no status), it names a limit of
    this machine (no PyTorch for bf16 or grouped problems); from the library, as _failure."""
    return ("unavailable", str(exc)) if exc.status is None else _failure(exc)


def our_side(shape: Shape, plan: api.Conv2dPlan, sets: operands.OperandSets) -> tuple:
    """(timer name, timing.Side) for one plan: the same graph protocol as cuDNN's where PyTorch is there,
    conv2d_time without it (fp32 NCHW without groups: the legacy ABI), a host clock on the host."""
    if not sets.on_device:
        return "host clock", timing.host_run(plan, sets)
    if sets.torch is not None:
        stream = sets.torch.cuda.current_stream  # inside the capture: the capturing stream

        def call(i: int):  # addresses, as in host_run
            plan.launch(*sets.pointers(i), stream().cuda_stream)
        return "torch graph", timing.graph_run(sets.torch, call, sets.n)
    if shape.groups != 1:
        raise ConvError("grouped problems on the GPU are timed through PyTorch's CUDA graphs: pip install torch")
    ws_bytes = ffi().new("size_t*")
    check(lib().conv2d_workspace_size(plan.variant_id, plan.params, ws_bytes))
    workspace = device.DeviceArray((ws_bytes[0],), np.uint8) if ws_bytes[0] else None
    return "conv2d_time", timing.device_run(plan.variant_id, plan.params, sets, workspace, ws_bytes[0])


class Runner:
    def __init__(self, variants, comparisons, budget_ms: float, cudnn: cudnn_side.Cudnn, torch, overrides: dict,
                 gpu_ceilings: Ceilings | None, cpu_ceilings, hot: bool = True):
        """variants: names (empty: the library's choice in each comparison); comparisons: Comparison
        list; torch: the module (our GPU rows are then timed through its CUDA graphs) or None;
        gpu_ceilings: None without a GPU; cpu_ceilings: a callable measuring them on first need (only a
        run with a host row pays for it); hot: also time both sides on one operand set."""
        self.hot = hot
        self.variants = list(variants)
        self.comparisons = list(comparisons)
        self.budget_ms = budget_ms
        self.cudnn = cudnn
        self.torch = torch
        self.overrides = overrides
        self.gpu_ceilings = gpu_ceilings
        self._measure_cpu = cpu_ceilings
        self.cpu_measured = None  # the CPU ceilings, once a host row needed them

    def cpu_ceilings(self) -> Ceilings:
        if self.cpu_measured is None:
            self.cpu_measured = self._measure_cpu()
        return self.cpu_measured

    def cases(self) -> list:
        """(comparison, variant name) of every row a shape gets, in table order."""
        return [(c, v) for c in self.comparisons for v in variants_in(c, self.variants)]

    def run_shape(self, shape: Shape) -> list:
        cases = self.cases()
        rows = [Row(shape, name, c.name, c.dtype, c.layout) for c, name in cases]
        try:  # once per shape: a shape of the user's file that no convolution has
            _problem.make_problem(shape.x_shape, shape.w_shape, stride=shape.stride, padding=shape.pad,
                                  dilation=shape.dilation, groups=shape.groups)
        except ConvError as exc:
            for row in rows:
                row.status, row.message = "invalid shape", str(exc)
            return rows
        groups = OrderedDict()  # (on device, dtype, layout) -> [(row, plan)]: one operand set each
        for row, (comparison, name) in zip(rows, cases):
            try:
                plan = self._plan(shape, comparison, name)  # tunes auto on a new problem
            except (ConvError, ConvRuntimeError) as exc:
                row.status, row.message = _failure(exc)
                continue
            row.resolved, row.config = plan.variant, plan.config
            row.unit = roofline.unit_of(plan.variant, self.overrides)
            groups.setdefault((plan.on_device, row.dtype, row.layout), []).append((row, plan))
        device_sets = {}
        for (on_device, dtype, layout), group in groups.items():
            sets = self._operands(shape, on_device, dtype, layout, [row for row, _ in group])
            if sets is not None:
                self._time_group(shape, group, sets)
                if on_device:
                    device_sets[dtype, layout] = sets
        self._add_cudnn(shape, rows, device_sets)
        device_sets.clear()
        self.cudnn.release()
        if self.gpu_ceilings is not None:
            device.empty_cache()  # plans' workspaces, DeviceArray sets: back to the driver
        return rows

    @staticmethod
    def _plan(shape: Shape, comparison: Comparison, name: str) -> api.Conv2dPlan:
        return api.Conv2dPlan(shape.x_shape, shape.w_shape, shape.stride, shape.pad, shape.dilation, shape.groups,
                              variant=name, precision=comparison.precision, dtype=comparison.dtype,
                              layout=comparison.layout, w_layout=comparison.w_layout)

    def _ceilings(self, on_device: bool) -> Ceilings:
        return self.gpu_ceilings if on_device else self.cpu_ceilings()

    def _operands(self, shape: Shape, on_device: bool, dtype: str, layout: str, rows) -> operands.OperandSets | None:
        """Sets for one side, or None with every row of that side marked with why."""
        ceil = self._ceilings(on_device)
        n = operands.set_count(shape, ceil.cache_bytes, operands.free_bytes(on_device), dtype)
        try:
            return operands.OperandSets(shape, n, on_device, ceil.cache_bytes, dtype=dtype, layout=layout,
                                        torch=self.torch)
        except ConvError as exc:  # bf16 on the host, or operands only PyTorch can hold: a limit of this machine
            status, message = _limit(exc)
        except ConvRuntimeError as exc:
            status, message = _failure(exc)
        except Exception as exc:  # noqa: BLE001 - PyTorch's allocation failures
            status, message = "error", f"{type(exc).__name__}: {exc}".splitlines()[0]
        for row in rows:
            row.status, row.message = status, message if status == "unavailable" else \
                f"allocating {n} operand sets: {message}"
        return None

    def _time_group(self, shape: Shape, group, sets: operands.OperandSets) -> None:
        ceil = self._ceilings(sets.on_device)
        if sets.on_device:
            device.synchronize()  # plans' workspaces were allocated on the legacy stream
        for row, plan in group:
            row.n_sets, row.cache_resident = sets.n, sets.cache_resident
            try:
                row.timer, side = our_side(shape, plan, sets)
                t = timing.measure(side, self.budget_ms)
                if self.hot:
                    row.hot_ms = t.median_ms if sets.n == 1 else \
                        timing.measure(our_side(shape, plan, sets.first())[1], self.budget_ms).median_ms
            except ConvError as exc:
                row.status, row.message = _limit(exc)
                continue
            except ConvRuntimeError as exc:
                row.status, row.message = _failure(exc)
                continue
            except Exception as exc:  # noqa: BLE001 - a torch failure around our launches is the row's error
                row.status, row.message = "error", f"{type(exc).__name__}: {exc}".splitlines()[0]
                continue
            row.median_ms, row.min_ms, row.max_ms, row.calls, row.reps = (t.median_ms, t.min_ms, t.max_ms,
                                                                         t.calls, t.reps)
            row.stats = roofline.summary(shape, row.unit, ceil, t.median_ms, row.dtype)

    def _cudnn_precision(self, row: Row) -> str:
        by_compare = {c.name: c.cudnn for c in self.comparisons}
        return by_compare.get(row.compare) or cudnn_side.PRECISION_OF_UNIT[row.unit]

    def _cudnn_time(self, shape: Shape, sets, precision: str) -> tuple:
        """(cold medians of two runs, hot median or None, why not): cold, hot (with self.hot), cold again,
        so that a change between the runs shows (UNSTABLE)."""
        if not self.cudnn.available:
            return (), None, self.cudnn.reason
        if sets is None:
            return (), None, "no GPU operands for this shape"

        def median(on) -> float:
            return timing.measure(self.cudnn.run_for(shape, on, precision), self.budget_ms).median_ms
        try:
            first = median(sets)
            hot = None if not self.hot else first if sets.n == 1 else median(sets.first())
            return (first, median(sets)), hot, ""
        except Exception as exc:  # noqa: BLE001 - any torch failure becomes the rows' note
            return (), None, f"cuDNN failed: {type(exc).__name__}: {exc}".splitlines()[0]

    def _add_cudnn(self, shape: Shape, rows, device_sets: dict) -> None:
        """cuDNN at each (operands, precision) some row needs, once per shape, beside every row with a
        unit, on the GPU sets of that row's dtype and layout. Rows run on the host get it too on a GPU
        machine: sets are then made for cuDNN alone."""
        results = {}
        for row in rows:
            if not row.unit:
                continue
            row.cudnn_precision = self._cudnn_precision(row)
            key = (row.dtype, row.layout, row.cudnn_precision)
            if key not in results:
                sets = device_sets.get(key[:2])
                if sets is None and self.gpu_ceilings is not None and self.cudnn.available:
                    sets = device_sets[key[:2]] = self._operands(shape, True, row.dtype, row.layout, [])
                results[key] = self._cudnn_time(shape, sets, row.cudnn_precision)
            row.cudnn_runs, row.cudnn_hot_ms, row.cudnn_note = results[key]
            row.cudnn_ms = min(row.cudnn_runs) if row.cudnn_runs else None
            if row.cudnn_ms is not None:
                row.cudnn_stats = roofline.summary(shape, cudnn_side.UNIT_OF_PRECISION[row.cudnn_precision],
                                                   self.gpu_ceilings, row.cudnn_ms, row.dtype)
