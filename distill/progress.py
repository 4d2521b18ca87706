"""Progress bars: redrawn in place on a terminal, periodic plain lines in a log file or pipe.

A bar redraws itself with carriage returns; written to a file, that is one long line of noise.
When stderr is not a terminal (and not a notebook, which draws its own widget), each refresh
becomes one line, at most every `PLAIN_INTERVAL` seconds.
"""

from __future__ import annotations

import contextlib
import sys
from contextvars import ContextVar
from typing import Any, Iterator, TextIO

from tqdm.auto import tqdm as auto_tqdm
from tqdm.std import tqdm as plain_tqdm

PLAIN_INTERVAL = 30.0
# off inside a --quiet run (`bars_shown`): a bar deep in a model's set-up need not be told
_SHOWN: ContextVar[bool] = ContextVar("progress_bars_shown", default=True)


class _Lines:
    """A stream that turns each in-place redraw of a bar into one plain line."""

    def __init__(self, stream: TextIO):
        self.stream, self.last = stream, ""

    def write(self, text: str) -> None:
        line = text.replace("\r", "").rstrip()
        if line and line != self.last:  # closing a bar redraws its last state
            self.stream.write(line + "\n")
            self.last = line

    def flush(self) -> None:
        self.stream.flush()


class _PlainBar(plain_tqdm):
    """A bar that draws only when it advances, at most every `mininterval` seconds. No monitor thread:
    its forced redraws do not restart the interval, so they came in pairs with the next update's."""

    monitor_interval = 0


@contextlib.contextmanager
def bars_shown(shown: bool) -> Iterator[None]:
    """Within, every `progress_bar` is drawn only if `shown` (a run's ``--quiet`` reaches them all)."""
    token = _SHOWN.set(shown)
    try:
        yield
    finally:
        _SHOWN.reset(token)


def progress_bar(**options: Any):
    """A tqdm bar (same arguments) that writes plain periodic lines when stderr is not a terminal; drawn
    nowhere within `bars_shown(False)`."""
    if not _SHOWN.get():
        options["disable"] = True
    stream = sys.stderr
    if getattr(stream, "isatty", lambda: False)() or "ipykernel" in sys.modules:
        return auto_tqdm(**options)
    return _PlainBar(**options, file=_Lines(stream), mininterval=PLAIN_INTERVAL, ascii=True)


def progress_message(text: str) -> None:
    """A line between bars (an epoch's result), printed without breaking a bar being drawn."""
    auto_tqdm.write(text)
