"""Label unlabeled text with the teacher's argmax, streaming, resumable, never half-written.

Records go to ``OUTPUT.part`` a chunk at a time (flushed and fsynced); the finished file is
renamed to OUTPUT. ``--resume`` keeps the complete records of an interrupted ``.part`` file
(dropping a torn last line) and continues after the input line of the last record kept.
Under a launcher the input's chunks are dealt out to the ranks, each with its own ``.part``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import glob
import heapq
import itertools
import json
import os
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Callable, Iterator, Sequence


from distill import distributed
from distill.data import iter_unlabeled
from distill.errors import DistillError, ResumeRefused, option, require_whole
from distill.cache import CACHE_DIR_OPTION, LogitStore, check_cache_beside, check_cache_dir, example_key, teacher_logits
from distill.ensemble import (TEACHER_WEIGHTS_OPTION, check_distinct_teachers, check_ensemble, ensemble_logits,
                              ensemble_weights)
from distill.inference import ExampleLogits, model_crf, prediction_records, rounded
from distill.io import appending, atomic_path, check_target, read_json, write_json, writing
from distill.models import is_onnx_export, load_teacher
from distill.models.kinds import refuse_unasked, require_kind
from distill.models.base import LabelModel
from distill.models.multitask import MultiTaskTeacher, all_head_logits, head_records
from distill.outputs import file_output
from distill.progress import progress_bar
from distill.runtime import Output
from distill.settings import named, setting
from distill.provenance import changed_settings, input_fingerprints, runtime_settings, teacher_role
from distill.truncation import Truncation, classification_reader, count_truncation, warn_truncation


def recover_partial(part: Path, through: int | None = None) -> tuple[int, int]:
    """Truncate `part` after its last complete record (of input line `through` or before, where given); return
    that record's input line (0 if none) and how many records it keeps.

    Every complete record is checked (JSON, input lines rising), so a damaged or foreign file is
    refused rather than merged into the output.
    """
    if not part.exists():
        return 0, 0
    data = part.read_bytes()
    end = data.rfind(b"\n") + 1
    last_line, kept, offset = 0, 0, 0
    for record in data[:end].splitlines(keepends=True):
        try:
            line = json.loads(record)["line"]
        except (ValueError, KeyError, TypeError):
            raise DistillError(f"{part}: cannot resume: the partial output is not pseudo-label JSONL") from None
        if not isinstance(line, int) or line <= last_line:
            raise DistillError(f"{part}: cannot resume: the partial output is damaged (input lines out of order)")
        if through is not None and line > through:
            break
        last_line, kept, offset = line, kept + 1, offset + len(record)
    with writing(part, in_place=True), open(part, "r+b") as handle:
        handle.truncate(offset)
    return last_line, kept


def last_whole_chunk(input_path: str, task: str, chunk_size: int, done: int) -> int:
    """The input line that ends this rank's last chunk labelled whole by input line `done` (0 if none): a run
    resumes there, so that its chunks, and the batches made of them, are the uninterrupted run's (records of a
    chunk cut short by a kill are labelled again, to the same bits)."""
    boundary = 0
    for chunk in chunks(rank_examples(input_path, task, chunk_size), chunk_size):
        if chunk[-1][0] > done:
            break
        boundary = chunk[-1][0]
    return boundary


def is_pseudo_label_output(path: Path) -> bool:
    """Whether `path` looks like this command's JSONL (said so when a rerun without --overwrite would replace it)."""
    try:
        with open(path, encoding="utf-8") as handle:
            first = handle.readline(1 << 20)  # a record is one line; a huge first line is no record
        record = json.loads(first) if first.strip() else {}
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(record, dict) and {"line", "confidence"} <= set(record)


def signature_path(output: Path) -> Path:
    """What identifies the run that writes the parts: checked on --resume."""
    return output.with_name(output.name + ".part.json")


def run_signature(teacher_dir: str | Sequence[str], input_path: str, **settings) -> dict:
    """The teacher's files (an ensemble's: each teacher's), the input's content, and every setting that changes
    the records."""
    teachers = {teacher_role(number): folder for number, folder in enumerate(teacher_dirs(teacher_dir))}
    return {"inputs": input_fingerprints({**teachers, "input": input_path}), "runtime": runtime_settings(), **settings}


