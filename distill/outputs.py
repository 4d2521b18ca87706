"""Where a command writes its results: never over its own inputs or another model, one run at a
time, and nothing half-written left behind when it fails.

Training commands write a model directory; `pseudo-label` and `evaluate` write one file. Before
any work the output is checked against the command's inputs (the same file, a directory that
holds an input or lies inside one, a file of an input model) and against what it already holds:
a model or an interrupted run is replaced only with `--overwrite` (or continued with `--resume`),
a directory of unrelated files or a file that is not this command's earlier output is never
replaced silently. While the command runs it holds an exclusive lock, so a second run writing the
same output is refused rather than interleaved. If the command fails, what it created is removed
and a model it was replacing is put back; an interrupted run that can be resumed is kept.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Callable, Iterable, Iterator

from distill import distributed
from distill.config import CONFIG_SUFFIX, RUN_CONFIG
from distill.errors import DistillError, option
from distill.io import STAGING_PREFIX, check_target, file_sha256, read_json, real_path, what_is, writing
from distill.io import refuse_link as refuse_any_link
from distill.models.card import (LOADED_FILES, MODEL_CARD, RESUME_FILE, SEALED_FOLDERS, model_files,
                                 read_model_card)
from distill.models.readme import README
from distill.runtime import Output
from distill.settings import named

logger = logging.getLogger("distill")
SUMMARY_FILE = "train_summary.json"  # written last: a run whose folder holds it has finished
RUN_MARKERS = (MODEL_CARD, SUMMARY_FILE, "metrics.jsonl")
# The summary's fields that other commands read (export's README card, `distill.provenance`), with their JSON types
SUMMARY_FIELDS = {"sources": dict, "inputs": dict, "example_digests": dict, "best": dict, "settings": dict,
                  "history": list, "teachers": list, "teacher": (str, type(None)), "parameters": int}
# hidden in an output directory while a run writes it, removed once the run ends: a folder that holds it, no model card,
# no resume state and no summary is what a killed run (SIGKILL, the kernel out of memory) left half-written
UNFINISHED = ".unfinished"
TRACKING_FOLDER = "runs"  # --report-to tensorboard's events (`distill.callbacks`): beside the model, not part of it
# what a training run writes; its run_config.yaml (distill.config) is no file of the model's card, as the log is not
RUN_FILES = (*RUN_MARKERS, RESUME_FILE, RUN_CONFIG, *LOADED_FILES, *SEALED_FOLDERS, TRACKING_FOLDER)


def read_summary(folder: str | os.PathLike) -> dict | None:
    """The summary a finished run wrote in `folder` (``train_summary.json``), or None where there is none. The card
    does not cover it, so one that is no JSON object, or whose fields another command reads are of another type
    (`SUMMARY_FIELDS`; the best epoch's dev scores, an ensemble's teachers), is refused here, in one line."""
    path = Path(folder) / SUMMARY_FILE
    if not path.exists() and not path.is_symlink():
        return None
    if not path.is_file():
        shown = "a folder" if path.is_dir() else what_is(path)
        raise DistillError(f"{path}: is {shown}, not the run's summary (a JSON file)")
    summary = read_json(path)
    wrong = None if isinstance(summary, dict) else "it is no JSON object"
    for field, types in SUMMARY_FIELDS.items() if wrong is None else ():
        if field in summary and (not isinstance(summary[field], types) or isinstance(summary[field], bool)):
            wrong = f"its field {field!r} is {json.dumps(summary[field])[:40]}"
            break
    if wrong is None and not isinstance(summary.get("best", {}).get("dev", {}), dict):
        wrong = f"its field 'best.dev' is {json.dumps(summary['best']['dev'])[:40]}"
    if wrong is None and not all(isinstance(one, dict) and isinstance(one.get("weight"), (int, float))
                                 and isinstance(one.get("teacher"), (str, type(None)))
                                 for one in summary.get("teachers", [])):
        wrong = "its field 'teachers' holds no teacher and weight per teacher"
    if wrong is not None:
        raise DistillError(f"{path}: is damaged ({wrong}, not what distill writes there); restore it from a good "
                           "copy, or retrain the model")
    return summary


def check_writable(output: str | os.PathLike, folder: str | os.PathLike | None = None) -> None:
    """Fail before any work if `output` (a file output: its `folder`) cannot be created or written (the nearest
    existing folder decides); the message names `output` as the user gave it."""
    path = Path(output if folder is None else folder).absolute()
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        raise DistillError(f"{output}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise DistillError(f"{output}: not writable ({existing} is read-only for this user)")


def refuse_link(output: str | os.PathLike) -> None:
    """An output that is a symbolic link would be replaced by a folder or file of its own (a run writes
    into a temporary name and renames), leaving the link's target as it was: refuse it, named."""
    refuse_any_link(output, "give the real path")


