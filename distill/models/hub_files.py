"""A transformers model's folder (or ``hub:NAME``) as files: what it holds, which of them its loaders read, and
their fingerprint. Reads no weights and imports no transformers, so the output rules (`distill.outputs`) can
tell such a folder without loading a model (`distill.models.hub_teacher` loads it)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

from distill.errors import DistillError
from distill.io import MODEL_CARD, file_sha256, real_path

HUB = "hub:"  # a model on the Hugging Face hub, as data on the hub is named (distill.data.HUB_PREFIX)
CONFIG_FILE = "config.json"
SAFE_WEIGHTS, SAFE_INDEX = "model.safetensors", "model.safetensors.index.json"
EXPLICIT_WEIGHTS = "transformers_weights"  # config.json's key naming the weights file to load instead
PICKLED_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json")
# What a tokenizer may be read from: those a folder holds are part of the model's fingerprint.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "vocab.txt", "vocab.json", "merges.txt", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model", "chat_template.jinja")
# The files a tokenizer's vocabulary is read from: a folder with none of them gets transformers' fallback
# tokenizer, which knows only its special tokens and reads every word as [UNK] (a blind teacher).
VOCABULARY_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                    "tokenizer.model")


def quiet_transformers():
    """transformers, its progress bar for loading weights off: a local model loads in a second, and the bar is
    noise on stderr (between a command's own progress and its one-line errors, or `predict`'s JSONL)."""
    import transformers
    from transformers.utils import logging as transformers_logging
    transformers_logging.disable_progress_bar()
    return transformers


def cannot_load(source: str | Path, what: str, error: Exception) -> DistillError:
    """transformers' error while reading a folder's `what` (its tokenizer, its weights), in one line."""
    detail = " ".join(f"{type(error).__name__}: {error}".split())[:300]
    return DistillError(f"{source}: cannot load its {what} ({detail})")


def load_whole_model(model_class, source: str | Path, folder: Path):
    """`model_class.from_pretrained(folder)` from safetensors, refused unless every tensor of the model is in
    the weights: transformers fills a missing one with random values, prints a report and goes on, so a
    damaged folder would teach (or label) at random."""
    from transformers.utils import logging as transformers_logging
    quiet_transformers()
    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()  # its load report: what is wrong is said below, in one line
    try:
        model, loading = model_class.from_pretrained(folder, use_safetensors=True, output_loading_info=True)
    except Exception as error:  # weights that do not fit the config, a damaged file
        if "mismatched_sizes" in str(error) or "size mismatch" in str(error):
            raise DistillError(f"{source}: cannot load its weights: they do not fit its {CONFIG_FILE} (a tensor's "
                               "shape differs from the one the config gives); give the folder the model was saved "
                               "to, whole") from None
        raise cannot_load(source, "weights", error) from None
    finally:
        transformers_logging.set_verbosity(verbosity)
    missing = sorted(loading["missing_keys"])
    if missing:
        raise DistillError(f"{source}: its weights lack {len(missing)} of the model's tensors (e.g. {missing[0]}), "
                           "which would start from random values; give the folder the model was saved to, whole")
    unused = sorted(loading["unexpected_keys"])
    if unused:  # transformers drops them: a config of fewer layers (or another head) than the weights were saved with
        raise DistillError(f"{source}: its weights hold {len(unused)} tensors its {CONFIG_FILE} has no place for "
                           f"(e.g. {unused[0]}), which would be dropped: the config describes another model than "
                           "its weights; give the folder the model was saved to, whole")
    stored = integer_weight(model, [folder / name for name in model_files(folder) if name.endswith(".safetensors")])
    if stored is not None:
        raise DistillError(f"{source}: its weights hold {stored[0]} as {stored[1]}, where the model's is a floating "
                           "tensor (cast to one, its fractions would be lost in silence); give the folder the model "
                           "was saved to, whole")
    poisoned = non_finite_weight(model)
    if poisoned is not None:
        raise DistillError(f"{source}: its weights hold NaN or infinite values (in {poisoned}), so every output would "
                           "be NaN; give the folder the model was saved to, whole (the weights of a training run "
                           "that diverged are none to use)")
    return model


def tokens_past_embeddings(tokenizer, model) -> tuple[int, int] | None:
    """(the tokenizer's tokens, the model's embedding rows) where the tokenizer gives ids the model's embedding
    table has no row for (tokens added with ``tokenizer.add_tokens`` and the model never resized, a tokenizer of
    another model): the first text holding one would stop with an IndexError. None where every id fits."""
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    rows = getattr(embeddings, "num_embeddings", None)
    return (len(tokenizer), rows) if isinstance(rows, int) and len(tokenizer) > rows else None


def require_tokens_fit(source: str | Path, tokenizer, model) -> None:
    """A transformers classifier's or causal LM's tokenizer gives no id past its model's embeddings
    (`tokens_past_embeddings`), else one line before any text is read."""
    past = tokens_past_embeddings(tokenizer, model)
    if past is not None:
        raise DistillError(f"{source}: its tokenizer has {past[0]} tokens and its model embeds {past[1]}, so a text "
                           "holding one of the others could not be read (tokens added to the tokenizer without "
                           "model.resize_token_embeddings, or another model's tokenizer); save the model and "
                           "tokenizer together, whole")


def non_finite_weight(model) -> str | None:
    """The name of the first weight of a loaded model that holds NaN or an infinity (a damaged file, a diverged run's
    save: every logit would be NaN, which no loss, metric or JSON record can hold), or None."""
    import torch
    return next((name for name, tensor in model.named_parameters()  # not buffers: a mask may hold -inf by design
                 if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())), None)


def integer_weight(model, files: Sequence[Path]) -> tuple[str, str] | None:
    """(name, dtype) of the first tensor of the safetensors `files` stored as integers or booleans where the loaded
    `model`'s parameter of that name is floating (a damaged or hand-edited file: transformers casts it to the
    parameter's dtype without a word, truncated weights), or None. Read from the files' headers: once loaded,
    every parameter is floating."""
    floating = {name for name, tensor in model.named_parameters() if tensor.is_floating_point()}
    prefix = f"{getattr(model, 'base_model_prefix', '')}."
    for path in files:
        try:
            with path.open("rb") as stream:
                header = json.loads(stream.read(int.from_bytes(stream.read(8), "little")))
        except (OSError, UnicodeDecodeError, ValueError):  # transformers has read it: nothing to check here
            continue
        for name, entry in header.items():
            dtype = entry.get("dtype", "F") if isinstance(entry, dict) else "F"
            saved_as = name.removeprefix(prefix) if name.startswith(prefix) else prefix + name
            if not dtype.startswith(("F", "BF")) and (name in floating or saved_as in floating):
                readable = {"I": "int", "U": "uint"}.get(dtype[:1], "") + dtype[1:] if dtype[:1] in ("I", "U") else \
                    dtype.lower()  # I64 -> int64, U8 -> uint8, BOOL -> bool: as torch names them
                return name, readable
    return None


def require_vocabulary(source: str | Path, folder: Path) -> None:
    """A transformers folder's tokenizer vocabulary is there, else one line saying so (not transformers' error)."""
    if not any((folder / name).is_file() for name in VOCABULARY_FILES):
        raise DistillError(f"{source}: cannot load its tokenizer (none of {', '.join(VOCABULARY_FILES)} is there, so "
                           "every word would read as [UNK]); save the tokenizer beside the model: "
                           "tokenizer.save_pretrained(DIR)")


def _added_token_ids(folder: Path) -> set[int]:
    """The ids of the tokens a tokenizer adds to its vocabulary file (added_tokens.json, tokenizer_config.json's
    added_tokens_decoder); none where those files do not read as such."""
    ids: set[int] = set()
    for name, read in (("added_tokens.json", lambda found: found.values()),
                       ("tokenizer_config.json", lambda found: found.get("added_tokens_decoder", {}).keys())):
        try:
            found = json.loads((folder / name).read_text(encoding="utf-8"))
            ids.update(int(token_id) for token_id in read(found))
        except (OSError, UnicodeDecodeError, ValueError, TypeError, AttributeError):
            continue
    return ids


def require_whole_wordpiece(source: str | Path, folder: Path, config: dict) -> None:
    """A vocab.txt that the tokenizer is read from (no tokenizer.json beside it) has a line for each of the
    model's token embeddings (config.json's vocab_size, the added tokens aside), else one line naming the counts:
    one cut short reads the words of its lost lines as [UNK], one too long gives ids the model has no row for."""
    path, vocab_size = folder / "vocab.txt", config.get("vocab_size")
    if (folder / "tokenizer.json").is_file() or not path.is_file() or not isinstance(vocab_size, int) \
            or isinstance(vocab_size, bool):
        return
    data = path.read_bytes()
    lines = data.count(b"\n") + (not data.endswith(b"\n") and bool(data))
    tokens = lines + sum(1 for token_id in _added_token_ids(folder) if lines <= token_id < vocab_size)
    if tokens != vocab_size:
        added = f" (and {tokens - lines} added tokens)" if tokens != lines else ""
        raise DistillError(f"{source}: its {path.name} has {lines} lines{added}, but the model has {vocab_size} token "
                           f"embeddings ({CONFIG_FILE}'s vocab_size), so the vocabulary is cut short or another "
                           "model's; give the folder the model was saved to, whole")


def load_tokenizer(source: str | Path, folder: Path, why: str = ""):
    """The tokenizer saved beside a transformers model (`why`: said after "tokenizer" where it fails), knowing more
    than its special tokens (`require_words`). Its config is read first: transformers reads it to choose the
    tokenizer, so a config value it refuses (a number written as text) would be said of the tokenizer."""
    transformers = quiet_transformers()
    try:
        transformers.AutoConfig.from_pretrained(folder)
    except Exception as error:  # a value the config class refuses
        detail = " ".join(f"{type(error).__name__}: {error}".split())[:300]
        raise DistillError(f"{source}: its {CONFIG_FILE} does not describe a model transformers can build ({detail}); "
                           "restore it from the model's source") from None
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    except Exception as error:  # no tokenizer files, or files it cannot read
        raise cannot_load(source, f"tokenizer{why}", error) from None
    require_words(source, tokenizer)
    return tokenizer


def require_words(source: str | Path, tokenizer) -> None:
    """A loaded tokenizer knows more than its special tokens, else one line: with its vocabulary lost (a stub
    tokenizer.json), every word reads as [UNK] or as no token at all."""
    if len(tokenizer) <= len(set(tokenizer.all_special_tokens)):
        raise DistillError(f"{source}: cannot load its tokenizer (its vocabulary holds only its {len(tokenizer)} "
                           "special tokens, so every word would read as [UNK]); save the tokenizer beside the "
                           "model: tokenizer.save_pretrained(DIR)")


def folder_config(folder: Path) -> dict | None:
    """The folder's config.json as a dict, or None where there is none that reads as one: not JSON, no object, or
    naming its model otherwise than transformers writes (`misnamed_model`), which no reader indexes."""
    try:
        config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return config if isinstance(config, dict) and misnamed_model(config) is None else None


def misnamed_model(config: dict) -> str | None:
    """What is wrong with how a transformers config names its model, or None: its ``architectures`` is a list of
    class names and its ``model_type`` a name, where given (an edited one, a string or a number, would be read a
    character at a time, or fail as a TypeError)."""
    architectures, model_type = config.get("architectures"), config.get("model_type")
    if architectures is not None and not (isinstance(architectures, list)
                                          and all(isinstance(name, str) for name in architectures)):
        return f"names its architectures as {json.dumps(architectures)[:40]}, not a list of class names"
    if model_type is not None and not isinstance(model_type, str):
        return f"names its model_type as {json.dumps(model_type)[:40]}, not a name"
    return None


def is_transformers_source(source: str | Path) -> bool:
    """Whether `source` is ``hub:NAME``, or a folder without a model card whose config.json is a transformers
    model's (it names its architectures or model type). Reads no weights and imports no transformers."""
    if str(source).startswith(HUB):
        return True
    folder = Path(source)
    if not folder.is_dir() or (folder / MODEL_CARD).exists():
        return False
    config = folder_config(folder)
    return config is not None and ("architectures" in config or "model_type" in config)