def teacher_dirs(teacher_dir: str | Sequence[str]) -> list:
    """The teacher folders `teacher_dir` gives: one, or an ensemble's list."""
    return list(teacher_dir) if isinstance(teacher_dir, (list, tuple)) else [teacher_dir]


def _resume() -> str:
    """The resume setting as the caller knows it: --resume, or pseudo_label's resume=True."""
    return option("--resume", "resume=True")


def check_resumable(output: Path, signature: dict) -> None:
    path = signature_path(output)
    if not path.exists():
        raise ResumeRefused(f"{output}: cannot resume: no record of the interrupted run's settings "
                           f"({path.name}); run without {_resume()}")
    saved = read_json(path)
    current = json.loads(json.dumps(signature))
    if saved != current:
        settings = {spec.name for spec in fields(PseudoLabelSettings)}
        changed = [named(PseudoLabelSettings, name, name) if name in settings else name
                   for name in changed_settings(saved, current)]  # --logits, as the user gave it
        raise ResumeRefused(f"{output}: cannot resume with different settings or data ({', '.join(changed)}); "
                           f"run without {_resume()}")


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # no glibc (macOS, musl): nothing to trim
        return None


def release_freed_memory() -> None:
    """Hand freed heap memory back to the OS after a chunk.

    glibc keeps big freed tensor buffers in its heap, so the resident size creeps up as new
    sentences bring new batch shapes: with the RT teacher, 1.22 GB after 20,000 lines untrimmed,
    1.0 GB trimmed, 853 MB after 1,000 (docs/distributed.md has the numbers and a hard cap).
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def chunks(items: Iterator, size: int) -> Iterator[list]:
    while chunk := list(itertools.islice(items, size)):
        yield chunk


def part_path(output: Path, rank: int, world: int) -> Path:
    """A rank's partial output: OUTPUT.part for one process, OUTPUT.rank<r>-of-<w>.part for several."""
    if world == 1:
        return output.with_name(output.name + ".part")
    return output.with_name(f"{output.name}.rank{rank}-of-{world}.part")


def rank_parts(output: Path) -> str:
    """The glob pattern of the parts a run under a launcher writes, whatever its number of processes."""
    return f"{glob.escape(output.name)}.rank*-of-*.part"


def written_beside(output: Path) -> list[str]:
    """Glob patterns of every name a run writes in the output's folder: the output, its parts (one per rank
    under a launcher) and their signature, and the hidden lock (`file_output`) and temporary files
    (`distill.io.atomic_path`)."""
    name = glob.escape(output.name)
    return [name, glob.escape(part_path(output, 0, 1).name), glob.escape(signature_path(output).name),
            rank_parts(output), f".{name}.*"]


def foreign_parts(output: Path) -> list[Path]:
    """Partial outputs left by a run with another number of processes than this one."""
    world = distributed.world_size()
    ours = {part_path(output, rank, world) for rank in range(world)}
    candidates = [part_path(output, 0, 1), *output.parent.glob(rank_parts(output))]
    return [part for part in candidates if part.exists() and part not in ours]


def check_partials_are_ours(output: Path) -> None:
    """A run appends to, deletes or replaces its partial outputs and their signature: never a file of such
    a name that pseudo-label did not write (a browser's partial download, notes), nor a link or anything but
    a file (`distill.io.check_target`), checked before anything is written. A partial output starts as every
    record does (an empty one: killed before its first record); a signature is our JSON."""
    world = distributed.world_size()
    signature = signature_path(output)
    parts = sorted({*(part_path(output, rank, world) for rank in range(world)), *foreign_parts(output)})
    for path in [*parts, signature]:
        check_target(path)
    for path in parts:
        if path.exists() and not _starts_as_a_record(path):
            raise _not_ours(path)
    if signature.exists() and not _is_signature(signature):
        raise _not_ours(signature)


def check_something_to_resume(output: Path) -> None:
    """`--resume` continues an interrupted run, which leaves its signature beside OUTPUT (and its parts once
    a chunk is written): with neither, there is nothing to continue (a mistyped OUTPUT, a finished run)."""
    world = distributed.world_size()
    left = [signature_path(output), *(part_path(output, rank, world) for rank in range(world)), *foreign_parts(output)]
    if any(path.exists() for path in left):
        return
    if output.exists():
        raise DistillError(f"{output}: nothing to resume (this run finished: no {part_path(output, 0, 1).name} "
                           f"or {signature_path(output).name} beside it); run without {_resume()} to label again")
    raise DistillError(f"{output}: nothing to resume (neither it nor {part_path(output, 0, 1).name} and "
                       f"{signature_path(output).name} exist); check the path, or run without {_resume()}")