_read_too: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("read_too", default=())


@contextlib.contextmanager
def reading(*paths: str | os.PathLike | None) -> Iterator[None]:
    """Within it, `paths` are inputs of every output check, beside those the command names: files the command
    read to know what to do (its --config file)."""
    token = _read_too.set((*_read_too.get(), *(str(path) for path in paths if path)))
    try:
        yield
    finally:
        _read_too.reset(token)


def _local(inputs: Iterable[str | os.PathLike | None], own_record: Path | None = None) -> list[str]:
    """The inputs that are paths on this machine (not hub:... specs or data in memory, not unset options), the
    files a language-model teacher's prompt is read from (`prompt_settings`: --prompt, --shots-from), which every
    command that asks one reads as well, and those `reading` names but `own_record`: the output's record of its
    options (a run replayed into its own folder reads it, and writes it again)."""
    from distill.models.prompt import prompt_files
    read_too = [path for path in _read_too.get() if own_record is None or real_path(path) != own_record]
    return [str(item) for item in (*inputs, *prompt_files(), *read_too)
            if item and not str(item).startswith(("hub:", "memory:"))]


def enclosing_model(path: Path) -> Path | None:
    """The nearest folder above `path` that is a model directory (it holds a model card), if any; else the
    nearest that holds a transformers model (a teacher's folder of `save_pretrained`, which has no card)."""
    from distill.models.hub_files import is_transformers_source
    return next((folder for folder in path.parents if (folder / MODEL_CARD).is_file()),
                next((folder for folder in path.parents if is_transformers_source(folder)), None))


def is_model_folder(folder: Path) -> bool:
    """Whether `folder` is a model directory (a model card), or a transformers model's folder."""
    from distill.models.hub_files import is_transformers_source
    return (folder / MODEL_CARD).is_file() or is_transformers_source(folder)


def written_by_distill(folder: str | os.PathLike) -> bool:
    """Whether `folder` is a model directory distill wrote (it holds a model card): the only model folder where a
    command puts a file of its own by default (`evaluate`'s metrics). A folder it did not write (a transformers
    classifier's, perhaps a clone of a Hub repository) is an input, never a place for distill's files."""
    return not str(folder).startswith("hub:") and (Path(folder) / MODEL_CARD).is_file()


def check_directory_output(output: str | os.PathLike, inputs: Iterable[str | os.PathLike | None]) -> None:
    """A model directory must neither be, hold, nor lie inside any input of its command, nor lie
    inside another model's directory."""
    out = real_path(output)
    for item in _local(inputs, own_record=out / RUN_CONFIG):
        source = real_path(item)
        if out == source:
            raise DistillError(f"{output}: is an input of this command; choose another output directory")
        if out in source.parents:
            raise DistillError(f"{output}: holds {item}, an input of this command; choose another output directory")
        if source in out.parents:
            raise DistillError(f"{output}: lies inside {item}, an input of this command; "
                               "choose an output outside it")
    model = enclosing_model(out)
    if model is not None:
        raise DistillError(f"{output}: lies inside the model directory {model}; choose an output outside it")


