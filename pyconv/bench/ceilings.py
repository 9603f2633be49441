"""What the machine can do, measured where the benchmark runs — never datasheet constants.

GPU: libconv's conv_measure_ceilings (conv_bench.h, cuda/bench/ceilings.cu): a device-to-device copy and FMA /
tensor-core loops on every SM. CPU (for the `cpu` variant): NumPy on this machine, a large copy and a
large float32 matrix product (the CPU has no microkernel of ours; its BLAS is the best FP32 rate at
hand). Each is the best of several runs: a ceiling is what the unit can do.
"""
from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass

import numpy as np

from .._lib import check, ffi, lib

UNITS = ("fp32", "fp16", "fp16_tensor", "tf32_tensor")
UNIT_NAMES = {"fp32": "FP32 FMA", "fp16": "fp16 half2 FMA", "fp16_tensor": "fp16 tensor cores (wmma)",
              "tf32_tensor": "tf32 tensor cores (wmma)"}
CPU_COPY_BYTES = 256 << 20   # far past any CPU cache
CPU_GEMM_N = 2048            # 17 GFLOP: long enough to time, short enough for CI
CPU_REPS = 3
CPU_CACHE_FALLBACK = 32 << 20


@dataclass(frozen=True)
class Ceilings:
    where: str               # "gpu" or "cpu"
    device: str
    copy_gbytes_per_s: float  # (bytes read + bytes written) / s
    gflops: dict             # unit -> GFLOP/s (an FMA is 2 flops); units this machine lacks are absent
    cache_bytes: int         # the last-level cache operand rotation must defeat (L2 on a GPU)

    def rate(self, unit: str) -> float:
        return self.gflops.get(unit, 0.0)

    def as_dict(self) -> dict:
        return {"where": self.where, "device": self.device, "copy_gbytes_per_s": self.copy_gbytes_per_s,
                "gflops": dict(self.gflops), "cache_bytes": self.cache_bytes}

    def describe(self) -> str:
        rates = "; ".join(f"{UNIT_NAMES[u]} {self.gflops[u]:,.0f} GFLOP/s" for u in UNITS if self.gflops.get(u))
        cache = "L2" if self.where == "gpu" else "last-level cache"
        return (f"copy {self.copy_gbytes_per_s:,.0f} GB/s (read + write); {rates}; "
                f"{cache} {self.cache_bytes / 2**20:.0f} MiB")


def measure_gpu(device_name: str) -> Ceilings:
    c = ffi().new("conv_ceilings*")
    check(lib().conv_measure_ceilings(c))
    rates = {"fp32": c.fp32_gflops, "fp16": c.fp16_gflops, "fp16_tensor": c.fp16_tensor_gflops,
             "tf32_tensor": c.tf32_tensor_gflops}
    return Ceilings("gpu", device_name, c.copy_gbytes_per_s, {u: r for u, r in rates.items() if r > 0},
                    int(c.l2_cache_bytes))


def _best_seconds(fn, reps: int) -> float:
    fn()  # warm-up: page faults, thread pools
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _cpu_cache_bytes() -> int:
    try:
        size = os.sysconf("SC_LEVEL3_CACHE_SIZE")
    except (ValueError, OSError, AttributeError):
        size = 0
    return size if size and size > 0 else CPU_CACHE_FALLBACK


def measure_cpu() -> Ceilings:
    rng = np.random.default_rng()
    src = rng.random(CPU_COPY_BYTES // 4, dtype=np.float32)
    dst = np.empty_like(src)
    copy_s = _best_seconds(lambda: np.copyto(dst, src), CPU_REPS)
    a = rng.random((CPU_GEMM_N, CPU_GEMM_N), dtype=np.float32)
    b = rng.random((CPU_GEMM_N, CPU_GEMM_N), dtype=np.float32)
    out = np.empty_like(a)
    gemm_s = _best_seconds(lambda: np.matmul(a, b, out=out), CPU_REPS)
    name = platform.processor() or platform.machine()
    return Ceilings("cpu", f"{name}, {os.cpu_count()} threads", 2 * src.nbytes / copy_s / 1e9,
                    {"fp32": 2 * CPU_GEMM_N ** 3 / gemm_s / 1e9}, _cpu_cache_bytes())
