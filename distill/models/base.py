"""What every model offers the training loop and inference, whatever its architecture."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Sequence, TypeVar

import torch
from torch import nn

from distill import distributed, losses
from distill.data import DataOptions
from distill.errors import DistillError, option, require_flag, require_whole
from distill.labels import LabelHierarchy
from distill.io import STAGING_PREFIX
from distill.models.card import MODEL_CARD


Loaded = TypeVar("Loaded", bound="LabelModel")


def pick_device(name: str = "auto") -> torch.device:
    """'auto' is the GPU when there is one, else the CPU; otherwise any torch device name. A GPU the machine
    lacks (cuda:N past its count, or a torchrun process whose local rank has no GPU) is one line, not CUDA's
    "invalid device ordinal" at the first tensor."""
    if name == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        try:
            device = torch.device(name)
        except RuntimeError:
            raise DistillError(f"unknown device {name!r}: use auto, cpu, cuda or cuda:N") from None
    if device.type != "cuda":
        return device
    if not torch.cuda.is_available():
        raise DistillError(f"device {name!r} requested but no CUDA GPU is available")
    count = torch.cuda.device_count()
    if device.index is not None and device.index >= count:
        raise DistillError(f"device {name!r}: this machine has {count} GPU{'s' * (count != 1)} (cuda:0 to "
                           f"cuda:{count - 1})")
    local_rank = distributed.local_rank() if distributed.launched() else 0
    if device.index is None and local_rank >= count:
        raise DistillError(f"torchrun started more processes on this machine than it has GPUs ({count}): local "
                           f"rank {local_rank} has none; start it with --nproc-per-node {count}, or give "
                           f"{option('--device cpu', 'device=cpu')} to train on the CPU")
    return device


class LabelModel(nn.Module):
    """A model that maps examples to label logits.

    Subclasses set ``hierarchy`` and ``task`` and implement ``prepare`` (examples -> forward
    inputs and a mask of scored words), ``forward`` (inputs -> logits), ``write_files`` (its files
    and card into a directory) and ``from_checkpoint`` (the reverse, after the card was checked).
    `save_pretrained` / `from_pretrained` follow the `transformers` habit on top of them.
    """

    hierarchy: LabelHierarchy
    task: str
    kind: str | None = None  # "teacher", "multitask-teacher" or "student": the model card's kind
    loaded_from: str | None = None  # the directory it was loaded from: a run given it must not write there
    takes_class_weights: bool = True  # whether `supervised_loss` applies class weights

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def sub_word_tokenizer(self) -> Any:
        """The teacher interface: the sub-word tokenizer this model reads text with (augmentation masks and splits
        with it, word vectors are read through it); None for a model of whole words, or of no weights here."""
        return None

    def input_embeddings(self) -> torch.Tensor | None:
        """The teacher interface: this model's input (sub-word) embedding table, detached on the CPU; None where it
        has none (students start their word embeddings from it, augmentation finds neighbours in it)."""
        return None

    def prepare(self, examples: Sequence) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        raise NotImplementedError

    def prepare_on_device(self, examples: Sequence) -> tuple[dict[str, Any], torch.Tensor | None]:
        """`prepare`, its tensors moved to the model's device: what the training loop and inference call, so a
        plugin's `prepare` may build its tensors on the CPU and still run on a GPU."""
        inputs, mask = self.prepare(examples)
        device = self.device
        inputs = {name: value.to(device) if isinstance(value, torch.Tensor) else value for name, value in inputs.items()}
        return inputs, None if mask is None else mask.to(device)

    def decode(self, logits: torch.Tensor, mask: torch.Tensor | None) -> list:
        """Best label index per example, or per word for tagging (argmax of raw scores)."""
        if logits.size(-1) == 1:
            return (logits.squeeze(-1) > 0).long().tolist()
        return logits.argmax(-1).tolist()

    def batch_logits(self, examples: Sequence) -> tuple[torch.Tensor | dict, torch.Tensor | None]:
        """One inference batch's logits and the mask of its scored words: `prepare`, then `forward` under the
        precision setting's autocast. The unit `distill.inference.score_examples` runs, so a model with a
        quicker way to the same logits (the static student's lookup table) overrides this alone."""
        from distill import precision
        inputs, mask = self.prepare_on_device(examples)
        with precision.autocast(self.device):
            return self(**inputs), mask

    def predict(self, examples: Sequence, batch_size: int = 64, data: DataOptions = DataOptions()) -> list:
        """Labels for texts (classification) or tag lists for token lists (tagging), by argmax
        (a CRF tagger: its best path). `examples` may be a table, as `fit` takes it: a `datasets.Dataset`,
        a pandas DataFrame or a list of dicts, whose text (or tokens) column `data` names.

        The examples are read and checked once, here: a call of one text costs little beyond the model."""
        from distill.inference import ExampleLogits, decode_labels, readable_examples, score_examples
        require_whole("batch_size", batch_size)  # also when there is nothing to predict
        examples = readable_examples(self, examples, data)
        if not examples:
            return []
        return decode_labels(self, ExampleLogits.from_examples(score_examples(self, examples, batch_size)))

    def supervised_loss(self, logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None,
                        class_weights: torch.Tensor | None) -> losses.LossSum:
        """The loss against gold (or pseudo) label indices that fits this model's output, as a sum and
        its denominator (see `distill.losses.LossSum`)."""
        return losses.supervised_nll_sum(logits, targets, mask, class_weights)

    def write_files(self, directory: Path, **extra) -> None:
        raise NotImplementedError

    def card_about(self) -> dict:
        """What the README model card says of this model beyond its `distill.json` card: its size, and the
        pretrained encoder it starts from (``base_model``) where it has one."""
        return {"parameters": self.parameter_count()}

    @classmethod
    def from_checkpoint(cls, directory: str | Path, card: dict) -> "LabelModel":
        raise NotImplementedError

    def save_pretrained(self, directory: str | Path, overwrite: bool = False, **extra) -> Path:
        """Write the model directory under the rules of `nlp-train`'s outputs (`distill.outputs`): a
        folder of other files, one inside another model (a teacher's `encoder/`), or a model unless
        `overwrite` is refused; a model being replaced comes back if writing fails. `extra` goes to
        the model's `write_files` (the teacher's `optimizer_state`)."""
        from distill.outputs import model_output
        require_flag("overwrite", overwrite)
        with model_output(directory, overwrite=overwrite) as path:
            self.write_model(path, **extra)
        return Path(directory)

    def write_model(self, directory: str | Path, **extra) -> Path:
        """Write every file, then the card with their checksums, so a directory with a card is complete.
        The directory is not checked: it is a training run's own output (`save_pretrained` checks).

        The files are written beside, in a hidden staging folder, and moved in only once all are whole:
        the model already there (a run's best epoch so far, which its resume state points at) stays
        intact through the long part of the save, and even a SIGKILL, which cannot be held off, can
        catch only the moves (milliseconds, where a teacher's files take seconds to write)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob(f"{STAGING_PREFIX}*"):  # left by a save that a SIGKILL stopped
            shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=directory))
        try:
            self.write_files(staging, **extra)
            (directory / MODEL_CARD).unlink(missing_ok=True)  # not a model again until every file is in
            for item in sorted(staging.iterdir(), key=lambda path: path.name == MODEL_CARD):  # the card last
                target = directory / item.name
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                os.replace(item, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return directory

    @classmethod
    def from_pretrained(cls: type[Loaded], directory: str | Path, device: str = "cpu") -> Loaded:
        """Load a saved model (its files checked against the card first) as this class or a subclass;
        `LabelModel.from_pretrained` loads any teacher or student."""
        from distill.models import load_model
        if not isinstance(directory, (str, os.PathLike)):
            raise DistillError(f"give a model directory (a path), not {type(directory).__name__}")
        model = load_model(directory, expect=cls.kind, device=device, pytorch=True)
        if not isinstance(model, cls):
            raise DistillError(f"{directory}: holds a {type(model).__name__}, not a {cls.__name__}")
        return model

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())


class ReadsSubWords:
    """The teacher interface of a model that reads sub-words through a transformers encoder: its ``tokenizer`` and
    the input embeddings of its ``encoder``. Listed before `LabelModel` among a model's bases."""

    tokenizer: Any
    encoder: nn.Module

    def sub_word_tokenizer(self) -> Any:
        return self.tokenizer

    def input_embeddings(self) -> torch.Tensor | None:
        return self.encoder.get_input_embeddings().weight.detach().cpu()
