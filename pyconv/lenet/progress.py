"""Progress of long steps on stderr, so that stdout keeps only the results.

On a terminal one line is rewritten in place as work advances; otherwise (a log, a pipe) each step
gets a line when it starts and one when it ends, so a log shows where a slow run is.
"""
from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, stream=None, enabled: bool = True):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.live = enabled and self.stream.isatty()
        self.label, self.total, self.started = "", 0, 0.0

    def start(self, label: str, total: int = 0) -> None:
        self.label, self.total, self.started = label, total, time.perf_counter()
        if self.enabled:
            self._write(f"{label} ...", final=not self.live)

    def update(self, done: int) -> None:
        if self.live and self.total:
            self._write(f"{self.label}: {done}/{self.total} images", final=False)

    def finish(self) -> None:
        if self.enabled:
            self._write(f"{self.label}: done in {time.perf_counter() - self.started:.1f} s", final=True)

    def note(self, text: str) -> None:
        if self.enabled:
            self._write(text, final=True)

    def _write(self, text: str, final: bool) -> None:
        if self.live:
            text = "\r\033[K" + text  # back to column 0 and clear the old, longer text
        self.stream.write(text + ("\n" if final else ""))
        self.stream.flush()
