"""Models: the transformer teacher and the small students. None of them knows about distillation."""

from __future__ import annotations

import json
from pathlib import Path

from distill.errors import DistillError
from distill.io import real_path
from distill.models.base import LabelModel, pick_device
from distill.models.card import MODEL_CARD, MULTITASK_KIND, read_model_card, verify_model_files

__all__ = ["MODEL_CARD", "is_onnx_export", "load_model", "load_teacher", "model_card", "read_model_card"]


def refuse_blank(directory: str | Path) -> None:
    """'' (or blanks) names no model, though as a path it is the current folder: a model read from wherever the
    caller happens to be, which `nlp-train` refuses as an argument and `save_pretrained` as its output."""
    if isinstance(directory, str) and not directory.strip():
        raise DistillError(f"model directory {directory!r}: an empty or blank path names no folder (as a path, '' is "
                           "the current folder): give the model's directory")


def model_card(directory: str | Path) -> dict:
    """The model card of `directory` (`read_model_card`), or for a transformers classifier, which has none
    (`distill.models.hub_teacher`), what one would say of it: a teacher of the task its config's architecture
    names (a model that is no classifier is refused here); for a causal language model's folder or a served
    model (``openai:MODEL``), a teacher that classifies by a prompt. Its kind's entry in `distill.models.kinds` says
    which commands take it."""
    from distill.models.causal_lm import is_causal_lm_source
    from distill.models.hub_files import is_transformers_source
    from distill.models.hub_teacher import source_task
    from distill.models.prompt import is_served
    refuse_blank(directory)
    if is_served(directory):  # a language model behind an endpoint (distill.models.served)
        return {"kind": "teacher", "model": "served", "task": "classification"}
    if is_causal_lm_source(directory):  # a zero- or few-shot teacher (distill.models.causal_lm)
        return {"kind": "teacher", "model": "causal-lm", "task": "classification"}
    if is_transformers_source(directory):
        return {"kind": "teacher", "model": "transformers", "task": source_task(directory)}
    return read_model_card(directory)


def load_model(directory: str | Path, expect: str | None = None, device: str = "cpu",
               pytorch: bool = False) -> LabelModel:
    """Load a model directory onto `device`; `expect` (a card kind: 'teacher', 'multitask-teacher', 'student')
    rejects the other kinds, `pytorch` an ONNX export (which `predict`, `evaluate` and `compare` run).
    A folder of a transformers sequence or token classifier (no model card; `save_pretrained` of
    ``AutoModelForSequenceClassification`` and its tokenizer), or ``hub:NAME``, loads as a teacher
    (`distill.models.hub_teacher`); so does a causal language model's folder (`distill.models.causal_lm`) or a
    served model, ``openai:MODEL`` (`distill.models.served`), asked the prompt of `distill.models.prompt`."""
    return _load(directory, expect, pytorch).to(pick_device(device))


def load_teacher(directory: str | Path, head: str | None = None, device: str = "cpu") -> LabelModel:
    """A model directory as the teacher of a distillation stage or of `pseudo-label`: a teacher, a
    multi-task teacher (with `head`: that head alone), or a trained student (a teacher-assistant chain:
    teacher -> transformer student -> BiLSTM), or an ONNX export of either (fp32 or int8, run by ONNX Runtime
    on the CPU, keyed in the logit cache by its files' content: `distill.models.onnx`; what it agreed with its
    source on is logged once here)."""
    from distill.models.multitask import with_head
    model = with_head(_load(directory, None).to(pick_device(device)), head, str(directory))
    from distill import distributed
    if is_onnx_export(model) and distributed.is_main():  # said once, under a launcher too
        from distill.models.onnx import agreement_line, logger
        logger.warning(agreement_line(model, directory))
    return model


def is_onnx_export(model) -> bool:
    """Whether `model` is an exported ONNX model (`distill.models.onnx.OnnxModel`), without importing it."""
    card = getattr(model, "card", None)
    return isinstance(card, dict) and card.get("format") == "onnx"


def _load(directory: str | Path, expect: str | None, pytorch: bool = False) -> LabelModel:
    from distill.models.hub_files import is_transformers_source
    from distill.models.prompt import is_served
    refuse_blank(directory)
    if is_served(directory) or is_transformers_source(directory):
        if expect not in (None, "teacher"):
            raise DistillError(f"{directory}: is a transformers model or a served one (a teacher), expected a {expect}")
        from distill.models.causal_lm import is_causal_lm_source, load_causal_lm_teacher
        from distill.models.served import load_served_teacher
        if is_served(directory):  # openai:MODEL, systemone:MODEL (distill.models.served)
            return load_served_teacher(str(directory))
        if is_causal_lm_source(directory):  # a zero- or few-shot teacher (distill.models.causal_lm)
            return load_causal_lm_teacher(directory)
        from distill.models.hub_teacher import load_transformers_teacher
        return load_transformers_teacher(directory)
    card = read_model_card(directory)
    if expect is not None and card["kind"] != expect:
        raise DistillError(f"{directory}: is a {card['kind']} directory, expected a {expect}")
    if (expect is not None or pytorch) and card.get("format") == "onnx":
        raise DistillError(f"{directory}: is an exported ONNX model, which predict, evaluate and compare run; "
                           f"give the PyTorch {expect or 'model'} directory it was exported from")
    verify_model_files(directory, card)
    try:
        from huggingface_hub.errors import StrictDataclassError  # transformers' config checks (recent versions)
    except ImportError:
        StrictDataclassError = TypeError
    try:
        model = model_from_card(directory, card)
        model.loaded_from = str(real_path(directory))
        _check_card_describes(directory, card, model)
        return model
    except (KeyError, TypeError, ValueError, AttributeError, StrictDataclassError) as error:  # verified, not a model
        detail = " ".join(f"{type(error).__name__}: {error}".split())[:300]
        raise DistillError(f"{directory}: its files do not make a model ({detail}); they were edited after it was "
                           "saved: restore it from a good copy or retrain") from None


