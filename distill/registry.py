"""One registry pattern for everything a user can add by name: students, kd losses, augmenters, reporters.

A `Registry` is a dict of name -> entry that knows what it holds, so a missing name is one line naming the
choices, and a name is checked once, the same way, whatever registers it.
"""

from __future__ import annotations

from typing import Callable, Generic, Iterable, TypeVar

from distill.errors import DistillError

Entry = TypeVar("Entry")


class Registry(dict, Generic[Entry]):
    """Named entries of one `kind` ("kd loss", "augmenter"): `add` puts one in, `entry` finds one or says which
    there are. Still a dict, so listing (``list(registry)``) and membership read as they always did."""

    def __init__(self, kind: str, entries: Iterable[tuple[str, Entry]] = ()):
        super().__init__(entries)
        self.kind = kind

    def add(self, name: str, entry: Entry) -> Entry:
        """Register `entry` as `name` (a later one of the same name replaces it); an empty name is refused."""
        if not isinstance(name, str) or not name:
            raise DistillError(f"{self.kind} name {name!r}: use a non-empty name")
        self[name] = entry
        return entry

    def decorator(self, name: str, wrap: Callable[[Callable], Entry] | None = None) -> Callable[[Callable], Callable]:
        """A decorator that registers the function it decorates as `name` (as `wrap(function)` where given) and
        returns the function unchanged."""
        def decorate(function: Callable) -> Callable:
            self.add(name, wrap(function) if wrap else function)
            return function
        return decorate

    def entry(self, name: str) -> Entry:
        """The entry registered as `name`, or one line naming the choices."""
        if name not in self:
            raise DistillError(f"unknown {self.kind} {name!r}: choose one of {', '.join(self)}")
        return self[name]

    def copy(self) -> "Registry[Entry]":
        """A registry of the same kind and entries (a test that registers its own leaves the real one as it was)."""
        return Registry(self.kind, self.items())
