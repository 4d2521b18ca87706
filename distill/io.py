"""Atomic file writes and safe checkpoint loading: nothing half-written, nothing unpickled."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import hashlib
import io
import json
import os
import pickle
import shlex
import shutil
import signal
import stat
import tempfile
import threading
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any, Iterator, TextIO

import torch
from safetensors import SafetensorError
from safetensors import safe_open
from safetensors.torch import load_file
from safetensors.torch import save as tensors_to_bytes

from distill.errors import DistillError, import_extra
from distill.runtime import Output
from distill.settings import named


_UMASK = os.umask(0)
os.umask(_UMASK)

TEMPORARY_SUFFIX = ".tmp"  # `atomic_path`'s temporary file beside its target: .NAME.RANDOM.tmp
STALE_AFTER_S = 600.0  # a temporary file unlocked and unwritten this long was left by a killed writer
STAGING_PREFIX = ".saving-"  # a hidden folder of a model's files being written, before they are moved in
# A distill model's card (`distill.models.card`), here so that a module below the card's, such as the one that
# tells a transformers model's folder by its files (`distill.models.hub_files`), knows a distill folder by it.
MODEL_CARD = "distill.json"
CACHE_ENV = "DISTILL_CACHE"


def cache_root() -> Path:
    """Where distill keeps derived files it can rebuild (teacher logits, unpacked encoders); an empty
    $DISTILL_CACHE, or one of only spaces, counts as unset (it would be the working directory, or a
    folder named ' ' in it)."""
    given = os.environ.get(CACHE_ENV, "")
    return Path(given) if given.strip() else Path.home() / ".cache" / "distill"


LINK_FIX = "distill never writes through a link (that changes the file it points to): remove the link"


def refuse_link(path: str | os.PathLike, fix: str = LINK_FIX, shown_as: str | None = None) -> None:
    """A path distill writes, appends to, continues or creates must not be a symbolic link: written
    through, the link's target changes (another file grows); replaced, the target stays as it was.
    `fix` says what to do (a user-given output: give the real path); `shown_as`: how the error names it."""
    path = Path(path)
    if path.is_symlink():
        state = "" if path.exists() else ", which does not exist"
        raise DistillError(f"{shown_as or path}: is a symbolic link (to {os.readlink(path)}{state}); {fix}")


def check_target(path: str | os.PathLike, folder: bool = False, in_place: bool = False) -> None:
    """The one rule for every path distill writes: not a link (`refuse_link`), and, where it exists,
    of the kind written there: a regular file (not a folder, device or pipe), or with `folder` a folder.
    A file written `in_place` (appended to, or continued after a resume) is no other name's too
    (`refuse_hard_links`); one replaced by a rename may be: the other name keeps the old file."""
    refuse_link(path)
    path = Path(path)
    if not path.exists() or (path.is_dir() if folder else path.is_file()):
        if in_place and path.is_file():
            refuse_hard_links(path, path.stat().st_nlink)
        return
    found = "a folder" if path.is_dir() else "a file" if path.is_file() else "not a regular file (a device or a pipe)"
    raise DistillError(f"{path}: is {found}, where distill writes a {'folder' if folder else 'file'} of its own; "
                       "move it away, or choose another output")


def refuse_hard_links(path: str | os.PathLike, links: int) -> None:
    """A file distill appends to or continues must have no other hard link: written in place, the file
    under the other name changes too (another file grows), as through a symbolic link."""
    if links > 1:
        name = shlex.quote(str(path))
        raise DistillError(f"{path}: has {links - 1} other hard link{'s' if links > 2 else ''} (the same file under "
                           f"another name), and distill writes it in place, which would change the other too: make "
                           f"it a file of its own (cp {name} {name}.copy && mv {name}.copy {name})")


def what_is(path: Path) -> str:
    """What is at `path`, which is not a folder, as a message says it: a file, a named pipe, a broken link..."""
    if path.is_symlink():
        return f"a symbolic link (to {os.readlink(path)}{'' if path.exists() else ', which does not exist'})"
    mode = path.stat().st_mode
    return "a file" if stat.S_ISREG(mode) else "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else \
        "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISBLK(mode) or stat.S_ISCHR(mode) else \
        "not a folder"


def check_folder(path: str | os.PathLike, shown_as: str | None = None) -> None:
    """A folder distill makes (with the folders above it) or writes into, under a user-given path (a
    cache): neither a link nor anything but a folder, nor under a file. `shown_as`: how the error names it."""
    path = Path(path).expanduser()
    shown_as = shown_as or str(path)
    refuse_link(path, "give the real path", shown_as)
    if path.exists() and not path.is_dir():
        raise DistillError(f"{shown_as}: is {what_is(path)}, not a folder; give a folder (or a path where one can "
                           "be made)")
    for above in path.absolute().parents:
        if above.is_dir():
            return
        if above.exists() or above.is_symlink():
            raise DistillError(f"{shown_as}: {above} is {what_is(above)}, not a folder; give a folder "
                               "(or a path where one can be made)")


@contextlib.contextmanager
def writing(path: str | os.PathLike, folder: bool = False, in_place: bool = False) -> Iterator[None]:
    """Write `path` (with `folder`, make or lock a folder; `in_place`, append to or continue a file) under
    the one rule of `check_target`, checked first, and turn an OSError raised while writing (full disk, quota, permissions) into a one-line
    error naming the file the user asked for, not a temporary one."""
    check_target(path, folder, in_place)
    try:
        yield
    except DistillError:
        raise
    except OSError as err:
        reason = err.strerror or str(err) or type(err).__name__
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            reason += ": the disk is full; free space or write elsewhere"
        raise DistillError(f"{path}: cannot write ({reason})") from None


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM until the block is done, then act on them as they would have: files that
    must agree (an epoch's best model and the resume state that points at it) are all written or none,
    so an interrupt never leaves a run that is neither usable nor resumable. Only SIGKILL cuts in.
    Outside the main thread, where signal handlers cannot be set, the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.signal(signum, lambda number, frame: caught.append(number)) for signum in held}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
    if caught:
        handler = previous[caught[0]]
        if callable(handler):
            handler(caught[0], None)
        elif handler in (signal.SIG_DFL, None):
            signal.raise_signal(caught[0])


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success fsync it and rename it into place.

    A failed write (a full disk, too large a file) is one error naming `path`, and leaves no file. The
    temporary file is locked (`flock`) until it is renamed or removed: a process killed while writing leaves it
    behind, and `remove_stale_temporaries` tells it from one a live writer (even a stopped one) holds.
    """
    path = Path(path)
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX, dir=path.parent)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with writing(path):
            yield Path(tmp)
            with open(tmp, "rb") as handle:
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o666 & ~_UMASK)
            os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        os.close(fd)