def check_written_folder(folder: str | os.PathLike, inputs: Iterable[str | os.PathLike | None],
                         output: str | os.PathLike | None = None, within: str | None = None,
                         shown_as: str | None = None) -> None:
    """The output rule for a folder (or file) a command writes into besides its output (TensorBoard's events of
    `--logging-dir`, a search's SQLite study): it is no input and lies in none (a model given as the teacher),
    and it is no model directory and lies in none (a file there changes the model), unless it lies inside the
    command's own `output`, which the command owns: there, in OUTPUT/`within` where given (a training run's
    logs in OUTPUT/runs, which --overwrite knows as the run's; any other name there would be taken for the
    user's). It may hold inputs: nothing there is removed or replaced. `shown_as`: how the error names it, where
    the user gave it otherwise than as a path (MLflow's tracking store, from MLFLOW_TRACKING_URI)."""
    path, shown = real_path(folder), shown_as or str(folder)
    if output is not None and real_path(output) in path.parents:
        own = real_path(output) / within if within is not None else None
        if own is not None and path != own and own not in path.parents:
            raise DistillError(f"{shown}: lies in the output {output}, where a run's logs go in "
                               f"{Path(output) / within} ({_overwrite()} takes any other folder there for yours): "
                               "choose that, or a folder outside the output")
        return
    if output is not None and path == real_path(output):  # its files would sit among the model's
        raise DistillError(f"{shown}: is the output {output} itself; choose a folder inside it (such as "
                           f"{Path(output) / (within or TRACKING_FOLDER)}) or outside it")
    for item in _local(inputs):
        source = real_path(item)
        if path == source or source in path.parents:
            raise DistillError(f"{shown}: lies in {item}, an input of this command; choose a folder outside it")
    model = path if is_model_folder(path) else enclosing_model(path)
    if model is not None:
        raise DistillError(f"{shown}: lies in the model directory {model} (a file there changes the model); "
                           "choose a folder outside it")


def check_file_output(output: str | os.PathLike, inputs: Iterable[str | os.PathLike | None]) -> None:
    """An output file must not be an input file (also through a link), nor a file of any model or one
    a model's loader would read, nor lie in a model's subfolder (the teacher's encoder folder is read
    whole)."""
    out = real_path(output)
    for item in _local(inputs, own_record=out.with_name(out.name + CONFIG_SUFFIX)):
        source = real_path(item)
        if out == source or (out.exists() and source.exists() and os.path.samefile(out, source)):
            raise DistillError(f"{output}: is an input of this command; choose another output file")
        if source.is_dir() and out in source.parents:
            raise DistillError(f"{output}: holds {item}, an input of this command; choose another output")
    model = enclosing_model(out)
    if model is None:
        return
    if out.parent != model:
        raise DistillError(f"{output}: lies in a folder of the model {model} (a file there changes the model); "
                           "write beside the model's own files or elsewhere")
    from distill.models.hub_files import reads_file
    if reads_file(out.name) and _read_by_name(model):  # transformers' loaders read such a file, listed or not
        raise DistillError(f"{output}: is a file of the transformers model {model} (its config, weights or "
                           "tokenizer); choose another output file")
    if not (model / MODEL_CARD).is_file():
        return
    if out in {real_path(f) for f in model_files(model)} or out.name in (*RUN_MARKERS, RESUME_FILE, RUN_CONFIG):
        raise DistillError(f"{output}: is a file of the model {model}; choose another output file")
    if out.name in LOADED_FILES:  # not the model's file yet, but its card would not list it: refused from then on
        raise DistillError(f"{output}: is a name the model's loader reads in {model} (a file there changes the "
                           "model); choose another output file")


def _read_by_name(model: Path) -> bool:
    """Whether transformers' loaders read `model`'s files by name: a transformers model's folder (no card), or a
    distill model saved as one (`export --format transformers`), whose loading refuses any such file its card
    does not list (`distill.models.card.verify_model_files`)."""
    if not (model / MODEL_CARD).is_file():
        return True
    try:
        card = read_model_card(model)
    except DistillError:
        return False  # a damaged card: the model is refused as it is, whatever is written beside it
    return "transformers" in (card.get("format"), card.get("model"))


@contextlib.contextmanager
def _lock(path: Path, output: Path | None = None) -> Iterator[None]:
    """Hold an exclusive lock on `path`: the output directory itself, or (with `output`) a lock file
    made for the output file. The kernel drops it if the process dies, so a killed run never leaves
    a stale lock."""
    create = output is not None
    with writing(path, folder=not create):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666) if create \
            else os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DistillError(f"{output or path}: another nlp-train run is writing it right now; wait for that run "
                               "to end, or choose another output") from None
        yield
    finally:
        os.close(fd)


