"""The results of `python -m pyconv lenet --json FILE`: what the tables show, as JSON, for
bench/results/ and the README's table."""
from __future__ import annotations

import datetime
import json
import platform

from .. import _lib
from ..bench.files import atomic_write


def rates_record(rates) -> dict:
    return {"ceilings": rates.ceilings.as_dict(), "h2d_gbytes_per_s": rates.h2d_gbytes_per_s,
            "d2h_gbytes_per_s": rates.d2h_gbytes_per_s}


def host_record(result, labels) -> dict:
    return {"stage_ms": result.stage_ms, "end_to_end_ms": result.median_ms, "accuracy": result.accuracy(labels)}


def gpu_record(summary: dict, labels) -> dict:
    result, batch = summary["result"], summary["batch"]
    record = {"mode": summary["mode"].label, "variants": result.variants, "stages": summary["stages"],
              "end_to_end_ms": {"median": result.median_ms, "runs": result.end_to_end_ms},
              "images_per_s_one_batch": batch / result.median_ms * 1e3, "accuracy": result.accuracy(labels)}
    if result.streamed_ms:
        record["streamed"] = {"images": summary["images"], "what": summary["images_label"], "lanes": summary["lanes"],
                              "median_ms": result.median_ms_streamed, "runs_ms": result.streamed_ms,
                              "images_per_s": summary["images"] / result.median_ms_streamed * 1e3}
    record["torch"] = [{"config": t.config, "median_ms": t.median_ms, "runs_ms": t.runs_ms,
                        "speedup": t.median_ms / result.median_ms,
                        "agreement": float((t.classes == result.classes[:batch]).mean())} for t in summary["torch"]]
    record["torch_version"] = summary["torch_version"]
    record["torch_note"] = summary["torch_note"]
    return record


def write(path, record: dict) -> None:
    f, l = _lib.ffi(), _lib.lib()
    record = dict(record, pyconv=f.string(l.conv_version()).decode(), python=platform.python_version(),
                  date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    atomic_write(path, json.dumps(record, indent=1, default=float) + "\n")  # a failed write keeps the old file
