"""One shape at a time: which variants run it (and, for the others, the library's reason), their op
times, cuDNN's at the matching precision, and one Row per variant."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .. import api, device
from .._lib import ConvError, ConvRuntimeError, error_for, ffi, lib
from . import cudnn as cudnn_side
from . import operands, roofline, timing
from .ceilings import Ceilings
from .shapes import Shape


@dataclass
class Row:
    shape: Shape
    variant: str
    status: str = "ok"        # ok | unsupported | unavailable | error | invalid shape | not run
    message: str = ""         # why, when not ok (the library's message)
    resolved: str = ""        # the concrete variant (differs for auto / auto_fast)
    unit: str = ""
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    calls: int | None = None  # calls per timed round (graph)
    reps: int | None = None
    n_sets: int | None = None
    cache_resident: bool = False
    stats: dict = field(default_factory=dict)   # roofline.summary of median_ms
    cudnn_precision: str = ""
    cudnn_ms: float | None = None
    cudnn_note: str = ""      # why there is no cuDNN time

    @property
    def ratio_vs_cudnn(self) -> float | None:
        if self.median_ms is None or not self.cudnn_ms:
            return None
        return self.median_ms / self.cudnn_ms

    def as_dict(self) -> dict:
        d = self.shape.as_dict()
        d.update({k: v for k, v in asdict(self).items() if k not in ("shape", "stats")})
        for key in ("unit", "gflops", "gbytes_per_s", "floor_ms", "floor_bound", "pct_of_floor"):
            d[key] = self.stats.get(key, d.get(key))
        d["ratio_vs_cudnn"] = self.ratio_vs_cudnn
        return d


_ROW_STATUS = {"CONV_ERR_UNSUPPORTED": "unsupported", "CONV_ERR_TOO_LARGE": "unsupported",
               "CONV_ERR_NO_DEVICE": "unavailable", "CONV_ERR_NO_CUDA_BUILD": "unavailable"}


def _failure(exc: Exception) -> tuple:
    """(row status, message) of a library exception: the library's own message, and "error" for
    anything but a shape or a machine the variant cannot run (which the CLI's exit status reports)."""
    status = getattr(exc, "status", None)
    name = ffi().string(lib().conv_status_string(status)).decode() if isinstance(status, int) else ""
    return _ROW_STATUS.get(name, "error"), getattr(exc, "message", "") or str(exc)


class Runner:
    def __init__(self, variants, budget_ms: float, cudnn: cudnn_side.Cudnn, overrides: dict,
                 gpu_ceilings: Ceilings | None, cpu_ceilings):
        """variants: names; gpu_ceilings: None without a GPU; cpu_ceilings: a callable measuring them
        on first need (only a run with a host variant pays for it)."""
        self.infos = api.variant_info()
        self.variants = list(variants)
        self.budget_ms = budget_ms
        self.cudnn = cudnn
        self.overrides = overrides
        self.gpu_ceilings = gpu_ceilings
        self._measure_cpu = cpu_ceilings
        self.cpu_measured = None  # the CPU ceilings, once a host row needed them

    def cpu_ceilings(self) -> Ceilings:
        if self.cpu_measured is None:
            self.cpu_measured = self._measure_cpu()
        return self.cpu_measured

    def _resolve(self, name: str, params) -> tuple:
        """(variant id, the concrete variant's info) — or raises the library's reason."""
        vid = api.variant_id(name)
        chosen = ffi().new("int*")
        status = lib().conv2d_auto_choice(vid, params, chosen)
        if status != 0:
            raise error_for(status)
        return vid, self.infos[chosen[0]]

    def run_shape(self, shape: Shape) -> list:
        try:
            params, _ = api.make_params(shape.x_shape, shape.w_shape, shape.stride, shape.pad, shape.dilation)
        except ConvError as exc:  # a shape of the user's file that no convolution has
            return [Row(shape, name, status="invalid shape", message=str(exc)) for name in self.variants]
        rows, runnable = [], []
        for name in self.variants:
            row = Row(shape, name)
            rows.append(row)
            try:
                vid, info = self._resolve(name, params)
            except (ConvError, ConvRuntimeError) as exc:
                row.status, row.message = _failure(exc)
                continue
            row.resolved = info.name
            row.unit = roofline.unit_of(info.name, info.idea, info.on_device, info.exact, self.overrides)
            runnable.append((row, vid, info.on_device))
        device_sets = None
        for on_device in (True, False):
            group = [(row, vid) for row, vid, dev in runnable if dev == on_device]
            if not group:
                continue
            sets = self._operands(shape, on_device, [row for row, _ in group])
            if sets is not None:
                self._time_group(shape, params, group, sets)
                if on_device:
                    device_sets = sets
        self._add_cudnn(shape, rows, device_sets)
        return rows

    def _ceilings(self, on_device: bool) -> Ceilings:
        return self.gpu_ceilings if on_device else self.cpu_ceilings()

    def _operands(self, shape: Shape, on_device: bool, rows) -> operands.OperandSets | None:
        """Sets for one side, or None with every row of that side marked with why."""
        ceil = self._ceilings(on_device)
        n = operands.set_count(shape, ceil.cache_bytes, operands.free_bytes(on_device))
        try:
            return operands.OperandSets(shape, n, on_device, ceil.cache_bytes)
        except (ConvError, ConvRuntimeError) as exc:
            for row in rows:
                row.status, row.message = "error", f"allocating {n} operand sets: {_failure(exc)[1]}"
            return None

    def _time_group(self, shape: Shape, params, group, sets: operands.OperandSets) -> None:
        ceil = self._ceilings(sets.on_device)
        make_run = timing.device_run if sets.on_device else timing.host_run
        for row, vid in group:
            row.n_sets, row.cache_resident = sets.n, sets.cache_resident
            try:
                ws_bytes = ffi().new("size_t*")
                status = lib().conv2d_workspace_size(vid, params, ws_bytes)
                if status != 0:
                    raise error_for(status)
                workspace = None
                if ws_bytes[0]:
                    workspace = (device.DeviceArray((ws_bytes[0],), np.uint8) if sets.on_device
                                 else np.empty(ws_bytes[0], np.uint8))
                t = timing.measure(make_run(vid, params, sets, workspace, ws_bytes[0]), self.budget_ms)
            except (ConvError, ConvRuntimeError) as exc:
                row.status, row.message = _failure(exc)
                continue
            row.median_ms, row.min_ms, row.max_ms, row.calls, row.reps = (t.median_ms, t.min_ms, t.max_ms,
                                                                         t.calls, t.reps)
            row.stats = roofline.summary(shape, row.unit, ceil, t.median_ms)

    def _cudnn_time(self, shape: Shape, sets, precision: str) -> tuple:
        """(median ms or None, why not)."""
        if not self.cudnn.available:
            return None, self.cudnn.reason
        if sets is None:
            return None, "no GPU operands for this shape"
        try:
            return timing.measure(self.cudnn.run_for(shape, sets, precision), self.budget_ms).median_ms, ""
        except Exception as exc:  # noqa: BLE001 - any torch failure becomes the rows' note
            return None, f"cuDNN failed: {type(exc).__name__}: {exc}".splitlines()[0]

    def _add_cudnn(self, shape: Shape, rows, sets) -> None:
        """cuDNN at each precision some row needs, once per shape, beside every row with a unit. Rows
        of the host variant get it too on a GPU machine: the sets are then made for cuDNN alone."""
        wanted = sorted({cudnn_side.PRECISION_OF_UNIT[r.unit] for r in rows if r.unit})
        if wanted and sets is None and self.gpu_ceilings is not None and self.cudnn.available:
            sets = self._operands(shape, True, [])
        results = {precision: self._cudnn_time(shape, sets, precision) for precision in wanted}
        for row in rows:
            if row.unit:
                row.cudnn_precision = cudnn_side.PRECISION_OF_UNIT[row.unit]
                row.cudnn_ms, row.cudnn_note = results[row.cudnn_precision]
        self.cudnn.release()