def local_folder(source: str | Path) -> Path:
    """The folder `source` names, or for ``hub:NAME`` its snapshot in the Hugging Face cache, fetched by the
    hub client transformers uses: config, safetensors weights and tokenizer files only (no pickled weights)."""
    if not str(source).startswith(HUB):
        return Path(source)
    name = str(source)[len(HUB):]
    if not name:
        raise DistillError(f"{source}: give a model's name on the Hugging Face hub after hub:")
    from huggingface_hub import snapshot_download
    try:
        return Path(snapshot_download(name, allow_patterns=[CONFIG_FILE, "*.safetensors", SAFE_INDEX,
                                                            *TOKENIZER_FILES]))
    except Exception as error:  # network, unknown repository, offline without a cached copy: one line
        detail = " ".join(f"{type(error).__name__}: {error}".split())[:300]
        raise DistillError(f"{source}: cannot fetch the model from the Hugging Face hub ({detail})") from None


def named_weights(folder: Path) -> str | None:
    """The weights file config.json names (``transformers_weights``), which transformers loads instead of
    model.safetensors; refused in one line unless it is a safetensors file or index inside the folder (a pickle,
    which transformers would take as ``adapter_model.bin``, is never loaded)."""
    named = (folder_config(folder) or {}).get(EXPLICIT_WEIGHTS)
    if named is None:
        return None
    inside = isinstance(named, str) and real_path(folder / named).parent == real_path(folder)
    if not inside or not named.endswith((".safetensors", ".safetensors.index.json")):
        raise DistillError(f"{folder / CONFIG_FILE}: its {EXPLICIT_WEIGHTS}, {named!r}, names no safetensors file or "
                           "index inside the folder, which is all distill loads weights from")
    return named


