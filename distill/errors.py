"""User-facing errors: the CLI prints them as one line and exits with status 2.

A message that tells what to change names the setting as its reader knows it: `option` gives
``--overwrite`` while the command line runs (`on_command_line`) and ``overwrite=True`` to a Python
caller, from one check for both.
"""

import contextlib
import errno
import importlib
import importlib.util
import math
import signal
import sys
from types import ModuleType
from typing import Callable, Iterator, NoReturn

_command_line = False  # a module flag, not a context variable: threads the CLI starts see it too


@contextlib.contextmanager
def on_command_line() -> Iterator[None]:
    """While `nlp-train` runs a command: messages name its options (`option`)."""
    global _command_line
    before, _command_line = _command_line, True
    try:
        yield
    finally:
        _command_line = before


def option(cli: str, api: str) -> str:
    """A setting as the caller knows it: `cli` (``--overwrite``) under `on_command_line`, else `api`
    (``overwrite=True``, ``DataOptions(separator=None)``)."""
    return cli if _command_line else api


def random_embeddings() -> str:
    """How to start a student's word embeddings at random instead of from a teacher's, in each command's terms
    (kd starts from its teacher's unless told; student only when given a teacher)."""
    return option("--random-embeddings (kd), or no --embeddings-from-teacher (student)",
                  "teacher_embeddings=False (Distiller) or no teacher_embeddings (train_student)")


class DistillError(Exception):
    """An error caused by the user's input or options, not by a bug."""


class ResumeRefused(DistillError):
    """An interrupted run's saved state that this run cannot continue exactly (other settings or data, or its best
    epoch's model damaged): the user's run stops; a run the library owns (a search trial) may start over."""


class DataError(DistillError):
    """Bad input data; the message names the file and, where known, the line."""

    def __init__(self, path: str, message: str, line: int | None = None):
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


class OtherTaskData(DataError):
    """Data of the other task's shape (tagging data where texts are classified, or the reverse): not wrong in
    itself, so a command of models of both tasks (compare) blames the model that cannot read it."""


def os_error_message(err: OSError) -> str:
    """A failed read or write as one line: the file and what the system said of it (a full disk, where the
    system names no file, is said to be the output's)."""
    where = f"{err.filename}: " if err.filename else "writing the output: " if err.errno == errno.ENOSPC else ""
    return f"{where}{err.strerror or err}"


class Terminated(BaseException):
    """SIGTERM (`kill`, `timeout`, a job scheduler, torchrun stopping its workers), raised where the
    process is, so a run cleans up as after Ctrl-C: what it made is removed, or kept with its resume
    state, and a model that --overwrite moved aside is put back."""


def raise_terminated(signum, frame) -> None:
    """The SIGTERM handler of `nlp-train` and the scripts. The first SIGTERM stops the run; a repeated one (a
    scheduler's, `timeout`'s) is ignored, so it cannot cut into the clean-up that the first one started (putting
    an overwritten model back)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


def run_script(main: Callable[[], object]) -> NoReturn:
    """The entry point of a script in ``scripts/``: as with `nlp-train`, a user's mistake (a `DistillError`, a
    file that cannot be read or written) is one line on stderr and exit status 2, Ctrl-C is exit status 130 and
    SIGTERM 143, each after the clean-up an interrupted run does, never a traceback. `main`'s return value is the
    exit status when it is an int (else 0). Standard library alone, so a script's side run in another environment
    (model2vec's) can use it too."""
    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        with on_command_line():  # a script is a command line: its messages name options (--overwrite), as nlp-train's
            status = main()
    except (DistillError, OSError) as err:
        print(f"error: {os_error_message(err) if isinstance(err, OSError) else err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except Terminated:
        print("terminated", file=sys.stderr)
        sys.exit(128 + signal.SIGTERM)
    sys.exit(status if isinstance(status, int) and not isinstance(status, bool) else 0)


def import_extra(module: str, user: str, extra: str, imports: str | None = None) -> ModuleType:
    """`module` (a package of an optional extra) imported, or one line: `user` (what needs it) needs the package,
    and `extra` says how to install it. A package that is there but does not import (a dependency missing or of
    another version, a broken install) is named so, with its import's error: finding it installed, then
    importing it, was a traceback. `imports`: the module `user` imports of it, where that is another than the
    package (torch's writer of TensorBoard events), imported here too and returned."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # an entry of sys.modules that is None or has no spec: not importable
        found = False
    if not found:
        raise DistillError(f"{user} needs the {module} package: {extra}")
    try:
        imported = importlib.import_module(module)
        return importlib.import_module(imports) if imports else imported
    except ImportError as err:
        reason = " ".join(f"{type(err).__name__}: {err}".split())[:200]
        raise DistillError(f"{user} needs the {module} package: {extra} ({module} is installed, but its import "
                           f"fails: {reason})") from None


def require_whole(name: str, value, low: int = 1, high: int | None = None, optional: bool = False) -> None:
    """A setting that counts something (epochs, a batch size, a seed): a whole number within bounds, so
    `epochs=0` or `batch_size=-1` is refused rather than returning an untrained model as a success."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bounds = f"from {low} to {high}" if high is not None else f">= {low}"
        raise DistillError(f"{name} must be a whole number {bounds}, got {value!r}")


def require_flag(name: str, value) -> None:
    """An on/off setting: True or False only. A string from a config file or the environment ("no",
    "false") is truthy, and `overwrite="no"` would replace a model."""
    if not isinstance(value, bool):
        raise DistillError(f"{name} must be True or False, got {value!r}")


def require_type(name: str, value, kind: type, example: str) -> None:
    """An argument that must be one of distill's settings objects, refused by name rather than failing
    deep inside on a missing attribute (`output="runs/x"` for an `Output`)."""
    if not isinstance(value, kind):
        raise DistillError(f"{name} must be of type {kind.__name__}, e.g. {example}; got {type(value).__name__} "
                           f"{value!r:.40}")


def require_number(name: str, value, low: float, high: float, low_open: bool = False,
                   optional: bool = False) -> None:
    """A real-valued setting (a learning rate, a fraction) within [low, high] (low excluded if `low_open`), and
    finite, as the command line's options take it: an infinite budget or temperature is no setting."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not (low < value if low_open else low <= value) or value > high:
        bracket = "(" if low_open else "["
        raise DistillError(f"{name} must be a number in {bracket}{low}, {high}{')' if high == math.inf else ']'}, "
                           f"got {value!r}")
