"""A causal language model as a zero- or few-shot teacher: a folder of ``AutoModelForCausalLM`` weights and its
tokenizer (or ``hub:NAME``), asked the prompt of `distill.models.prompt` for each text.

Each label is scored by the summed log-likelihood of its words' tokens after the prompt, so the teacher gives a
full distribution over the labels. The scores are calibrated (contextual calibration, Zhao et al. 2021): those
of a content-free input, ``N/A`` in the same prompt, are subtracted, since raw label likelihoods favour some
labels whatever the text. The prompt's part before the text is computed once per batch and its key-value cache
shared by every (text, label) row of the batch; rows are padded on the left of their text, so that every label's
words end the row and only the last positions' logits are computed. The weights are held in bf16 on a GPU that
has it, else in fp32.

transformers 5's ``pipeline("decision")`` is not used: it scores single-token option letters from one
unbatched forward pass per prompt, where a teacher here needs several-token label words, batches and the
shared prefix. Classification only: a tagger's labels per word are not one answer to a prompt.
"""

from __future__ import annotations

import inspect
import logging
from pathlib import Path
from typing import Sequence

import torch

from distill import distributed
from distill.errors import DistillError, option
from distill.io import real_path
from distill.labels import LabelHierarchy
from distill.models.base import LabelModel, ReadsSubWords
from distill.models.hub_files import (CONFIG_FILE, HUB, files_fingerprint, folder_config, load_tokenizer,
                                      load_whole_model, local_folder, model_files, quiet_transformers,
                                      require_tokens_fit, require_vocabulary)
from distill.models.prompt import CONTENT_FREE, Prompt, build_prompt, prompt_digest

logger = logging.getLogger("distill")


def is_causal_lm_config(config: dict | None) -> bool:
    """Whether a transformers config is that of a causal language model transformers builds itself."""
    from transformers.models.auto import modeling_auto
    architectures = (config or {}).get("architectures") or []
    return bool(architectures) and \
        modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.get("model_type")) == architectures[0]


def is_causal_lm_source(source: str | Path) -> bool:
    """Whether `source` (a folder, or ``hub:NAME``) holds a causal language model (its config says so)."""
    from distill.models.hub_files import is_transformers_source
    if not is_transformers_source(source):
        return False
    folder = local_folder(source) if str(source).startswith(HUB) else Path(source)
    return is_causal_lm_config(folder_config(folder))


def causal_lm_fingerprint(source: str | Path, dtype: str = "fp32") -> str:
    """The model's files (config, weights, tokenizer), the prompt (`prompt_settings`) and the weights' precision
    (bf16 on a GPU): what decides its scores, and keys the logit cache."""
    folder = local_folder(source)
    return prompt_digest(build_prompt(source), "causal-lm", files_fingerprint(folder, model_files(folder)), dtype)


def load_causal_lm_teacher(source: str | Path) -> "CausalLMTeacher":
    """The teacher of a causal language model folder (or ``hub:NAME``), asked the current prompt settings."""
    transformers = quiet_transformers()
    folder = local_folder(source)
    names = model_files(folder)
    missing = next((name for name in names if not (folder / name).is_file()), None)
    if missing:
        raise DistillError(f"{source}: missing {missing}: a causal language model is read from safetensors weights "
                           f"beside its {CONFIG_FILE} and tokenizer (never a pickle)")
    require_vocabulary(source, folder)
    prompt = build_prompt(source)
    tokenizer = load_tokenizer(source, folder)
    model = load_whole_model(transformers.AutoModelForCausalLM, source, folder)
    require_tokens_fit(source, tokenizer, model)
    teacher = CausalLMTeacher(model.eval(), tokenizer, prompt, str(source), files_fingerprint(folder, names))
    teacher.loaded_from = str(real_path(folder))
    return teacher


