"""Evaluate a model directory on labelled data; predict labels for unlabeled text."""

from __future__ import annotations

import json
import os
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import TextIO

from distill import distributed
from distill.data import DataOptions, check_columns_read, iter_unlabeled, read_split, unlabeled_text
from distill.errors import DataError, DistillError, option
from distill.inference import evaluate, prediction_records
from distill.io import real_path, write_json
from distill.labels import check_labels_known
from distill.models import load_model
from distill.models.kinds import refuse_unasked, require_kind
from distill.models.base import LabelModel
from distill.models.card import MULTITASK_KIND
from distill.outputs import file_output, written_by_distill
from distill.provenance import warn_if_learnt_from
from distill.truncation import warn_if_truncated


def _same_source(recorded: object, given: str | Path) -> bool:
    """Whether a recorded model or data path names what `given` does (a local path from any folder; hub:NAME)."""
    return isinstance(recorded, str) and (recorded == str(given) or real_path(recorded) == real_path(given))


def is_metrics_file(path: Path, model_dir: str | Path, head: str | None = None, data: str | Path | None = None) -> bool:
    """Whether `path` is an earlier `evaluate` result of the model in `model_dir` (of its head `head`; on `data`,
    where given), so a rerun may replace it without --overwrite, as computed again; another model's, head's or
    data's result (dev metrics, then test's to the same file) is not this run's to replace."""
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.loads(handle.read(1 << 20))  # metrics are small: a big file is not one
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(record, dict) and {"model", "data", "examples"} <= set(record) \
        and _same_source(record["model"], model_dir) and record.get("head") == head \
        and (data is None or _same_source(record["data"], data))


def load_with_head(model_dir: str | Path, head: str | None, device: str) -> LabelModel:
    """The model of `model_dir`, or its head `head` (a multi-task teacher's). The multi-task module, which
    reads transformers, is imported for a head alone: a word student is scored without transformers."""
    model = load_model(model_dir, device=device)
    if head is None:
        return model
    from distill.models.multitask import with_head
    return with_head(model, head, str(model_dir))


def require_head(model_dir: str | Path, card: dict, head: str | None) -> None:
    """A multi-task teacher is scored one head at a time (labelled data has one task's labels): refused without
    `head`, by every command that scores one (evaluate, compare)."""
    if card["kind"] == MULTITASK_KIND and head is None:
        raise DistillError(f"{model_dir}: a multi-task teacher is scored one head at a time (the data has one "
                           f"task's labels): give {option('--head', 'head=')}, one of "
                           f"{', '.join(card.get('heads', {}))}")


def evaluate_model(model_dir: str, data_path: str, data: DataOptions = DataOptions(),
                   output: str | None = None, batch_size: int = 64, progress: bool = True,
                   device: str = "auto", overwrite: bool = False, head: str | None = None) -> dict:
    """Score a model (a multi-task teacher: its head `head`) on labelled data; writes the metrics JSON to
    `output` (default: MODEL_DIR/eval_metrics.json, or eval_metrics.HEAD.json for a head, in a model directory
    distill wrote; none for a folder it did not write or hub:NAME, whose metrics are only returned)."""
    card = require_kind(model_dir, "evaluate")  # a wrong model path is reported as such before an output is set up
    refuse_unasked([model_dir])
    require_head(model_dir, card, head)
    if output is None and written_by_distill(model_dir):  # beside the model: a read-only folder needs --output
        output = Path(model_dir) / ("eval_metrics.json" if head is None else f"eval_metrics.{head}.json")
        if not os.access(model_dir, os.W_OK | os.X_OK):
            raise DistillError(f"{output}: not writable: evaluate writes its metrics beside the model unless "
                               f"{option('--output', 'output=')} names another file (the model folder is read-only "
                               "for this user)")
    # else a folder distill did not write (a transformers classifier's, hub:NAME) is an input only: the metrics
    # are returned (printed by the CLI) and written only where --output names a file
    written = file_output(output, [model_dir, data_path], overwrite, lambda path: is_metrics_file(
        path, model_dir, head, data_path), f"an evaluate result of {model_dir} on {data_path}",
        beside_model=model_dir) if output is not None else nullcontext()
    with written as path:
        model = load_with_head(model_dir, head, device)
        check_columns_read(model.task, data)  # a column option the task's reader ignores did nothing
        examples, gold = read_split(data_path, model.task, data)
        check_labels_known(data_path, model.hierarchy, model.task, gold)
        warn_if_truncated(model, examples, data_path)
        role = warn_if_learnt_from(model_dir, data_path, examples)
        metrics = evaluate(model, examples, gold, batch_size, progress)
        result = {"model": str(model_dir), **({"head": head} if head is not None else {}), "data": data_path,
                  **({"learnt_from": role} if role else {}), "examples": len(examples), **metrics}
        if path is not None and distributed.is_main():
            write_json(path, result)
        return result


def stdin_text() -> str:
    """All of stdin, as strictly UTF-8 as a file is read: a stray byte is an error, never a silent U+FFFD."""
    binary = getattr(sys.stdin, "buffer", None)
    if binary is None:  # a text stream put in place of stdin (tests, notebooks)
        return sys.stdin.read()
    raw = binary.read()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DataError("stdin", f"not UTF-8 text (byte {raw[error.start]:#04x})",
                        raw[:error.start].count(b"\n") + 1) from None


def predict_file(model_dir: str, input_path: str | None, out: TextIO = sys.stdout,
                 batch_size: int = 64, with_logits: bool = False, device: str = "auto",
                 head: str | None = None) -> int:
    """Predict for a file (or stdin: one example per line, or JSON lines) and write JSONL; a multi-task teacher
    predicts with head `head`, or with all heads from one encoder pass (`head_records`)."""
    require_kind(model_dir, "predict")
    refuse_unasked([model_dir])
    model = load_with_head(model_dir, head, device)
    if input_path is None or input_path == "-":
        examples = unlabeled_text(stdin_text(), model.task)  # lines or JSON lines, checked as a file's are
        if not examples:
            raise DistillError("stdin: no input lines")
    else:
        examples = [example for _, example in iter_unlabeled(input_path, model.task)]  # no `datasets` to import
    warn_if_truncated(model, examples, "stdin" if input_path in (None, "-") else input_path)
    count = 0
    if getattr(model, "kind", None) == MULTITASK_KIND:  # an ONNX export has no kind: it is never multi-task
        from distill.models.multitask import head_records, predict_heads
        records = head_records(model, examples, predict_heads(model, examples, batch_size), with_logits)
    else:
        records = prediction_records(model, examples, batch_size, with_logits=with_logits)
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        count += 1
    return count
