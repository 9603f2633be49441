"""Benchmarks that tell the truth: `python -m pyconv bench`.

Median op time per shape and variant (CUDA-graph replay, operands rotated past L2), GFLOP/s, GB/s,
and the shape's floor from ceilings measured on the machine it runs on; cuDNN (through PyTorch,
when it is importable) timed the same way on the same operands beside every row. Modules, one job
each: shapes (suites and CSV shapes), comparisons (exact / fast / fp16 / bf16: our settings and
cuDNN's precision), ceilings (measured rates), roofline (flops, bytes, floor, units), operands
(rotated input sets), timing (the measuring protocol), cudnn (the PyTorch side), runner (one row per
shape, comparison and variant), summary (who wins where: geometric means, wins, % of floor), report
(table, JSON, CSV, markdown), files (writing them), plot (matplotlib).
"""
