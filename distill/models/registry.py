"""The student registry: one decorator makes a student class buildable, loadable and a `--model` choice::

    @register_student("bag", task="classification")
    class BagOfEmbeddings(StudentModel):  # or any LabelModel whose kind is "student"
        config_class = BagConfig
        ...

Everything that needs the list of students reads it here: `build_student`, loading a saved
student, the CLI's `--model` choices and its architecture options (derived from each class's
`config_class` fields). Students outside the package arrive three ways: imported (the decorator
runs), named as ``module:Class`` (imported on demand), or announced by an installed package
under the ``distill.students`` entry-point group (loaded the first time the registry is read).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Callable, TypeVar

from distill.errors import DistillError
from distill.registry import Registry

TASKS = ("classification", "tagging")
ENTRY_POINT_GROUP = "distill.students"
BUILT_IN = ("distill.models.students", "distill.models.ngram", "distill.models.static",
            "distill.models.transformer_student")

Model = TypeVar("Model", bound=type)


@dataclass(frozen=True)
class StudentEntry:
    """A registered student: its name, class and task."""

    name: str
    cls: type
    task: str

    @property
    def source(self) -> str:
        """Where the class lives, as ``module:Class`` (recorded in saved models so they load anywhere)."""
        return f"{self.cls.__module__}:{self.cls.__qualname__}"


_STUDENTS: Registry[StudentEntry] = Registry("student")
_plugins_loaded = False


def register_student(name: str, task: str) -> Callable[[Model], Model]:
    """Class decorator: register a student class (a `StudentModel`, or any `LabelModel` whose kind is
    "student" and whose `config_class` is a `StudentConfig`) as student `name` for `task`."""
    if task not in TASKS:
        raise DistillError(f"student {name!r}: unknown task {task!r}: choose one of {', '.join(TASKS)}")
    if not name or ":" in name:
        raise DistillError(f"student name {name!r}: use a non-empty name without ':'")

    def decorate(cls: Model) -> Model:
        from distill.models.base import LabelModel
        from distill.models.protocol import check_student_class
        from distill.models.student_config import StudentConfig
        if not (isinstance(cls, type) and issubclass(cls, LabelModel) and cls.kind == "student"):
            raise DistillError(f"student {name!r}: {cls!r} is not a student model (a StudentModel, or a "
                               "LabelModel with kind 'student')")
        config_class = getattr(cls, "config_class", None)
        if not (isinstance(config_class, type) and issubclass(config_class, StudentConfig)):
            raise DistillError(f"student {name!r}: config_class must be a StudentConfig subclass")
        if cls.__module__ not in BUILT_IN:  # a built-in student registered later (lazily) must not find its name gone
            _import_built_in()
        taken = _STUDENTS.get(name)
        if taken is not None and taken.source != StudentEntry(name, cls, task).source:
            raise DistillError(f"student name {name!r} is already registered by {taken.source}")
        check_student_class(cls, name)  # what the registry builds, trains, saves and loads it by
        cls.task = task
        cls.registered_name = name
        _STUDENTS.add(name, StudentEntry(name, cls, task))
        return cls
    return decorate


def load_plugins() -> None:
    """Import the built-in students and every installed ``distill.students`` entry point, once."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    _import_built_in()
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            point.load()
        except Exception as err:  # a broken plugin must not take the built-in students down
            logging.getLogger("distill").warning("student plugin %r (%s) skipped: it failed to load: %s",
                                                 point.name, point.value, err)


def _import_built_in() -> None:
    """Import the modules of the built-in students (each registers its own as it is imported)."""
    for module in BUILT_IN:
        importlib.import_module(module)


def students() -> dict[str, StudentEntry]:
    """Every registered student by name: the built-in ones in `BUILT_IN`'s order of modules (whichever was
    imported first), then the others as they registered, so listings read the same in every process."""
    load_plugins()
    rank = {module: index for index, module in enumerate(BUILT_IN)}
    ordered = sorted(_STUDENTS.values(), key=lambda entry: rank.get(entry.cls.__module__, len(BUILT_IN)))
    return {entry.name: entry for entry in ordered}


def student_entry(name: str) -> StudentEntry:
    """The student registered as `name`, or the class at ``module:Class`` (imported and registered)."""
    registered = students()
    if name in registered:
        return registered[name]
    if ":" not in name:
        raise DistillError(f"unknown student model {name!r}: choose one of {', '.join(registered)} "
                           "or give a class as module:Class")
    module_name, _, class_name = name.partition(":")
    try:
        cls = getattr(_import_from_here(module_name), class_name)
    except (ImportError, AttributeError) as err:
        raise DistillError(f"student model {name!r}: cannot import it ({err})") from None
    except Exception as err:  # the module's own code failed as it ran: the user's to fix, not a crash of ours
        raise DistillError(f"student model {name!r}: cannot import it ({type(err).__name__}: {err})") from None
    for entry in _STUDENTS.values():
        if entry.cls is cls:
            return entry
    if getattr(cls, "registered_name", None) and isinstance(cls, type) and "registered_name" in vars(cls):
        register_student(cls.registered_name, cls.task)(cls)  # decorated once; its entry since dropped
        return _STUDENTS[cls.registered_name]
    raise DistillError(f"student model {name!r} is not registered: decorate the class with "
                       "@register_student(NAME, task=...)")


def _import_from_here(module_name: str):
    """Import a module from the installed packages or, as ``python -m`` would, the current folder."""
    here = os.getcwd()
    if here in sys.path:
        return importlib.import_module(module_name)
    sys.path.append(here)
    try:
        return importlib.import_module(module_name)
    finally:
        sys.path.remove(here)


def entry_of_saved(model: str, source: str | None) -> StudentEntry:
    """The student a saved card names: by registered name, by the recorded ``module:Class``, or (cards
    written before the registry) by class name."""
    registered = students()
    if model in registered and (source is None or registered[model].source == source):
        return registered[model]
    if source is not None:
        return student_entry(source)
    by_class = {entry.cls.__name__: entry for entry in registered.values()}
    if model in by_class:
        return by_class[model]
    raise DistillError(f"unknown student model {model!r}: choose one of {', '.join(registered)}")


def student_config(name: str, **settings):
    """The config of student `name` (registered name or ``module:Class``) with `settings` changed from
    its defaults; a setting that student does not have is an error, never ignored."""
    from dataclasses import fields
    entry = student_entry(name)
    known = {f.name for f in fields(entry.cls.config_class)} - {"model"}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise DistillError(f"student {entry.name!r} has no setting(s) {', '.join(unknown)} "
                           f"(its settings: {', '.join(sorted(known))})")
    return entry.cls.config_class(model=entry.name, **settings)