def remove_stale_temporaries(folder: str | os.PathLike, pattern: str, older_than: float = STALE_AFTER_S,
                             folders: bool = False) -> int:
    """Remove the temporary files matching `pattern` in `folder` that `atomic_path` left when its process was
    killed (with `folders`, the temporary folders `atomic_directory` left), and return how many: one no process
    holds locked, last changed over `older_than` seconds ago (a writer locks it within moments of making it), still
    the same one when it is removed. A live writer's, whether it writes now or is stopped, is never touched; nor is
    a link, or a folder (a file, with `folders`) of that name."""
    removed = 0
    for path in Path(folder).glob(pattern):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue  # gone (its writer renamed it), a link, or unreadable: not ours to remove
        try:
            found = os.fstat(fd)
            ours = stat.S_ISDIR(found.st_mode) if folders else stat.S_ISREG(found.st_mode)
            if not ours or time.time() - found.st_mtime < older_than:
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            now = os.stat(path, follow_symlinks=False)
            if (now.st_dev, now.st_ino) == (found.st_dev, found.st_ino):
                shutil.rmtree(path) if folders else os.unlink(path)
                removed += 1
        except OSError:
            continue  # locked by its writer, or renamed or removed meanwhile
        finally:
            os.close(fd)
    return removed


def _locked_folder(path: Path, suffix: str, stack: contextlib.ExitStack) -> Path:
    """A new hidden folder beside `path` (.NAME.RANDOM`suffix`), locked (`flock`) until `stack` closes: what a
    killed process leaves of it, `remove_stale_temporaries` tells from a live writer's."""
    folder = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent))
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    stack.callback(os.close, fd)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return folder


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary folder beside `path`; on success swap it into place (an old one is removed).

    The temporary folders are locked while in use: those a killed process left beside `path` (a whole copy of a
    model, each) are removed by the next write of `path`, and a live writer's, even a stopped one's, never."""
    path = Path(path)
    with contextlib.ExitStack() as stack:
        with writing(path, folder=True):
            path.parent.mkdir(parents=True, exist_ok=True)
            for suffix in (".tmp", ".old"):
                remove_stale_temporaries(path.parent, f".{glob.escape(path.name)}.*{suffix}", folders=True)
            tmp = _locked_folder(path, ".tmp", stack)
        try:
            with writing(path, folder=True):
                yield tmp
                for file in tmp.rglob("*"):
                    if file.is_file():
                        with open(file, "rb") as handle:
                            os.fsync(handle.fileno())
                os.chmod(tmp, 0o777 & ~_UMASK)
                if path.exists():
                    old = _locked_folder(path, ".old", stack)
                    os.replace(path, old / path.name)
                    os.replace(tmp, path)
                    shutil.rmtree(old)
                else:
                    os.replace(tmp, path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def appending(path: str | os.PathLike) -> Iterator[TextIO]:
    """`path` opened to append text (made if missing), under `writing`'s rule for a file written in place:
    a link or a hard-linked file is refused, and the open itself does not follow a link (one made after the
    check), nor goes on with a file hard-linked since."""
    with writing(path, in_place=True):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
        try:
            refuse_hard_links(path, os.fstat(fd).st_nlink)
        except DistillError:
            os.close(fd)
            raise
        with open(fd, "a", encoding="utf-8") as handle:
            yield handle


def shown_url(url: str) -> str:
    """`url` (a database's, a tracking server's) without the password of its user:password@, as a message shows
    it: a terminal or a log is no place for it."""
    import urllib.parse
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL: nothing in it is a password
        return url
    if password is None:
        return url
    return parts._replace(netloc=parts.netloc.replace(f":{password}@", ":***@", 1)).geturl()


IN_MEMORY_SQLITE = "an in-memory SQLite database"
NOT_A_DATABASE_URL = "not a database URL"


def sqlite_database(url: str) -> Path | None:
    """The file an SQLite SQLAlchemy `url` names (an Optuna study's storage, an MLflow tracking store); None for
    another database. A URL SQLAlchemy cannot parse raises ValueError(`NOT_A_DATABASE_URL`); an SQLite URL
    naming a host (two slashes too few) or no file (`IN_MEMORY_SQLITE`, which keeps nothing once the process
    ends) raises ValueError with the reason, for the caller to say which setting to change."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ValueError(NOT_A_DATABASE_URL) from None
    if parsed.get_backend_name() != "sqlite":
        return None
    if parsed.host:
        raise ValueError("an SQLite URL names no host; its file follows three slashes, sqlite:///PATH (four for an "
                         "absolute path, sqlite:////PATH)")
    if parsed.database in (None, "", ":memory:") or parsed.query.get("mode") == "memory":
        raise ValueError(IN_MEMORY_SQLITE)
    return Path(parsed.database)


def real_path(path: str | os.PathLike) -> Path:
    """`path` absolute, `~` expanded and its links followed, as outputs are compared with inputs and models; one
    through a link loop stays as it is, for the file system to refuse in one line where it is used (Path.resolve
    raised RuntimeError, a traceback)."""
    return Path(os.path.realpath(Path(path).expanduser()))


POSTGRES_EXTRA = "pip install 'distill[postgres]'"


def require_database_driver(url: str, user: str) -> None:
    """The driver of a database server's SQLAlchemy `url` (an Optuna study's storage, an MLflow tracking store),
    imported before the database is opened: one that does not import is one line naming its package (and, for
    PostgreSQL's default driver, the postgres extra), where Optuna's line named neither ("Failed to import DB
    access module for the specified storage URL") and MLflow's named no extra. `user`: what needs it."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError
    try:
        dialect = make_url(url).get_dialect()
    except SQLAlchemyError:  # a database SQLAlchemy does not know: its user's own line says so
        return
    try:
        dialect.import_dbapi()
    except ImportError as err:
        module = (err.name or dialect.driver).split(".")[0]
        if module == "psycopg":
            import_extra(module, user, POSTGRES_EXTRA)  # one line, saying too whether it is installed but broken
        raise DistillError(f"{user} needs the {module} package (SQLAlchemy's {dialect.name}+{dialect.driver} "
                           f"driver): install it, or give postgresql://HOST/DB with {POSTGRES_EXTRA}") from None


def make_folder(path: str | os.PathLike) -> Path:
    """Make the folder `path` (and those above it) under `writing`'s rule for a folder."""
    path = Path(path)
    with writing(path, folder=True):
        path.mkdir(parents=True, exist_ok=True)
    return path


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DistillError(f"{path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DistillError(f"{path}: not valid JSON ({err})") from None


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def save_tensors(path: str | os.PathLike, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None
                 ) -> None:
    """Serialized in memory first, so a failed write is an OSError that names its cause (full disk)."""
    write_bytes(path, tensors_to_bytes({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, metadata))


def tensors_sha256(tensors: dict[str, torch.Tensor]) -> str:
    """A checksum of named tensors' values (safetensors itself checks no content)."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        digest.update(name.encode() + b"\0" + str(tensors[name].dtype).encode() + b"\0")
        digest.update(tensors[name].contiguous().cpu().numpy().tobytes())
    return digest.hexdigest()


def content_fingerprint(description: dict, tensors: dict[str, torch.Tensor]) -> str:
    """A digest of a model's JSON-able description (how it reads text) and its weights: keys the logit
    cache, so a cached logit is never another model's."""
    reading = json.dumps(description, sort_keys=True)
    return hashlib.sha256((reading + tensors_sha256(tensors)).encode()).hexdigest()[:40]


def _checked_sha256(tensors: dict[str, torch.Tensor]) -> str:
    """The checksum `save_checked_tensors` records: the values (`tensors_sha256`) and each tensor's shape, which
    the file's header holds apart from them (the same bytes under another shape are other values)."""
    shapes = json.dumps({name: list(tensors[name].shape) for name in sorted(tensors)})
    return hashlib.sha256(f"{tensors_sha256(tensors)}:{shapes}".encode()).hexdigest()


def save_checked_tensors(path: str | os.PathLike, tensors: dict[str, torch.Tensor]) -> None:
    """`save_tensors` with a checksum of the values and their shapes in the file's metadata, for
    `load_checked_tensors`."""
    save_tensors(path, tensors, {"sha256": _checked_sha256(tensors)})


def load_checked_tensors(path: str | os.PathLike) -> dict[str, torch.Tensor] | None:
    """What `save_checked_tensors` wrote, or None when the file is damaged (unreadable, or its values or
    their shapes differ from their checksum): for derived files that are recomputed rather than trusted."""
    try:
        with safe_open(str(path), framework="pt") as handle:
            expected = (handle.metadata() or {}).get("sha256")
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError):
        return None
    return tensors if expected == _checked_sha256(tensors) else None


def load_tensors(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    try:
        return load_file(str(path))
    except FileNotFoundError:
        raise DistillError(f"{path}: file not found") from None
    except (SafetensorError, OSError, ValueError) as err:
        raise DistillError(f"{path}: corrupt or truncated safetensors file ({err})") from None


def save_checkpoint(path: str | os.PathLike, checkpoint: dict[str, Any]) -> None:
    """Save a dict of tensors and JSON-able values; loadable with weights_only=True.

    Serialized in memory first: torch's own file writer reports a full disk only as an
    internal assertion, an OSError from our write says what happened.
    """
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    write_bytes(path, buffer.getbuffer())


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Load with weights_only=True, so a planted pickle payload is refused, never run. Bytes that are no
    checkpoint (a text file, a damaged one) are one error: torch's unpickler raises whatever its parsing hits
    (a KeyError, an IndexError, a UnicodeDecodeError, struct.error), and warns of the protocol it read."""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise DistillError(f"{path}: file not found") from None
    except pickle.UnpicklingError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else "unsupported object"
        raise DistillError(f"{path}: refused to load: not a plain tensor checkpoint ({first})") from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DistillError(f"{path}: corrupt or truncated checkpoint ({first})") from None
    except Exception as err:  # noqa: BLE001 - see above: any failure to read the bytes is a damaged file
        raise DistillError(f"{path}: corrupt or truncated checkpoint ({type(err).__name__} reading it)") from None


def save_sealed(path: str | os.PathLike, checkpoint: dict[str, Any]) -> None:
    """Like `save_checkpoint`, with the sha256 of the serialized state stored in the same file, so
    `load_sealed` detects any change to it (one file, so there is no window where the two disagree)."""
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    data = buffer.getvalue()
    save_checkpoint(path, {"state": torch.frombuffer(bytearray(data), dtype=torch.uint8),
                           "sha256": hashlib.sha256(data).hexdigest()})


def load_sealed(path: str | os.PathLike) -> dict[str, Any]:
    """Load what `save_sealed` wrote, refusing it if its content no longer matches its checksum; every refusal
    says how to go on (an interrupted run's state: start over)."""
    over = f"start over with {named(Output, 'overwrite', 'overwrite=True')}"
    try:
        outer = load_checkpoint(path)
    except DistillError as err:  # truncated, or no checkpoint at all
        raise DistillError(f"{err}; {over}") from None
    if not isinstance(outer, dict) or not isinstance(outer.get("state"), torch.Tensor) or "sha256" not in outer:
        raise DistillError(f"{path}: not a state file written by this version of distill; {over}")
    data = outer["state"].numpy().tobytes()
    if hashlib.sha256(data).hexdigest() != outer["sha256"]:
        raise DistillError(f"{path}: corrupted (its checksum does not match); {over}")
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError) as err:
        raise DistillError(f"{path}: refused to load: not a plain tensor checkpoint ({type(err).__name__}); "
                           f"{over}") from None
