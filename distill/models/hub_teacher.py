"""A Hugging Face classifier as a teacher: a folder that `save_pretrained` wrote for an
``AutoModelForSequenceClassification`` or ``AutoModelForTokenClassification`` model and its tokenizer
(or such a model on the hub, ``hub:NAME``), used as it is.

The task comes from the config's architecture, the labels from its ``id2label``. The model reads
text as our own teacher does (`distill.features`): a text to classify truncated to the model's
length, a sentence to tag in windows at word boundaries, each word scored at its first sub-token.
It has no model card: its fingerprint (which keys the logit cache and a run's resume signature)
is the sha256 of the files it is loaded from. Weights are read from safetensors only, never
unpickled. It is an input only: `save_pretrained` refuses it.

Nothing here imports `transformers` until a model is loaded, so telling whether a folder holds
such a model (`is_transformers_source`) costs a JSON read.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from distill import distributed
from distill.errors import DistillError
from distill.io import real_path
from distill.labels import LabelHierarchy, scheme_of_labels
from distill.models.base import LabelModel, ReadsSubWords
from distill.models.hub_files import (CONFIG_FILE, EXPLICIT_WEIGHTS, PICKLED_WEIGHTS, SAFE_INDEX, SAFE_WEIGHTS,
                                      TOKENIZER_FILES, files_fingerprint, folder_config, is_transformers_source,
                                      load_tokenizer, load_whole_model, local_folder, model_files, named_weights,
                                      require_tokens_fit, require_vocabulary, require_whole_wordpiece)

logger = logging.getLogger("distill")

TASKS = {"ForSequenceClassification": "classification", "ForTokenClassification": "tagging"}
GENERIC_LABEL = re.compile(r"LABEL_\d+")
CAUSAL_LM_SUFFIXES = ("ForCausalLM", "LMHeadModel")
EXPECTED = "a transformers sequence or token classifier (...ForSequenceClassification or ...ForTokenClassification)"


def source_task(source: str | Path) -> str:
    """The task of the classifier `source` names (its config's architecture); anything else is refused."""
    folder = local_folder(source)
    config = folder_config(folder)
    if config is None:
        raise DistillError(f"{source}: {CONFIG_FILE} is not a JSON object, so it is not a transformers model")
    return classifier_kind(source, config)[0]


def _what(architecture: str) -> str:
    """What a model of `architecture` is, for a refusal."""
    if architecture.endswith("ForMaskedLM"):
        return "a masked language model"
    if architecture.endswith("Model"):
        return "a bare encoder, with no classification head"
    return "not a sequence or token classifier"


def classifier_kind(source: str | Path, config: dict) -> tuple[str, type]:
    """(task, the class that loads it) of the classifier a transformers config describes: a transformers auto
    class, or distill's own head class for a folder distill exported with it (built from distill's package,
    never from the folder's copy of its file); anything else is refused."""
    import transformers
    from transformers.models.auto import modeling_auto
    from distill.models.modeling_distill import MODEL_TYPE, DistillTeacherConfig, DistillTeacherForSequenceClassification
    architectures = config.get("architectures") or []
    model_type = config.get("model_type")
    if not architectures:
        raise DistillError(f"{source}: its {CONFIG_FILE} names no architecture, so the head it was saved with is "
                           f"unknown; distill takes {EXPECTED}")
    architecture = architectures[0]
    if architecture == DistillTeacherForSequenceClassification.__name__ and model_type in (MODEL_TYPE, "distilbert"):
        # (an export before its model type of its own was DistilBERT's); its config class known here, from distill's
        # package, so that reading the folder's config (its tokenizer's choice) runs none of the folder's code
        transformers.AutoConfig.register(MODEL_TYPE, DistillTeacherConfig, exist_ok=True)
        return "classification", DistillTeacherForSequenceClassification
    if architecture.endswith(CAUSAL_LM_SUFFIXES):  # else a causal LM teacher (`distill.models.causal_lm`) took it
        raise DistillError(f"{source}: is a {architecture}, a causal language model of a class transformers does not "
                           f"build for model type {model_type!r} (custom code, which distill never runs, or a "
                           f"{CONFIG_FILE} without its model_type); distill takes a causal language model that "
                           f"transformers builds itself, or {EXPECTED}")
    suffix = next((suffix for suffix in TASKS if architecture.endswith(suffix)), None)
    if suffix is None:
        raise DistillError(f"{source}: is a {architecture} ({_what(architecture)}); distill takes {EXPECTED}")
    task = TASKS[suffix]
    mapping = (modeling_auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES if task == "classification"
               else modeling_auto.MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES)
    if mapping.get(model_type) != architecture:
        raise DistillError(f"{source}: is a {architecture}, which transformers does not build for model type "
                           f"{model_type!r} (a class of custom code, which distill never runs); distill takes {EXPECTED}")
    _check_id2label(source, config)
    problem = config.get("problem_type")
    one_output = len(config.get("id2label") or "ab") == 1 and task == "classification"
    if problem in ("multi_label_classification", "regression") or one_output and problem is None:
        what = "several labels per text (multi-label)" if problem == "multi_label_classification" else \
            "a number (regression)"
        raise DistillError(f"{source}: predicts {what}; distill's teachers give one label per text or word")
    return task, transformers.AutoModelForSequenceClassification if task == "classification" \
        else transformers.AutoModelForTokenClassification



def _check_id2label(source: str | Path, config: dict) -> None:
    """A config's ``id2label`` names each of the model's outputs, 0 to N-1, once, with a label that shows something
    (blanks around it aside, as a data file's are): else one line, not a KeyError at the first prediction, a class
    named "" or two outputs of one name."""
    id2label = config.get("id2label")
    if id2label is None:
        return  # transformers' generic LABEL_0, LABEL_1 (warned of when it loads)
    where = f"{source}: its {CONFIG_FILE}'s id2label"
    try:
        labels = {int(index): str(name).strip() for index, name in id2label.items()}
    except (AttributeError, TypeError, ValueError):
        raise DistillError(f"{where} is not a JSON object of output number: label name") from None
    if sorted(labels) != list(range(len(labels))):
        raise DistillError(f"{where} numbers its labels {sorted(labels)[:8]}, not 0 to {len(labels) - 1}, so an "
                           "output of the model has no label; restore the config from the model's source")
    unnamed = next((index for index in sorted(labels) if not labels[index]), None)
    if unnamed is not None:
        raise DistillError(f"{where} gives output {unnamed} no label name: name it in its {CONFIG_FILE}")
    names = [labels[index] for index in sorted(labels)]
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:
        raise DistillError(f"{where} names {twice!r} for two outputs, which could not be told apart: give each "
                           "output its own label")


def verify_transformers_folder(source: str | Path, folder: Path) -> tuple[str, type, list[str]]:
    """(task, loading class, the files it is loaded from) of a transformers classifier folder that is whole: a
    classifier's config, safetensors weights (every shard its index lists), and a tokenizer's vocabulary; else
    one line saying what is missing. Reads no weights."""
    config = folder_config(folder)
    if config is None:
        raise DistillError(f"{source}: {CONFIG_FILE} is not a JSON object, so it is not a transformers model")
    task, model_class = classifier_kind(source, config)
    named = named_weights(folder)
    if named is None and not (folder / SAFE_WEIGHTS).is_file() and not (folder / SAFE_INDEX).is_file():
        pickled = next((name for name in PICKLED_WEIGHTS if (folder / name).is_file()), None)
        if pickled:
            raise DistillError(f"{source}: holds its weights only as {pickled}, a pickle, which distill never loads "
                               "(unpickling runs code); save them as safetensors: "
                               "model.save_pretrained(DIR, safe_serialization=True)")
        raise DistillError(f"{source}: holds no weights ({SAFE_WEIGHTS} is missing)")
    names = model_files(folder)
    missing = next((name for name in names if not (folder / name).is_file()), None)
    if missing:
        which = f"its {CONFIG_FILE} names ({EXPLICIT_WEIGHTS})" if missing == named else "its weights index lists"
        raise DistillError(f"{source}: missing {missing}, which {which}")
    require_vocabulary(source, folder)
    require_whole_wordpiece(source, folder, config)
    return task, model_class, names


def load_transformers_teacher(source: str | Path) -> "TransformersTeacher":
    """The teacher of a transformers classifier folder (or ``hub:NAME``), checked whole
    (`verify_transformers_folder`) and loaded: a fast tokenizer for tagging (it needs each sub-token's word)
    that knows more than its special tokens."""
    folder = local_folder(source)
    task, model_class, names = verify_transformers_folder(source, folder)
    fingerprint = files_fingerprint(folder, names)
    tokenizer = load_tokenizer(source, folder, " (a teacher reads text with the tokenizer saved beside it)")
    if task == "tagging" and not tokenizer.is_fast:
        raise DistillError(f"{source}: its tokenizer is a slow (Python) one, which cannot say which word a "
                           "sub-token belongs to; save the model with a fast tokenizer (tokenizer.json)")
    model = load_whole_model(model_class, source, folder)
    require_tokens_fit(source, tokenizer, model)
    teacher = TransformersTeacher(model.eval(), tokenizer, task, str(source), fingerprint)
    teacher.loaded_from = str(real_path(folder))
    labels = teacher.hierarchy.labels
    if all(GENERIC_LABEL.fullmatch(label) for label in labels) and distributed.is_main():
        logger.warning(f"warning: {source}: its config's id2label gives generic names ({', '.join(labels[:3])}"
                       f"{', ...' if len(labels) > 3 else ''}), kept as its labels: training and gold files must use "
                       "them (or name them in its config.json's id2label)")
    return teacher


@dataclass(frozen=True)
class TransformersReading:
    """How a transformers classifier reads text, in the terms of `TeacherConfig` (which the truncation warning
    and `teacher_max_length` read): one window of `max_length` sub-tokens for a text to classify (no windows:
    its head reads one), windows at word boundaries for a sentence to tag."""

    task: str
    source: str
    max_length: int
    long_inputs: str = "truncate"
    window_overlap: int = 0
    max_windows: int = 1
    fixed_length: bool = True  # a transformers classifier reads at most max_length: no setting reads more

    @property
    def windows_per_text(self) -> int:
        return 1


def max_length_of(model, tokenizer) -> int:
    """The sub-tokens the model reads at once: its position table, or its tokenizer's limit if lower."""
    limits = [n for n in (getattr(model.config, "max_position_embeddings", None),
                          getattr(tokenizer, "model_max_length", None)) if isinstance(n, int) and 8 <= n < 1_000_000]
    return min(limits, default=512)


class TransformersTeacher(ReadsSubWords, LabelModel):
    """A transformers sequence or token classifier and its tokenizer: logits per text, or per word (at each
    word's first sub-token). `model` is the transformers model, `encoder` too (its input embeddings start a
    word student's, as a teacher's encoder does)."""

    kind = "teacher"

    def __init__(self, model: torch.nn.Module, tokenizer, task: str, source: str, fingerprint: str):
        """`model`'s labels are its config's ``id2label``, in order (for tagging, with their tag scheme)."""
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        labels = [str(model.config.id2label[index]).strip() for index in range(model.config.num_labels)]
        self.hierarchy = LabelHierarchy(labels, None) if task == "classification" else \
            LabelHierarchy(labels, None, scheme=scheme_of_labels(labels))
        self.config = TransformersReading(task, source, max_length_of(model, tokenizer))
        self._fingerprint = fingerprint

    @property
    def task(self) -> str:
        return self.config.task

    @property
    def encoder(self) -> torch.nn.Module:
        return self.model

    def prepare(self, examples: Sequence) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        """Sub-word ids of a batch (a text truncated to `max_length`); tagging windows also carry each word's
        first sub-token and its slot in the (sentences, words) grid, as the teacher's do."""
        from distill.features import collate_windows, encode_texts, word_grid_inputs
        device = self.device
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        if self.task == "classification":
            windows = encode_texts(self.tokenizer, examples, self.config.max_length)
            inputs = collate_windows(windows, pad)
            return {k: v.to(device) for k, v in inputs.items()}, None
        inputs, scored = word_grid_inputs(self.tokenizer, examples, self.config.max_length, pad)
        return {k: v.to(device) for k, v in inputs.items()}, scored.to(device)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                word_positions: torch.Tensor | None = None, word_slots: torch.Tensor | None = None,
                grid_shape: torch.Tensor | None = None) -> torch.Tensor:
        """The model's own logits: (batch, labels), or for tagging (sentences, words, labels) taken at each
        word's first sub-token; words no window holds keep zero logits. Without `word_slots` (an ONNX graph's
        forward): each window's word logits, placed in the grid outside it."""
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits
        if word_positions is None:
            return logits
        from distill.models.layers import place_in_grid
        index = word_positions.unsqueeze(-1).expand(-1, -1, logits.size(-1))
        window_logits = logits.gather(1, index)
        return window_logits if word_slots is None else place_in_grid(window_logits, word_slots, grid_shape)

    def fingerprint(self) -> str:
        """The sha256 of the files it was loaded from (config, weights, tokenizer): they decide its logits and
        labels. Keys the logit cache, so a cached logit is never another model's."""
        return self._fingerprint

    def write_description(self, directory: Path) -> list[str]:
        """Copy what an ONNX export of it needs besides weights (`unloaded` reads them): its config and
        tokenizer files, as it was loaded. Returns their names."""
        import shutil
        folder = Path(self.loaded_from)
        names = [name for name in (CONFIG_FILE, *TOKENIZER_FILES) if (folder / name).is_file()]
        for name in names:
            shutil.copyfile(folder / name, Path(directory) / name)
        return names

    @classmethod
    def unloaded(cls, directory: str | Path) -> "TransformersTeacher":
        """The classifier of an export's `directory` (its config and tokenizer files) with its weights left
        uninitialised: an ONNX export runs its `prepare` and `decode`."""
        import transformers
        folder = Path(directory)
        task, model_class = classifier_kind(directory, folder_config(folder) or {})
        config = transformers.AutoConfig.from_pretrained(folder)
        model = model_class.from_config(config) if hasattr(model_class, "from_config") else model_class(config)
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        return cls(model.eval(), tokenizer, task, str(directory), "")

    def write_files(self, directory: Path, **extra) -> None:
        raise DistillError(f"{self.config.source}: a transformers classifier is a teacher given to distill, not a "
                           "model it saves; save the transformers model with its own save_pretrained")

    @classmethod
    def from_pretrained(cls, directory: str | Path, device: str = "cpu") -> "TransformersTeacher":
        """The transformers classifier of `directory` (or ``hub:NAME``) as a teacher."""
        from distill.models.base import pick_device
        if not isinstance(directory, (str, Path)):
            raise DistillError(f"give a model directory (a path) or hub:NAME, not {type(directory).__name__}")
        if not is_transformers_source(directory):
            raise DistillError(f"{directory}: not a transformers model folder (no {CONFIG_FILE} of a transformers "
                               "model, or it holds a distill model card)")
        return load_transformers_teacher(directory).to(pick_device(device))