def _visible(directory: Path) -> list[str]:
    """What a directory holds, leaving out hidden names (temporary files, .gitkeep and the like)."""
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))


def _carry_hidden(source: Path, target: Path) -> None:
    """Move the hidden entries a user keeps in a model folder (`.git` and `.gitattributes` of a model
    repository) from `source` to `target`, where a run with --overwrite writes the new model: what
    distill leaves hidden there (a staging folder, a temporary file) stays behind."""
    for entry in source.iterdir():
        if entry.name.startswith(".") and not _ours_hidden(entry.name) and not (target / entry.name).exists():
            os.replace(entry, target / entry.name)


def _ours_hidden(name: str) -> bool:
    """Whether a hidden name in an output directory is distill's while it writes there: a staging folder, a
    temporary file or folder (an int8 export's fp32 graph), the mark of an unfinished output."""
    return name.startswith(STAGING_PREFIX) or name.endswith((".tmp", ".old")) or name == UNFINISHED


def _written_by_distill(path: Path, listed: set[str]) -> bool:
    """Whether `path`, in a run's folder, is what a run writes there (its files, those its card lists) or an
    `evaluate` result of the model: one that names this folder, or under evaluate's own default name (the
    folder may have been renamed since), whatever its name ends in, as evaluate itself knows its results
    (`distill.evaluation.is_metrics_file`). Anything else may be the user's work, pseudo-label output too (it
    may have been corrected by hand, or be an interrupted run's part to resume): never deleted."""
    if path.name in RUN_FILES or path.name in listed:
        return True
    if not path.is_file():
        return False
    try:
        with open(path, "rb") as handle:
            record = json.loads(handle.read(1 << 20))  # metrics are small: a big file is no result
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    if not (isinstance(record, dict) and {"model", "data", "examples"} <= set(record)):
        return False
    default_name = path.name == "eval_metrics.json" or path.name.startswith("eval_metrics.")
    return default_name or real_path(str(record["model"])) == real_path(path.parent)


def _foreign(directory: Path, names: list[str]) -> list[str]:
    """The entries of a run's folder that no distill command wrote (a user's notes, other models)."""
    recorded: dict = {}
    with contextlib.suppress(DistillError, AttributeError):
        recorded = dict(read_model_card(directory, unfinished=True).get("sha256", {}))
    listed = {name.split("/")[0] for name in recorded}
    readme = directory / README  # the model card for people: distill's as written (its checksum), not as edited
    if README in listed and (not readme.is_file() or file_sha256(readme) != recorded.get(README)):
        listed.discard(README)
    return [name for name in names if not _written_by_distill(directory / name, listed)]


def _overwrite() -> str:
    """The overwrite setting as the caller knows it: --overwrite, or save_pretrained's and Output's overwrite=True."""
    return named(Output, "overwrite", "overwrite=True")


def _resume() -> str:
    return named(Output, "resume", "resume=True")


def _replaceable(directory: Path, names: list[str]) -> bool:
    """--overwrite replaces the whole folder: refused where it holds what no distill command wrote, which
    would go with it."""
    foreign = _foreign(directory, names)
    if foreign:
        raise DistillError(f"{directory}: holds {foreign[0]}, which is none of the model's files (yours, or another "
                           f"command's output); {_overwrite()} replaces the whole folder: move it out, or choose "
                           "another output directory")
    return True


def _continued(directory: Path) -> None:
    """A resumed run writes, appends to and replaces the files it finds in its folder, and keeps those it does
    not write again (a teacher's encoder/ when the best epoch stays): each, down to the files in its folders,
    must be what a run writes there (`distill.io.check_target`: no link, a file or the model's folder),
    checked before any."""
    for name in RUN_FILES:
        check_target(directory / name, folder=name in (*SEALED_FOLDERS, TRACKING_FOLDER))
    for name in SEALED_FOLDERS:  # and what is inside them (a teacher's encoder/), which a run may keep as it is
        for folder, folders, files in os.walk(directory / name):  # links to folders are listed, not followed
            for inner in folders:
                check_target(Path(folder) / inner, folder=True)
            for inner in files:
                check_target(Path(folder) / inner)


