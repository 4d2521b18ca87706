"""Teacher-logit cache, keyed by content: a teacher's logits for every example it has scored,
whichever command scored it, so the same text is never run through the same teacher twice.

`pseudo-label` stores the logits of the text it labels; `kd` looks up every example of its
transfer set (labelled and unlabeled) and runs the teacher on the missing ones only, so
``kd --unlabeled pseudo.jsonl`` after ``pseudo-label`` costs no second teacher pass over it, and
a second `kd` run (another student, another loss) none at all.

Layout: ``CACHE_DIR/<teacher fingerprint>[-bf16]/<shard>.safetensors``. The folder is named by
`Teacher.fingerprint` (its weights and how it reads text; an ONNX export's: its files) and the
precision, so another teacher or precision never shares it. A shard holds the logits of a set of
examples (tagging: words packed with offsets and a `scored` mask, as `ExampleLogits` keeps them), a
16-byte sha256 key per example (its exact JSON text), its folder's name (a shard copied from another teacher's
folder is not this teacher's) and a checksum of all of it: a damaged or foreign shard is ignored and its examples
recomputed, never trusted. Under a launcher the ranks share the work of a miss and
rank 0 alone writes.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import json
import os
from pathlib import Path
from typing import Callable, Sequence

import torch
from safetensors import SafetensorError, safe_open

from distill import distributed, precision
from distill.inference import ExampleLogits, examples_to_score, predict_logits, predict_logits_across_ranks
from distill.errors import DistillError, option
from distill.io import (CACHE_ENV, TEMPORARY_SUFFIX, cache_root, check_folder, check_target, load_checked_tensors,
                        make_folder, real_path, remove_stale_temporaries, save_checked_tensors, what_is)
from distill.outputs import enclosing_model, is_model_folder
from distill.progress import progress_bar
from distill.spill import SpilledLogits
from distill.truncation import Truncation, truncation_by_source, warn_truncations

CACHE_DIR_OPTION = {"path": "dir", "help": "Teacher-logit cache folder, keyed by content and shared by kd, pseudo-label "
                    "and search (every trial): an example this teacher has scored before is not scored again, so kd "
                    "--unlabeled of pseudo-label's output runs no second teacher pass (default: "
                    "$DISTILL_CACHE/teacher-logits, where DISTILL_CACHE defaults to ~/.cache/distill)."}

KEY_BYTES = 16
SHARD_SUFFIX = ".safetensors"
SPILL_CHUNK = 4096  # examples scored, and held in memory, at a time by `spilled_teacher_logits`
PerExample = tuple[torch.Tensor, "torch.Tensor | None"]


def default_cache_dir() -> Path:
    return cache_root() / "teacher-logits"


def _named(cache_dir: str | Path | None) -> tuple[Path, str]:
    """The cache folder, and how an error names it: as given, or as the default that $DISTILL_CACHE moves."""
    if cache_dir is not None:
        return real_path(cache_dir), str(cache_dir)
    return real_path(default_cache_dir()), f"{default_cache_dir()} (the default logit cache, " \
        f"${CACHE_ENV}/teacher-logits)"


def check_cache_dir(cache_dir: str | Path | None, output: str | Path | None = None) -> None:
    """The cache (`cache_dir`, or the default one for None) writes shards under its folder: never inside
    a model directory (a file there is not part of the model as saved, and the model is refused from
    then on), nor inside the run's `output` (the model it will write) or a hidden name beside it (its
    lock, temporary folders, the model that --overwrite moves aside), never over a file, under a file or
    through a link (`distill.io.check_folder`), the default one ($DISTILL_CACHE) as a given one."""
    if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
        raise DistillError(f"cache_dir must be a folder's path (or None: the default cache), got "
                           f"{type(cache_dir).__name__} {cache_dir!r:.40}")
    given = Path(cache_dir if cache_dir is not None else default_cache_dir())
    folder, cache_dir = _named(cache_dir)
    if output is not None:
        out = real_path(output)
        if folder == out or out in folder.parents:
            raise DistillError(f"{cache_dir}: lies inside {output}, the model this run writes (a file there "
                               "changes the model); choose a cache folder outside it")
        check_cache_beside(cache_dir, output, [f".{glob.escape(out.name)}.*"])
    model = folder if is_model_folder(folder) else enclosing_model(folder)
    if model is not None:
        raise DistillError(f"{cache_dir}: lies inside the model directory {model} (a file there changes the model); "
                           "choose a cache folder outside it")
    if folder.exists() and not folder.is_dir():
        raise DistillError(f"{cache_dir}: is {what_is(folder)}; the logit cache is a folder")
    check_folder(given, cache_dir)
    check_writable(folder, cache_dir)


def check_writable(folder: Path, cache_dir: str) -> None:
    """The cache writes shards in `folder` (the cache, or a teacher's folder in it; `cache_dir` names the cache):
    it, or the folder it will be made in, is writable by this user, found before the teacher's pass and not at
    its first shard."""
    existing = next(path for path in (folder, *folder.parents) if path.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        raise DistillError(f"{cache_dir}: {existing} is not writable by this user, and the logit cache writes there; "
                           f"give a cache folder you may write ({option('--cache-dir', 'cache_dir=')}, or "
                           f"${CACHE_ENV})")


def check_cache_beside(cache_dir: str | Path | None, output: str | Path, written: Sequence[str]) -> None:
    """A command writes temporaries beside its output (`written`: glob patterns of their names in the output's
    folder). A cache folder named as one of them, or lying in a folder so named, would turn a file into a
    folder (or share a folder the run moves or deletes) and fail the run only at its end, with files left."""
    (folder, cache_dir), out = _named(cache_dir), real_path(output)
    for path in (folder, *folder.parents):
        if path.parent == out.parent and any(fnmatch.fnmatchcase(path.name, pattern) for pattern in written):
            raise DistillError(f"{cache_dir}: uses the name {path.name}, which this run writes as or beside "
                               f"{output} (its partial output, signature, lock, temporary files or the model it "
                               "replaces); choose another cache folder")


def example_key(example) -> bytes:
    """What identifies an example: the sha256 of its exact JSON text (a text, or a token list)."""
    return hashlib.sha256(json.dumps(example, ensure_ascii=False).encode()).digest()[:KEY_BYTES]


class LogitStore:
    """One teacher's (at one precision) cached logits, looked up and added by example content.

    Which shard holds which example is read once (the shards' key tensors only) and kept up to date
    by `add`, so a lookup opens just the shards holding hits: `pseudo-label` looks up every chunk
    while adding a shard per chunk, and must not reread the whole cache each time.
    """

    def __init__(self, teacher, cache_dir: str | Path | None = None, fingerprint: str | None = None):
        check_cache_dir(cache_dir)
        # an ONNX export computes in its graph's types whatever the precision setting (`fixed_precision`)
        reduced = None if getattr(teacher, "fixed_precision", False) else precision.reduced(teacher.device)
        suffix = f"-{reduced}" if reduced else ""  # bf16 or fp16 logits are kept apart from fp32 ones
        fingerprint = fingerprint or teacher.fingerprint()  # a multi-task head's: `MultiTaskTeacher.head_fingerprint`
        self.folder = Path(cache_dir or default_cache_dir()) / f"{fingerprint}{suffix}"
        check_target(self.folder, folder=True)  # before the run writes anything, as `add` would find it
        check_writable(real_path(self.folder), _named(cache_dir)[1])  # made by another user, perhaps
        if self.folder.is_dir():  # a shard's temporary file that a killed run left: no later run would remove it
            remove_stale_temporaries(self.folder, f".*{SHARD_SUFFIX}.*{TEMPORARY_SUFFIX}")
        self._where: dict[bytes, Path] | None = None
        self._also: dict[bytes, list[Path]] = {}
        self._damaged: set[Path] = set()  # shards `lookup` found damaged: their keys are looked up elsewhere

    def _index(self) -> dict[bytes, Path]:
        """Each key's first shard; the rare key that more shards hold (one written again beside a damaged shard,
        or by two runs at once) has the others in `_also`, for `lookup` to pass on to when the first is damaged."""
        if self._where is None:
            self._where = {}
            for shard in sorted(self.folder.glob(f"*{SHARD_SUFFIX}")) if self.folder.is_dir() else []:
                try:
                    with safe_open(str(shard), framework="pt") as handle:
                        keys = handle.get_tensor("keys")
                except (SafetensorError, OSError, ValueError):
                    continue  # unreadable: as if absent (its examples are computed afresh)
                for key in map(bytes, keys.numpy()):
                    self._index_shard(key, shard)
        return self._where

    def _index_shard(self, key: bytes, shard: Path) -> None:
        """Index `shard` as holding `key`: its first shard, or one more."""
        first = self._where.setdefault(key, shard)
        if first != shard and shard not in self._also.get(key, ()):
            self._also.setdefault(key, []).append(shard)

    def _shard(self, key: bytes) -> Path | None:
        """The first shard holding `key` that `lookup` has not found damaged."""
        index = self._index()
        held = [index[key], *self._also.get(key, ())] if key in index else []
        return next((shard for shard in held if shard not in self._damaged), None)

    def holds(self, key: bytes) -> bool:
        """Whether the store has the logits of example `key`, by its index (a shard found damaged later, at
        `lookup`, has its examples computed afresh)."""
        return self._shard(key) is not None

    def lookup(self, keys: set[bytes]) -> dict[bytes, PerExample]:
        """The cached (logits, scored) of those `keys` the store holds: a key of a damaged shard is looked up in
        its other shards, and counts as missing where none is whole."""
        found: dict[bytes, PerExample] = {}
        read: set[Path] = set()
        while shards := sorted({self._shard(key) for key in keys - found.keys()} - read - {None}):
            for shard in shards:
                read.add(shard)
                tensors = load_checked_tensors(shard)
                if tensors is None or not self._owns(tensors):
                    self._damaged.add(shard)
                    continue
                results = ExampleLogits.from_dict(tensors)
                for row, key in enumerate(bytes(k) for k in tensors["keys"].numpy()):
                    if key in keys and key not in found:
                        found[key] = results.example(row)
        return found

    def _owner(self) -> torch.Tensor:
        """What a shard records of the teacher (and precision) whose logits it holds: its folder's name, under the
        shard's checksum, so a shard copied or moved from another teacher's folder is never taken for this one's."""
        return torch.tensor(list(self.folder.name.encode()), dtype=torch.uint8)

    def _owns(self, tensors: dict[str, torch.Tensor]) -> bool:
        """Whether a whole shard holds this teacher's logits (`_owner`); one from another folder counts as damaged."""
        owner = tensors.get("owner")
        return owner is not None and torch.equal(owner, self._owner())

    def add(self, keys: list[bytes], results: ExampleLogits) -> Path | None:
        """Store the logits of examples `keys` (in `results`' order) as one new shard."""
        if not keys:
            return None
        tensors = {**results.to_dict(), "keys": torch.tensor([list(k) for k in keys], dtype=torch.uint8),
                   "owner": self._owner()}
        path = self.folder / f"{hashlib.sha256(b''.join(keys)).hexdigest()[:40]}{SHARD_SUFFIX}"
        make_folder(self.folder)
        save_checked_tensors(path, tensors)
        self._damaged.discard(path)  # written whole over a damaged shard of the same examples
        self._index()
        for key in keys:
            self._index_shard(key, path)
        return path


def teacher_logits(teacher, examples: Sequence, store: LogitStore | None, batch_size: int = 64,
                   progress: bool = False, across_ranks: bool = True, source: str | Sequence[str] | None = None,
                   tally: dict[str, Truncation] | None = None) -> tuple[ExampleLogits, int]:
    """The teacher's logits for `examples`, in order, and how many came from `store`.

    Only examples the store lacks (each distinct one once) go through the teacher, and their
    logits are added to the store. `across_ranks`: under a launcher the ranks share that work
    (rank 0 decides what is missing and alone writes); otherwise this process does its own.
    Given the `source` of the examples (or of each example: kd's training and unlabeled files), the teacher
    warns of the texts it cuts among those it reads, naming only the files they came from
    (`distill.truncation`): none when the store holds them all; given a `tally`, it adds their counts to it
    instead, for a caller that scores a transfer set in parts to warn once.
    """
    examples = examples_to_score(teacher, examples)  # a string, a table, none at all: as predict_logits reads them
    keys = [example_key(example) for example in examples]
    shared = across_ranks and distributed.world_size() > 1
    found = store.lookup(set(keys)) if store is not None and (not shared or distributed.is_main()) else {}
    if shared:
        found = distributed.broadcast_object(found)
    missing: dict[bytes, int] = {}
    for index, key in enumerate(keys):
        if key not in found:
            missing.setdefault(key, index)
    todo = [examples[index] for index in missing.values()]
    if todo and source is not None:
        counted = truncation_by_source(teacher, todo, source if isinstance(source, str)
                                       else [source[index] for index in missing.values()])
        if tally is None:
            warn_truncations(teacher, counted)
        else:
            for name, truncation in counted.items():
                tally[name] = tally.get(name, Truncation()) + truncation
    score = predict_logits_across_ranks if shared else predict_logits
    computed = score(teacher, todo, batch_size, progress, "teacher logits") if todo else None
    hits = sum(key in found for key in keys)
    if computed is not None:
        if store is not None and (not shared or distributed.is_main()):
            store.add(list(missing), computed)
        found.update(zip(missing, (computed.example(row) for row in range(len(todo)))))
    return ExampleLogits.from_examples([found[key] for key in keys]), hits


def spilled_teacher_logits(teachers: Sequence, stores: Sequence[LogitStore], examples: Sequence,
                           combine: Callable[[list[ExampleLogits]], list[ExampleLogits]], batch_size: int = 64,
                           progress: bool = False, source: str | Sequence[str] | None = None,
                           chunk: int | None = None) -> tuple[list[SpilledLogits], list[int]]:
    """`teacher_logits` of several `teachers` (each with its store) for a transfer set too large to hold: `chunk`
    examples at a time, whose logits (one `ExampleLogits` per teacher) `combine` makes into those to keep (one
    teacher's as they are; an ensemble's mixtures), written to disk (`distill.spill`). Memory holds one chunk
    whatever the number of examples. Returns the spilled logits, one per what `combine` returns, and each
    teacher's cache hits; texts the teachers cut are warned of once per file, at the end."""
    chunk = chunk or SPILL_CHUNK
    spilled: list[SpilledLogits] = []
    hits = [0] * len(teachers)
    tallies: list[dict[str, Truncation]] = [{} for _ in teachers]
    with progress_bar(total=len(examples), desc="teacher logits", unit="ex",
                      disable=not (progress and distributed.is_main()), leave=False) as bar:
        for start in range(0, len(examples), chunk):
            part = examples[start:start + chunk]
            named = source if source is None or isinstance(source, str) else source[start:start + chunk]
            results = []
            for number, (teacher, store) in enumerate(zip(teachers, stores)):
                logits, found = teacher_logits(teacher, part, store, batch_size, source=named, tally=tallies[number])
                results.append(logits)
                hits[number] += found
            kept = combine(results)
            spilled = spilled or [SpilledLogits() for _ in kept]
            for where, logits in zip(spilled, kept, strict=True):
                where.extend(logits)
            bar.update(len(part))
    for teacher, tally in zip(teachers, tallies):
        warn_truncations(teacher, tally)
    return spilled, hits
