"""Old spellings of the Python API, which keep working for one release with a `DeprecationWarning`.

The API speaks the CLI's words: ``unlabeled`` (``--unlabeled``, ``unlabeled_ratio``), and ``settings`` for
a run's training settings whatever the entry point (`TrainSettings`, or `TeacherTraining` for a teacher).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable, TypeVar

from distill.errors import DistillError

F = TypeVar("F", bound=Callable[..., Any])


def _shown(function: Callable) -> str:
    """A function as its caller writes it: ``Distiller`` for its constructor."""
    owner, _, name = function.__qualname__.rpartition(".")
    return owner if name == "__init__" else function.__qualname__


def warn_renamed(old: str, new: str, where: str, depth: int) -> None:
    """Warn the caller `depth` frames up of an old name."""
    warnings.warn(f"{where}: {old} is deprecated, use {new} (the old name goes in the next release)",
                  DeprecationWarning, stacklevel=depth + 1)


def renamed_arguments(**new_names: str) -> Callable[[F], F]:
    """Let keyword arguments renamed to `new_names[old]` still be given by their old names, with a warning;
    both names at once are refused."""
    def decorate(function: F) -> F:
        parameters = list(inspect.signature(function).parameters)

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            for old, new in new_names.items():
                if old not in kwargs:
                    continue
                if new in kwargs or new in parameters[:len(args)]:
                    raise DistillError(f"{_shown(function)}: {old}= is the old name of {new}=: give {new}= alone")
                warn_renamed(f"{old}=", f"{new}=", _shown(function), 2)
                kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)
        return wrapper  # type: ignore[return-value]
    return decorate


def renamed_module_names(module: str, renamed: dict[str, str]) -> Callable[[str], Any]:
    """A module's `__getattr__` under which its renamed functions (`renamed`: old -> new) still resolve by their
    old names, with a warning (as `renamed_arguments` does for keyword arguments)."""
    def getattr_(name: str) -> Any:
        if name not in renamed:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        import sys
        warn_renamed(name, renamed[name], module, 2)
        return getattr(sys.modules[module], renamed[name])
    return getattr_


class RenamedKeys(dict):
    """A result's dict whose renamed keys still read by their old names (`renamed`: old -> new), with a
    warning; it holds, and a JSON dump of it writes, the new names only."""

    def __init__(self, data: dict, renamed: dict[str, str]):
        super().__init__(data)
        self.renamed = renamed

    def _key(self, key: Any) -> Any:
        if key in self.renamed and not super().__contains__(key):
            warn_renamed(f"[{key!r}]", f"[{self.renamed[key]!r}]", "summary", 3)
            return self.renamed[key]
        return key

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(self._key(key))

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(self._key(key), default)