def _refuse_unless(directory: Path, overwrite: bool, resume: bool) -> bool:
    """Check what an existing output directory holds; True when its content is to be replaced."""
    names = _visible(directory)
    if not names:
        if resume:
            raise DistillError(f"{directory}: nothing to resume (the folder is empty: no interrupted run was "
                               f"written here); check the path, or run without {_resume()} to start a new run")
        return False
    if RESUME_FILE in names:
        if resume:
            _continued(directory)
            return False
        if overwrite:
            return _replaceable(directory, names)
        raise DistillError(f"{directory}: holds an interrupted run; continue it with {_resume()}, "
                           f"or start over with {_overwrite()}")
    weak = MODEL_CARD not in names and SUMMARY_FILE not in names  # a metrics.jsonl may be anyone's log
    if any(marker in names for marker in RUN_MARKERS) and not (weak and _foreign(directory, names)):
        if resume and SUMMARY_FILE not in names:
            raise DistillError(f"{directory}: holds no resume state ({RESUME_FILE} is missing) and no finished "
                               f"run, so there is nothing to continue; start over with {_overwrite()}")
        if resume:
            raise DistillError(f"{directory}: this run already finished; nothing to resume "
                               f"(use {_overwrite()} instead of {_resume()} to retrain)")
        if overwrite:
            return _replaceable(directory, names)
        what = "a model"
        if MODEL_CARD in names:
            with contextlib.suppress(DistillError):
                card = read_model_card(directory)
                what = f"a {card['kind']} model ({card.get('model', '?')}, {card.get('task', '?')})"
        raise DistillError(f"{directory}: already holds {what}; pass {_overwrite()} to replace it, "
                           "or choose another output directory")
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    raise DistillError(f"{directory}: is not empty and holds no distill model ({shown}); "
                       "choose a new or empty directory")


def remove_empty(folders: list[Path]) -> None:
    """Remove folders made for an output that never came (deepest first; a non-empty one stays)."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _agreed(check: Callable[[], None]) -> None:
    """Run a check on rank 0 and raise its error on every rank, so no rank trains on alone."""
    error = None
    if distributed.is_main():
        try:
            check()
        except DistillError as err:
            error = DistillError(str(err))  # plain, so it crosses to the other ranks as it is
    error = distributed.broadcast_object(error)
    if error is not None:
        raise error


def moved_aside(path: Path) -> Path:
    """Where a run with --overwrite keeps the model it replaces until it has finished."""
    absolute = path.absolute()
    return absolute.parent / f".{absolute.name}.replaced"


def _refuse_working_folder(place: Path, output: str | os.PathLike) -> None:
    """An output to replace that holds the working folder is refused: the run moves the old folder aside while it
    writes the new one, and the working folder goes with it (`--output .` failed as 'Device or resource busy'; a
    relative path still naming the moved folder would have the new model written into the copy removed at the
    end)."""
    with contextlib.suppress(OSError):  # a working folder removed meanwhile lies in no output
        working = real_path(Path.cwd())
        if working == place or place in working.parents:
            raise DistillError(f"{output}: holds the working folder, which {_overwrite()} would move aside with the "
                               "old model while the run writes the new one; run the command from another folder")


def _put_back(path: Path) -> None:
    """Put back a model that a run with --overwrite had moved aside when that run was killed with no
    time to clean up (SIGKILL, the kernel out of memory): unless it left resume state or finished,
    what it wrote is partial and the model is the user's."""
    backup = moved_aside(path)
    if not backup.is_dir():
        return
    if path.is_dir():
        names = _visible(path)
        if RESUME_FILE in names or SUMMARY_FILE in names:
            return
        _carry_hidden(path, backup)
        shutil.rmtree(path)
    os.replace(backup, path)
    logger.warning(f"warning: {path}: put back the model that a killed {_overwrite()} run had moved aside "
                   f"(to {backup.name}); the killed run's partial output is gone")