def model_files(folder: Path) -> list[str]:
    """The files of `folder` the model is loaded from: config, safetensors weights (those config.json names in
    ``transformers_weights``, else model.safetensors where there is one, as transformers loads it before an index's
    shards), tokenizer files."""
    names, named = [CONFIG_FILE], named_weights(folder)
    index = named if named is not None and named.endswith(".index.json") else \
        SAFE_INDEX if named is None and not (folder / SAFE_WEIGHTS).is_file() else None
    if index is not None and (folder / index).is_file():
        try:
            shards = sorted(set(json.loads((folder / index).read_text(encoding="utf-8"))["weight_map"].values()))
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
            raise DistillError(f"{folder / index}: not a safetensors index (no weight_map)") from None
        names += [index, *shards]
    else:
        names.append(named or SAFE_WEIGHTS)
    return names + [name for name in TOKENIZER_FILES if (folder / name).is_file()]


def reads_file(name: str) -> bool:
    """Whether a file of this name in a transformers model's folder may be read by its loaders: its config,
    weights of any format, tokenizer files (an output of that name would change or replace the model)."""
    return name in (CONFIG_FILE, *TOKENIZER_FILES, "generation_config.json", "preprocessor_config.json") \
        or name.endswith((".safetensors", ".bin", ".h5", ".msgpack", ".index.json", ".pt", ".pth", ".ckpt"))


def files_fingerprint(folder: Path, names: Sequence[str]) -> str:
    """One digest of the named files of `folder`: the name and sha256 of each (one missing counts as absent:
    loading the model refuses it)."""
    listing = "".join(f"{name}\0{file_sha256(folder / name)}\n" for name in sorted(names) if (folder / name).is_file())
    return hashlib.sha256(f"transformers classifier\n{listing}".encode()).hexdigest()[:40]


def source_fingerprint(source: str | Path) -> str:
    """The fingerprint of the model `source` names (`TransformersTeacher.fingerprint`), from its files alone."""
    folder = local_folder(source)
    return files_fingerprint(folder, model_files(folder))