def _check_card_describes(directory: str | Path, card: dict, model: LabelModel) -> None:
    """The card's task and labels (a multi-task teacher's: each head's) are the loaded model's: the card holds no
    checksum of itself, and what it says of them goes unread by loading (the model's own checked files decide) but
    is copied into an export's card, its README and the heads commands name. One edited (the labels reordered,
    another task, a head renamed) is refused here, not passed on."""
    hierarchy = getattr(model, "hierarchy", None)
    if "task" in card and card["task"] != model.task:
        found = f"task {card['task']!r}, the model's is {model.task!r}"
    elif card.get("kind") == MULTITASK_KIND and "heads" in card and card["heads"] != model.card_heads():
        found = _heads_differ(card["heads"], model.card_heads())
    elif card.get("kind") == "student" and "class" in card and card.get("model") != _registered_name(model, card):
        found = f"model {card.get('model')!r}, the model's config is of {_registered_name(model, card)!r}"
    elif "labels" in card and hierarchy is not None and card["labels"] != list(hierarchy.labels):
        found = f"labels {json.dumps(card['labels'])[:60]}, the model's are {json.dumps(list(hierarchy.labels))[:60]}"
    else:
        return
    raise DistillError(f"{Path(directory) / MODEL_CARD}: names the {found} (the card was edited after the model was "
                       "saved); restore the card from a good copy or retrain")


def _registered_name(model: LabelModel, card: dict) -> str | None:
    """The registered student name the loaded model's own (checked) config gives, else the card's (an export,
    which keeps no student config of its own): what a student's card names as its ``model``."""
    return getattr(getattr(model, "config", None), "model", card.get("model"))


def _heads_differ(written: object, heads: dict[str, dict]) -> str:
    """How a multi-task card's `written` heads differ from the model's `heads`, for a message: their names, or the
    first head described otherwise."""
    if not isinstance(written, dict):
        return f"heads as {json.dumps(written)[:60]}, not each head's task and labels (the model's: {', '.join(heads)})"
    if list(written) != list(heads):
        return f"heads {json.dumps(list(written))[:60]}, the model's are {json.dumps(list(heads))[:60]}"
    name = next(name for name in heads if written[name] != heads[name])
    return f"head {name!r} as {json.dumps(written[name])[:80]}, the model's is {json.dumps(heads[name])[:80]}"


def model_from_card(directory: str | Path, card: dict) -> LabelModel:
    """The model of `directory` as `card` describes it, its files unchecked (`load_model` checks them;
    `nlp-train export` measures an export before its card is written)."""
    if card.get("format") == "transformers":  # `nlp-train export --format transformers`: a stock classifier
        if card["kind"] == "multitask-teacher":
            heads = ", ".join(card.get("heads", {}))
            raise DistillError(f"{directory}: holds one transformers model per head ({heads}); load a head's "
                               "folder, DIR/HEAD")
        from distill.models.hub_teacher import load_transformers_teacher
        return load_transformers_teacher(directory)
    if card.get("format") == "onnx":  # `nlp-train export`: run by ONNX Runtime, see distill/models/onnx.py
        from distill.models.onnx import OnnxModel
        return OnnxModel(directory, card)
    if card["kind"] == "teacher":
        return teacher_class(card).from_checkpoint(directory, card)
    if card["kind"] == "multitask-teacher":
        from distill.models.multitask import MultiTaskTeacher
        return MultiTaskTeacher.from_checkpoint(directory, card)
    return student_class(directory, card).from_checkpoint(directory, card)


def teacher_class(card: dict) -> type:
    """The teacher class a teacher's card names: the fine-tuned `Teacher`, or the zero-shot teacher
    (`distill.models.zero_shot`), whose head reads normalised features."""
    from distill.models.zero_shot import CARD_MODEL, ZeroShotTeacher
    if card.get("model") == CARD_MODEL:
        return ZeroShotTeacher
    from distill.models.teacher import Teacher
    return Teacher


def student_class(directory: str | Path, card: dict) -> type:
    """The student class a model card names (by registered name, recorded class, or old class name)."""
    from distill.models.registry import entry_of_saved
    try:
        return entry_of_saved(str(card.get("model")), card.get("class")).cls
    except DistillError as err:
        raise DistillError(f"{directory}: {err}") from None