def _clear_partial_writes(path: Path) -> None:
    """Remove what a killed run was writing in `path` when it stopped (a SIGKILL during a save: the temporary file
    of a resume state or of a model file, a staging folder), before the run resumes there: a rename never came,
    so no command reads them, and the finished model's folder would keep them for good (a teacher's resume state,
    hundreds of megabytes). The mark of an unfinished output stays; so do the user's hidden files (a .git)."""
    for entry in path.iterdir():
        if entry.name.startswith(".") and _ours_hidden(entry.name) and entry.name != UNFINISHED:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()


def _clear_killed(path: Path) -> None:
    """Remove what a run killed with no time to clean up (SIGKILL, the kernel out of memory) wrote into `path`
    before it had a model, resume state or summary (a run_config.yaml, an export's first files, its temporary
    ones): no command could use it, and each refused the folder as another's files, --overwrite too. The folder
    was new or empty when that run began, so its visible content is that run's; a user's hidden files (a
    repository's .git) stay."""
    if not (path / UNFINISHED).is_file():
        return
    names = _visible(path)
    if any(name in names for name in (MODEL_CARD, RESUME_FILE, SUMMARY_FILE)):
        return  # a model, a run to resume, or a finished one (killed as it removed the mark)
    for name in [*names, *(entry.name for entry in path.iterdir() if _ours_hidden(entry.name))]:
        target = path / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()
    if names:
        logger.warning(f"warning: {path}: removed the partial output of a run that was killed before it saved a "
                       f"model ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})")


@contextlib.contextmanager
def model_output(output: str | os.PathLike, inputs: Iterable[str | os.PathLike | None] = (),
                 overwrite: bool = False, resume: bool = False) -> Iterator[Path]:
    """The checked, locked output directory of a training run (see the module docstring).

    With `overwrite` the old content is moved aside to ``.NAME.replaced`` and put back if the run
    fails; it is deleted once the run has finished. Under a launcher rank 0 alone checks, locks
    and cleans up; the other ranks only learn whether to go on. A path naming nothing ('', None: `save_pretrained`
    and `export_model` pass theirs here as given) is refused: as a path, '' is the current folder.
    """
    if not isinstance(output, (str, os.PathLike)):
        raise DistillError(f"give the model's output directory as a path, not {type(output).__name__}")
    if not os.fspath(output).strip():
        raise DistillError(f"output directory {os.fspath(output)!r}: an empty or blank path names no folder (as a "
                           "path, '' is the current folder): give the model's directory")
    path = Path(output)
    # the folder itself, for what is moved and made: a path through it (X/../X) names nothing once it is moved aside
    place = real_path(path)
    inputs = list(inputs)
    backup = moved_aside(place)

    def check() -> None:
        refuse_link(path)
        check_writable(path)
        check_directory_output(path, inputs)
        if not place.is_dir() and backup.is_dir():
            _put_back(place)  # killed between moving the model aside and making its own folder
        if resume and not path.is_dir():
            raise DistillError(f"{output}: nothing to resume (no such folder); check the path (an interrupted run "
                               f"keeps its folder, with resume.pt), or run without {_resume()} to start a new run")
        if path.is_dir():
            with _lock(path):  # a run still writing here is reported as such, not as what it has written
                _put_back(place)
                _clear_killed(place)
                if _refuse_unless(path, overwrite, resume):
                    _refuse_working_folder(place, output)

    _agreed(check)
    if not distributed.is_main():
        yield path
        return
    with contextlib.ExitStack() as stack:
        existed = place.is_dir()
        if existed:
            stack.enter_context(_lock(place))
        replace = existed and _refuse_unless(path, overwrite, resume)
        if resume:
            _clear_partial_writes(path)
        made = [p for p in (place, *place.parents) if not p.exists()]  # deepest first
        with writing(path, folder=True):
            if replace:
                shutil.rmtree(backup, ignore_errors=True)
                os.replace(place, backup)
            place.mkdir(parents=True, exist_ok=True)
            if replace:
                _carry_hidden(backup, place)
        if not existed or replace:
            stack.enter_context(_lock(place))
        if not resume:  # until it ends: what a killed run leaves is known as such (`_clear_killed`)
            with writing(path / UNFINISHED):
                (place / UNFINISHED).touch()
        before = set(_visible(place))
        try:
            yield path
        except BaseException:
            if replace:
                _carry_hidden(place, backup)
                shutil.rmtree(place, ignore_errors=True)
                os.replace(backup, place)
            elif not (place / RESUME_FILE).exists():  # nothing to resume: take back what this run made
                if not existed:
                    shutil.rmtree(place, ignore_errors=True)
                    remove_empty(made[1:])
                else:
                    for name in set(_visible(place)) - before:
                        target = place / name
                        if target.is_dir():
                            shutil.rmtree(target)
                        else:
                            target.unlink()
                    (place / UNFINISHED).unlink(missing_ok=True)
            raise
        (place / UNFINISHED).unlink(missing_ok=True)
        shutil.rmtree(backup, ignore_errors=True)