class CausalLMTeacher(ReadsSubWords, LabelModel):
    """A causal language model and its tokenizer, asked `prompt`: calibrated label log-likelihoods per text."""

    kind = "teacher"
    task = "classification"

    def __init__(self, model: torch.nn.Module, tokenizer, prompt: Prompt, source: str, files: str):
        super().__init__()
        self.model, self.tokenizer, self.prompt, self.source = model, tokenizer, prompt, source
        self.hierarchy = LabelHierarchy(list(prompt.names), None)
        self._files = files
        self._content_free: dict[str, torch.Tensor] = {}  # by dtype
        self._warned_cut = False
        encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
        self.prefix_ids = tokenizer(prompt.prefix)["input_ids"] if prompt.prefix else \
            [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
        self.suffix_ids = encode(prompt.suffix) if prompt.suffix else []
        self.label_ids = [encode(words) for words in prompt.verbalizers]
        self.cache_argument = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        limit = getattr(model.config, "max_position_embeddings", None)
        self.max_positions = limit if isinstance(limit, int) and limit > 0 else 4096

    @property
    def encoder(self) -> torch.nn.Module:
        return self.model

    def dtype_name(self) -> str:
        """bf16 on a GPU that has it (half the memory of fp32), else fp32."""
        from distill.precision import bf16_supported
        return "bf16" if self.device.type == "cuda" and bf16_supported(self.device) else "fp32"

    def fingerprint(self) -> str:
        """The model's files, the prompt (labels, words, examples, template) and the weights' precision."""
        return prompt_digest(self.prompt, "causal-lm", self._files, self.dtype_name())

    def prepare(self, examples: Sequence[str]) -> tuple[dict, None]:
        return {"texts": list(examples)}, None

    def forward(self, texts: Sequence[str]) -> torch.Tensor:
        """Calibrated scores (texts, labels): each label's summed token log-likelihood after the prompt, less the
        content-free input's."""
        dtype = self.dtype_name()
        if dtype not in self._content_free:
            self._content_free[dtype] = self.label_scores([CONTENT_FREE])[0]
        return self.label_scores(texts) - self._content_free[dtype]

    def text_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's tokens and the prompt's after it, the text cut where prompt, text and the longest label
        would pass the model's positions (warned of once)."""
        room = self.max_positions - len(self.prefix_ids) - len(self.suffix_ids) - max(map(len, self.label_ids))
        if room < 1:
            raise DistillError(f"{self.source}: the prompt takes {self.max_positions - room} of the model's "
                               f"{self.max_positions} positions, leaving none for the text: shorten it "
                               f"({option('--prompt, --shots', 'prompt_settings(template=..., shots=...)')})")
        ids = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        cut = sum(len(row) > room for row in ids)
        if cut and not self._warned_cut and distributed.is_main():
            self._warned_cut = True
            logger.warning(f"warning: {self.source}: {cut} text(s) longer than the {room} tokens the prompt leaves "
                           "of the model's positions were cut at the end")
        return [row[:room] + self.suffix_ids for row in ids]

    @torch.inference_mode()
    def label_scores(self, texts: Sequence[str]) -> torch.Tensor:
        """(texts, labels) summed log-likelihoods of each label's tokens after the prompt and the text,
        uncalibrated: one forward pass of the prompt's prefix, then one of every (text, label) row at once."""
        model = self.model
        wanted = torch.bfloat16 if self.dtype_name() == "bf16" else torch.float32
        if model.dtype != wanted:
            model.to(wanted)
        device, labels = self.device, len(self.label_ids)
        rows = [text + label for text in self.text_ids(texts) for label in self.label_ids]
        width, keep = max(map(len, rows)), max(map(len, self.label_ids)) + 1
        start = len(self.prefix_ids)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), start + width), dtype=torch.long)
        positions = torch.full((len(rows), width), start, dtype=torch.long)
        mask[:, :start] = 1
        for row, tokens in enumerate(rows):  # right-aligned: every row's label words end it
            ids[row, width - len(tokens):] = torch.tensor(tokens)
            mask[row, start + width - len(tokens):] = 1
            positions[row, width - len(tokens):] = torch.arange(start, start + len(tokens))
        cache = None
        if start:
            prefix = model(input_ids=torch.tensor([self.prefix_ids], device=device), use_cache=True)
            cache = getattr(prefix, "cache", None)  # transformers 5.24's name; past_key_values before
            cache = prefix.past_key_values if cache is None else cache
            cache.batch_repeat_interleave(len(rows))
        logits = model(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device),
                       use_cache=cache is not None, logits_to_keep=keep, **{self.cache_argument: cache}).logits
        logprobs = torch.log_softmax(logits.float(), dim=-1)  # (rows, keep, vocabulary)
        scores = torch.empty(len(rows), device=device)
        for row in range(len(rows)):
            target = self.label_ids[row % labels]
            # the label's tokens are the row's last len(target); each is predicted by the position before it
            at = torch.arange(keep - 1 - len(target), keep - 1, device=device)
            scores[row] = logprobs[row, at, torch.tensor(target, device=device)].sum()
        return scores.view(len(texts), labels).cpu()

    def write_files(self, directory: Path, **extra) -> None:
        raise DistillError(f"{self.source}: a causal language model is a teacher given to distill, not a model it "
                           "saves")