def check_nothing_interrupted(output: Path) -> None:
    """A fresh run would start the partial output over: records an interrupted run labelled (hours of a served
    teacher's time, perhaps) are dropped only when asked, as a model's interrupted run is."""
    world = distributed.world_size()
    parts = [part for part in sorted({*(part_path(output, rank, world) for rank in range(world)),
                                      *foreign_parts(output)}) if _holds_a_record(part)]
    if parts:
        raise DistillError(f"{output}: an interrupted run left its labelled records in {parts[0].name}; continue it "
                           f"with {_resume()}, or start over with {named(Output, 'overwrite', 'overwrite=True')}")


def _holds_a_record(part: Path) -> bool:
    """Whether a partial output holds a complete record (one killed inside its first holds none to keep)."""
    if not part.is_file():
        return False
    with open(part, "rb") as handle:
        return any(b"\n" in block for block in iter(lambda: handle.read(1 << 16), b""))


def _is_signature(path: Path) -> bool:
    try:
        saved = read_json(path) if path.is_file() else None
    except DistillError:
        return False
    return isinstance(saved, dict) and {"inputs", "runtime"} <= set(saved)


def _starts_as_a_record(path: Path) -> bool:
    start = b'{"line": '  # json.dumps({"line": N, ...}), as every record is written
    if not path.is_file():
        return False
    with open(path, "rb") as handle:
        return start.startswith(handle.read(len(start)))


def _not_ours(path: Path) -> DistillError:
    return DistillError(f"{path}: exists and was not written by pseudo-label, which keeps a partial output or its "
                        f"signature under this name: move it, or choose another {option('--output', 'output_path')}")


def leave_nothing_unwritten(output: Path, part: Path) -> None:
    """A fresh run refused before it wrote a record leaves no part and no signature: nothing half-written.
    (One that wrote records keeps them for --resume, as an interrupted run does.)"""
    if part.is_file() and not part.is_symlink() and part.stat().st_size == 0:
        part.unlink()
        if distributed.world_size() == 1:  # under a launcher, another rank's part may hold records
            signature_path(output).unlink(missing_ok=True)


