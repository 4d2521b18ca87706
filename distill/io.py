"""Atomic file writes and safe checkpoint loading: nothing half-written, nothing unpickled."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterator

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from distill.errors import DistillError


_UMASK = os.umask(0)
os.umask(_UMASK)

CACHE_ENV = "DISTILL_CACHE"


def cache_root() -> Path:
    """Where distill keeps derived files it can rebuild (teacher logits, unpacked encoders)."""
    return Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "distill"))


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success fsync it and rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary folder beside `path`; on success swap it into place (an old one is removed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        for file in tmp.rglob("*"):
            if file.is_file():
                with open(file, "rb") as handle:
                    os.fsync(handle.fileno())
        os.chmod(tmp, 0o777 & ~_UMASK)
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            os.replace(path, old / path.name)
            os.replace(tmp, path)
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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


def save_tensors(path: str | os.PathLike, tensors: dict[str, torch.Tensor]) -> None:
    with atomic_path(path) as tmp:
        try:
            save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp))
        except SafetensorError as err:  # the library wraps I/O errors such as a full disk
            raise DistillError(f"{path}: cannot write ({err})") from None


def load_tensors(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    try:
        return load_file(str(path))
    except FileNotFoundError:
        raise DistillError(f"{path}: file not found") from None
    except (SafetensorError, OSError, ValueError) as err:
        raise DistillError(f"{path}: corrupt or truncated safetensors file ({err})") from None


def save_checkpoint(path: str | os.PathLike, checkpoint: dict[str, Any]) -> None:
    """Save a dict of tensors and JSON-able values; loadable with weights_only=True."""
    with atomic_path(path) as tmp:
        try:
            torch.save(checkpoint, tmp)
        except RuntimeError as err:  # torch wraps I/O errors such as a full disk
            raise DistillError(f"{path}: cannot write ({str(err).strip().splitlines()[0]})") from None


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Load with weights_only=True, so a planted pickle payload is refused, never run."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise DistillError(f"{path}: file not found") from None
    except pickle.UnpicklingError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else "unsupported object"
        raise DistillError(f"{path}: refused to load: not a plain tensor checkpoint ({first})") from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DistillError(f"{path}: corrupt or truncated checkpoint ({first})") from None