def check_output_file(output: str | os.PathLike, inputs: Iterable[str | os.PathLike | None],
                      what: str = "an output of this command", beside_model: bool | str | os.PathLike = True) -> None:
    """The rule for a file a command writes whole, whatever is there now (`file_output` adds what it holds):
    a regular file or a new name in a writable folder, no link, no input (`check_file_output`), and with
    `beside_model` False not among a model's files either; given a model's folder, among that model's files
    alone (its evaluate results: in another model's folder they would be taken for that model's). A script's
    record (throughput.py --out) is checked so before the minutes it measures."""
    path = Path(output)
    refuse_link(path)
    check_writable(output, path.parent)
    if path.is_dir():
        raise DistillError(f"{output}: is a directory; give a file name for the output")
    if path.exists() and not path.is_file():
        raise DistillError(f"{output}: is not a regular file (a device or a pipe); give a file name for the output")
    check_file_output(path, inputs)
    model = None if beside_model is True else enclosing_model(real_path(path))
    if model is None:
        return
    if beside_model is False:
        raise DistillError(f"{output}: lies in the model directory {model}, which holds the model and its "
                           f"evaluate results ({_overwrite()} of it would refuse to remove {what}): write it "
                           "elsewhere")
    if model != real_path(beside_model):
        raise DistillError(f"{output}: lies in the model directory {model}, which holds that model and its own "
                           f"evaluate results ({what} there would be taken for one of them): write it beside "
                           f"{beside_model} or elsewhere")


@contextlib.contextmanager
def file_output(output: str | os.PathLike, inputs: Iterable[str | os.PathLike | None] = (),
                overwrite: bool = False, ours: Callable[[Path], bool] = lambda path: False,
                what: str = "an output of this command", replace_earlier: bool = True,
                beside_model: bool | str | os.PathLike = True) -> Iterator[Path]:
    """A checked, locked output file: the command writes it atomically inside the block.

    An existing file is replaced with `overwrite`, or when `ours` recognises it as this command's earlier
    output and `replace_earlier` (evaluate's metrics, computed again as they were; not pseudo-labels, which may
    have been corrected by hand or have cost hours of a served model's time). `beside_model`: whether the file
    may lie among a model's files, or the model's folder whose files it may lie among (evaluate's result of it),
    which --overwrite of that model keeps only if it knows it as the model's. The lock is a hidden ``.NAME.lock`` file beside the output.
    """
    if str(output) == "-":  # `--output -` is not stdout here: it would be a file named "-"
        dash = option("--output -", "output '-'")
        raise DistillError(f"{dash}: {what} is written to a file; give its name")
    path = Path(output)
    inputs = list(inputs)

    def check() -> None:
        check_output_file(path, inputs, what, beside_model)
        if path.exists() and not overwrite and not ours(path):
            raise DistillError(f"{output}: exists and is not {what}; pass {_overwrite()} to replace it, "
                               "or choose another output file")
        if path.exists() and not overwrite and not replace_earlier:
            raise DistillError(f"{output}: holds an earlier {what}; pass {_overwrite()} to replace it, or choose "
                               "another output file")

    _agreed(check)
    missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    if distributed.is_main():
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
    distributed.barrier()  # every rank may write beside the output from here on
    if not distributed.is_main():
        yield path
        return
    lock = path.parent / f".{path.name}.lock"
    try:
        with _lock(lock, path):
            try:
                yield path
            finally:
                lock.unlink(missing_ok=True)
    except BaseException:
        remove_empty(missing)
        raise