def rank_examples(input_path: str, task: str, chunk_size: int) -> Iterator[tuple[int, object]]:
    """This rank's (line, example) pairs: chunk k of the input belongs to rank k % world size."""
    rank, world = distributed.rank(), distributed.world_size()
    for index, item in enumerate(iter_unlabeled(input_path, task)):
        if (index // chunk_size) % world == rank:
            yield item


def merge_parts(parts: list[Path], output: Path) -> None:
    """Interleave the ranks' parts (each in input order) by input line into OUTPUT, streaming."""
    with contextlib.ExitStack() as stack:
        handles = [stack.enter_context(open(part, encoding="utf-8")) for part in parts]
        with atomic_path(output) as tmp, open(tmp, "w", encoding="utf-8") as out:
            out.writelines(heapq.merge(*handles, key=lambda record: json.loads(record)["line"]))
    for part in parts:
        part.unlink()


@dataclass
class PseudoLabelSettings:
    """How `pseudo_label` labels, as one settings group (`distill.settings`): ``nlp-train pseudo-label`` declares its
    options from it and records them in OUTPUT.config.yaml, which `distill.config.settings_from` reads back for
    ``pseudo_label(teacher, input, output, **dataclasses.asdict(settings))``."""

    batch_size: int = setting(64, low=1, help="Examples a teacher pass.")
    chunk_size: int = setting(1024, low=1, high=sys.maxsize, help="Examples read, labelled and written at a time "
                              "(memory stays flat); under torchrun, the unit dealt out to the processes.")
    min_confidence: float = setting(0.0, low=0, high=1, help="Drop examples whose teacher confidence (tagging: lowest "
                                    "word) is below this; one that drops every example is refused, nothing written.")
    with_logits: bool = setting(False, option="--logits", help="Include the teacher's raw logits.")
    cache_dir: str | None = setting(None, **CACHE_DIR_OPTION)
    use_cache: bool = setting(True, option="--no-cache", negated=True, help="Run the teacher over every example, "
                              "reading and storing no cached logits (e.g. to time it).")
    head: str | None = setting(None, help="A multi-task teacher's head to label with (default: every head, from one "
                               "encoder pass, each under `heads` in the record).")
    use_export: str | None = setting(None, path="dir", help="An ONNX export of --teacher (made with --check-data): run "
                                     "the teacher pass with it where its card's speed measurement, taken on this CPU "
                                     "model with these threads, says it is faster than the PyTorch teacher, else with "
                                     "the teacher; one line says which and why (docs/export.md).")
    teacher_weights: Sequence[float] | None = setting(None, **TEACHER_WEIGHTS_OPTION)


def pseudo_label(teacher_dir: str | Sequence[str], input_path: str, output_path: str, batch_size: int = 64,
                 chunk_size: int = 1024, min_confidence: float = 0.0, with_logits: bool = False,
                 resume: bool = False, progress: bool = True, device: str = "auto", overwrite: bool = False,
                 cache_dir: str | None = None, use_cache: bool = True, head: str | None = None,
                 use_export: str | None = None, teacher_weights: Sequence[float] | None = None) -> dict:
    """Write one JSONL record per kept input example: input line, text/tokens, label(s), confidence.

    A list of teacher folders is an ensemble: an example's label(s) and confidence are those of the weighted
    mean of the teachers' distributions (`teacher_weights`, normalised; None: equal), and ``logits`` its log
    (`distill.ensemble.ensemble_logits` at T = 1), as `kd` with the same teachers takes its pseudo-labels;
    each teacher's logits are cached on its own, and ``cached`` counts (teacher, example) pairs.

    A multi-task teacher labels with head `head`, or without it with every head from one encoder
    pass: the record holds each head's label(s) and confidence under ``heads``
    (`distill.models.multitask.head_records`).

    The teacher's logits go to (and come from) the content-keyed cache in `cache_dir`
    (`distill.cache`), so `kd --unlabeled` on this output does not run the teacher over it again;
    without `use_cache` the teacher runs over every example and nothing is stored (to time it).
    Under a launcher each rank labels its chunks into its own part file (resumable on its own);
    rank 0 merges the parts in input order into OUTPUT once all ranks are done.

    Returns counts of the whole output, so they add up to the input after a resume too: ``read``
    (input examples), ``written`` (records) and ``skipped_low_confidence``, of which ``resumed``
    examples were labelled by the interrupted run (up to input line ``resumed_after_line``); ``cached``,
    ``seconds`` and ``examples_per_second`` are this run's. An ONNX export as the teacher adds
    ``teacher_export`` (`OnnxModel.teacher_record`: its content's fingerprint and its agreement record
    from its card), which the resume signature holds too.

    With `use_export` (an ONNX export of `teacher_dir`) the teacher pass runs the export where its card's speed
    measurement, taken on this CPU model with these threads, says it is faster than the PyTorch teacher, else the
    teacher (`distill.export_speed.choose_teacher_pass`); one log line says which and why, and ``teacher_pass``
    in the result records it.
    """
    require_whole(named(PseudoLabelSettings, "batch_size", "batch_size"), batch_size)
    # a chunk is a slice of the input's lines (itertools.islice): at most sys.maxsize, the whole file in one
    require_whole(named(PseudoLabelSettings, "chunk_size", "chunk_size"), chunk_size, high=sys.maxsize)
    if not 0.0 <= min_confidence <= 1.0:
        raise DistillError(f"{named(PseudoLabelSettings, 'min_confidence', 'min_confidence')} must be within [0, 1], got "
                           f"{min_confidence}")
    if resume and overwrite:
        raise DistillError(f"{_resume()} continues the interrupted run and {named(Output, 'overwrite', 'overwrite=True')} "
                           "starts over: give one of them")
    if not use_cache and cache_dir not in (None, ""):
        raise DistillError(f"{named(PseudoLabelSettings, 'use_cache', 'use_cache=False')} reads and stores no cached logits: give it or "
                           f"a cache folder ({named(PseudoLabelSettings, 'cache_dir', 'cache_dir')}), not both")
    if input_path == "-":
        raise DistillError("pseudo-label reads a file, not stdin (it reads it twice, and resumes by its lines): "
                           "save the text to a file and give that")
    folders = teacher_dirs(teacher_dir)
    for folder in folders:  # the teacher-kind table, before an output is set up
        require_kind(folder, "pseudo-label")
    check_distinct_teachers(folders, [str(folder) for folder in folders])
    refuse_unasked(folders)
    weights = ensemble_weights(teacher_weights, len(folders))
    if weights and (use_export is not None or head is not None):
        dropped = named(PseudoLabelSettings, "use_export", "use_export") if use_export is not None else \
            named(PseudoLabelSettings, "head", "head")
        raise DistillError(f"an ensemble labels with each of its single-task teachers as they are: drop {dropped}, or "
                           "give one teacher")
    check_partials_are_ours(Path(output_path))
    if resume:
        check_something_to_resume(Path(output_path))
    elif not overwrite:
        check_nothing_interrupted(Path(output_path))
    if use_cache:  # the default cache too
        check_cache_beside(cache_dir, output_path, written_beside(Path(output_path)))
        check_cache_dir(cache_dir)
    with file_output(output_path, [*folders, input_path, *([use_export] if use_export else [])], overwrite,
                     is_pseudo_label_output, "pseudo-label output", replace_earlier=False,
                     beside_model=False) as output:
        return label_into(output, teacher_dir, input_path, batch_size, chunk_size, min_confidence, with_logits,
                          resume, progress, device, cache_dir, use_cache, head, use_export, weights)


def logit_stores(teacher: LabelModel, cache_dir: str | None, use_cache: bool) -> dict[str, LogitStore] | None:
    """The caches the teacher's logits come from and go to: one per head of a multi-task teacher (by its
    name), else the teacher's own (under ""); None without `use_cache`."""
    if not use_cache:
        return None
    if isinstance(teacher, MultiTaskTeacher):
        return {name: LogitStore(teacher, cache_dir, teacher.head_fingerprint(name)) for name in teacher.names}
    return {"": LogitStore(teacher, cache_dir)}


def read_by_teacher(examples: list, stores: dict[str, LogitStore] | None, counted: set[bytes]) -> list:
    """Those of `examples` that the teacher reads in this run (`chunk_labeller`): with a cache, each text that
    the cache lacks (for a multi-task teacher, that any head's cache lacks) once, as the first chunk to hold
    it adds it to the cache (`counted` keeps the keys of those already counted); without, every one."""
    if stores is None:
        return examples
    read = []
    for example in examples:
        key = example_key(example)
        if key not in counted and not all(store.holds(key) for store in stores.values()):
            counted.add(key)
            read.append(example)
    return read


def chunk_labeller(teacher: LabelModel, stores: dict[str, LogitStore] | None, batch_size: int,
                   with_logits: bool) -> Callable[[list], tuple[list[dict], int]]:
    """examples -> (their records, how many came from the cache): every head at once for a multi-task
    teacher (one encoder pass, a cache per head), else the one teacher's (`logit_stores`)."""
    if isinstance(teacher, MultiTaskTeacher):

        def label_all_heads(examples: list) -> tuple[list[dict], int]:
            results, cached = all_head_logits(teacher, examples, stores, batch_size)
            return head_records(teacher, examples, results, with_logits, exact=True), cached
        return label_all_heads
    store = None if stores is None else stores[""]
    # a served teacher's answers go to the cache a batch at a time: a killed run asks none of them again
    part = batch_size if hasattr(teacher, "announce") and store is not None else None

    def label(examples: list) -> tuple[list[dict], int]:
        scored = [teacher_logits(teacher, examples[start:start + (part or len(examples))], store, batch_size,
                                 across_ranks=False) for start in range(0, len(examples), part or len(examples))]
        results = ExampleLogits.from_examples([logits.example(row) for logits, _ in scored for row in range(len(logits))])
        records = prediction_records(teacher, examples, with_logits=with_logits, results=results, exact=True)
        return list(records), sum(cached for _, cached in scored)
    return label


def ensemble_labeller(teachers: list[LabelModel], stores: list[dict[str, LogitStore] | None],
                      weights: list[float], batch_size: int, with_logits: bool
                      ) -> Callable[[list], tuple[list[dict], int]]:
    """examples -> (their records, how many teacher logits came from the cache): labelled by the ensemble's
    distribution at T = 1 (`ensemble_logits`), in the first teacher's label order, each teacher's logits
    cached on its own (`logit_stores`)."""
    labels = [teacher.hierarchy.labels for teacher in teachers]

    def label(examples: list) -> tuple[list[dict], int]:
        scored = [teacher_logits(teacher, examples, None if store is None else store[""], batch_size,
                                 across_ranks=False) for teacher, store in zip(teachers, stores)]
        results = ensemble_logits([results for results, _ in scored], labels, weights, 1.0)
        records = prediction_records(teachers[0], examples, with_logits=with_logits, results=results, exact=True)
        return list(records), sum(cached for _, cached in scored)
    return label


def label_into(output: Path, teacher_dir: str | Sequence[str], input_path: str, batch_size: int, chunk_size: int,
               min_confidence: float, with_logits: bool, resume: bool, progress: bool, device: str,
               cache_dir: str | None, use_cache: bool, head: str | None, use_export: str | None = None,
               weights: list[float] | None = None) -> dict:
    folders = teacher_dirs(teacher_dir)
    chosen = {}
    if use_export is not None:  # the PyTorch teacher or its export, whichever was measured faster here
        from distill.export_speed import choose_teacher_pass, logger
        loaded, choice = choose_teacher_pass(teacher_dir, use_export, device)
        if distributed.is_main():
            logger.warning(choice.pop("line"))
        else:
            choice.pop("line")
        chosen = {"teacher_pass": choice}
    teachers = [load_teacher(loaded if use_export is not None else folders[0], head, device),
                *(load_teacher(folder, None, device) for folder in folders[1:])]
    teacher = teachers[0]
    if weights:
        check_ensemble(teachers, [str(folder) for folder in folders])
        crf = next((folder for folder, model in zip(folders, teachers) if model_crf(model) is not None), None)
        if crf is not None:
            raise DistillError(f"{crf}: is a CRF tagger, whose labels are Viterbi paths: an ensemble labels by its "
                               "teachers' mean distribution per word; leave it out of the ensemble")
    all_stores = [logit_stores(model, cache_dir, use_cache) for model in teachers]
    label = ensemble_labeller(teachers, all_stores, weights, batch_size, with_logits) if weights else \
        chunk_labeller(teacher, all_stores[0], batch_size, with_logits)
    part = part_path(output, distributed.rank(), distributed.world_size())
    # the head only when given, and an ONNX teacher's record (its content and agreement) only for one, so a
    # single-task PyTorch run's signature is what it always was
    export = {"teacher_export": teacher.teacher_record()} if is_onnx_export(teacher) else {}
    signature = run_signature(teacher_dir, input_path, min_confidence=min_confidence, with_logits=with_logits,
                              batch_size=batch_size, chunk_size=chunk_size,
                              **({"head": head} if head is not None else {}), **export,
                              **({"teacher_weights": weights} if weights else {}))
    foreign = foreign_parts(output)
    if resume and foreign:
        raise DistillError(f"{foreign[0]}: cannot resume: written by a run with another number of processes; "
                           f"resume with that number, or run without {_resume()}")
    world = distributed.world_size()
    # nothing of this run written yet (killed before its first chunk, or never run): start afresh
    resume = resume and any(part_path(output, r, world).exists() for r in range(world))
    if resume:
        check_resumable(output, signature)
    done, kept = recover_partial(part) if resume else (0, 0)
    boundary = last_whole_chunk(input_path, teacher.task, chunk_size, done) if done else 0
    if boundary < done:
        done, kept = recover_partial(part, through=boundary)
    total = already = 0
    readers = [classification_reader(model) for model in teachers]
    counted, read = [Truncation() for _ in teachers], [set() for _ in teachers]
    costs = [[0, 0] if hasattr(model, "announce") else None for model in teachers]  # a served teacher's requests
    # the whole file up front: validated, what is done counted, what each teacher cuts of the texts it reads in
    # this run measured (not those an interrupted run labelled, nor those whose logits the cache holds)
    for chunk in chunks(rank_examples(input_path, teacher.task, chunk_size), chunk_size):
        total, already = total + len(chunk), already + sum(number <= done for number, _ in chunk)
        for number, (reader, stores, cost) in enumerate(zip(readers, all_stores, costs)):
            if reader is not None or cost is not None:
                todo = read_by_teacher([example for line, example in chunk if line > done], stores, read[number])
                counted[number] += count_truncation(reader, todo) if todo and reader else Truncation()
                if cost is not None and todo:
                    cost[:] = [sum(pair) for pair in zip(cost, teachers[number].cost(todo))]
    del read
    for model, cost in zip(teachers, costs):
        if cost is not None:  # before the first request, for the whole run
            model.announce(*cost, whole_run=True)
    if kept != already and not min_confidence:  # without a confidence filter every line done has its record
        raise DistillError(f"{part}: cannot resume: the partial output holds {kept:,} records for the {already:,} "
                           f"input lines it covers (records were removed or added); run without {_resume()}")
    for model, cut in zip(teachers, counted):
        warn_truncation(model, sum(distributed.all_gather_objects(cut), Truncation()), input_path)
    if not resume:
        for stale in [part, *foreign]:
            stale.unlink(missing_ok=True)
        if distributed.is_main():
            write_json(signature_path(output), signature)
    stream = ((n, x) for n, x in rank_examples(input_path, teacher.task, chunk_size) if n > done)
    counts = {"read": 0, "written": 0, "skipped_low_confidence": 0, "cached": 0}
    most_confident = 0.0  # of this run's records: what the refusal of an empty output names
    started = time.perf_counter()
    bar = progress_bar(total=total, initial=already, desc="pseudo-label", unit="ex",
                       disable=not (progress and distributed.is_main()))
    try:
        with appending(part) as out:
            for chunk in chunks(stream, chunk_size):
                numbers, examples = [n for n, _ in chunk], [x for _, x in chunk]
                records, cached = label(examples)
                counts["cached"] += cached
                lines = []
                for number, record in zip(numbers, records):
                    most_confident = max(most_confident, record["confidence"])
                    if record["confidence"] < min_confidence:  # the exact confidence, as kd filters on
                        counts["skipped_low_confidence"] += 1
                        continue
                    lines.append(json.dumps({"line": number, **rounded(record)}, ensure_ascii=False) + "\n")
                out.write("".join(lines))
                out.flush()
                os.fsync(out.fileno())
                counts["read"] += len(chunk)
                counts["written"] += len(lines)
                bar.update(len(chunk))
                release_freed_memory()
    except DistillError:
        if not resume:
            leave_nothing_unwritten(output, part)
        raise
    bar.close()
    per_rank = distributed.all_gather_objects({**counts, "resumed_after_line": done, "part": part,
                                               "resumed": already, "resumed_written": kept,
                                               "most_confident": most_confident})
    if min_confidence and not sum(r["written"] + r["resumed_written"] for r in per_rank):
        part.unlink(missing_ok=True)  # an empty output would only fail later, in kd or whatever reads it
        distributed.barrier()
        if distributed.is_main():
            signature_path(output).unlink(missing_ok=True)
        top = max(r["most_confident"] for r in per_rank)
        raise DistillError(f"{output}: not written: no example reached "
                           f"{named(PseudoLabelSettings, 'min_confidence', 'min_confidence')} {min_confidence:g} "
                           f"(the teacher's most confident was {top:.4f}); lower it")
    if distributed.world_size() == 1:
        with writing(output):
            os.replace(part, output)
    elif distributed.is_main():
        merge_parts([r["part"] for r in per_rank], output)
    if distributed.is_main():
        signature_path(output).unlink(missing_ok=True)
    distributed.barrier()  # every rank returns once OUTPUT is complete
    totals = {key: sum(r[key] for r in per_rank) for key in (*counts, "resumed", "resumed_written")}
    # every input line up to here was labelled before this run, whichever rank it belongs to
    totals["resumed_after_line"] = min(r["resumed_after_line"] for r in per_rank)
    seconds = time.perf_counter() - started
    speed = round(totals["read"] / seconds, 1) if seconds else None  # of what this run labelled
    # the whole output: what an interrupted run had labelled and written (`resumed`) and this run's
    earlier = totals.pop("resumed_written")
    totals["read"] += totals["resumed"]
    totals["written"] += earlier
    totals["skipped_low_confidence"] += totals["resumed"] - earlier
    return {**totals, "seconds": round(seconds, 2), "examples_per_second": speed, **export, **chosen}
