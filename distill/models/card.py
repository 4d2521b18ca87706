"""The model card, ``distill.json``: what a model directory holds, and checksums of all its files.

It is written last, so a directory with a card is complete. Loading checks every file the card
lists (weights, configuration, vocabularies, the teacher's encoder config and tokenizer) against
the sha256 recorded here, and refuses files in the encoder folder that the card does not list
(a tokenizer file dropped in changes how text is read), and such files beside a transformers model's own
(an export's). So a deleted, edited, truncated, added or corrupted file is reported before the model is
used, never half-loaded.
"""

from __future__ import annotations

import json
from pathlib import Path

from distill.errors import DistillError, option
from distill.io import MODEL_CARD, file_sha256, read_json, what_is, write_json
from distill.runtime import Output
from distill.settings import named

# An interrupted run's end-of-epoch state: a folder that holds it is a run to finish, not a model to use.
RESUME_FILE = "resume.pt"
# 2: a student's config.json holds its architecture alone (1: every student's settings and the run's).
CARD_VERSION = 2
KINDS = ("teacher", "multitask-teacher", "student")
MULTITASK_KIND = "multitask-teacher"  # one encoder, a head per task (models.multitask)
# Folders whose whole content belongs to the model: nothing unlisted may appear there.
SEALED_FOLDERS = ("encoder",)
# The files a model directory may hold, named here for every loader that reads them.
WEIGHTS, CONFIG, VOCAB = "model.safetensors", "config.json", "vocab.json"  # a student (models.students)
CHECKPOINT = "checkpoint.pt"  # a teacher's head, labels and settings (models.teacher)
SLIM_WEIGHTS = "checkpoint.safetensors"  # a teacher saved without pickle (models.slim)
SLIM_META = "checkpoint.json"  # its config and labels; an ONNX export of a teacher keeps it too
ONNX_FILE, CRF_WEIGHTS = "model.onnx", "crf.safetensors"  # an export (models.onnx)
# Files a loader reads: a version-2 card lists each one the directory holds, so none is used unchecked.
LOADED_FILES = (CONFIG, WEIGHTS, VOCAB, CRF_WEIGHTS, CHECKPOINT, SLIM_META, SLIM_WEIGHTS, ONNX_FILE)
# The weights files a loader reads: every card, of any version, records their checksums
WEIGHT_FILES = (WEIGHTS, CHECKPOINT, SLIM_WEIGHTS, ONNX_FILE)
# Card fields naming what loads the model (its class, registered name, task, export format): strings where given
NAME_FIELDS = ("model", "class", "task", "format")
EXPORT_FORMATS = ("onnx", "safetensors", "transformers")  # what `nlp-train export` writes (distill.export)
EXPORT_QUANTIZATIONS = ("int8",)
_NUMBER, _TEXT, _NONE = (int, float), (str,), (type(None),)
# An export's records that readers index and format (loading it as a teacher, compare, kd's teacher line, the README,
# a bulk pass's choice of teacher): each a JSON object or null where present, its fields of these types; a field whose
# types include null may be absent. The card holds no checksum of itself, so a hand edit is refused here, in one line.
CARD_RECORDS = {
    "export": {"source": _TEXT, "parameters": (int,), "format": _TEXT + _NONE, "quantize": _TEXT + _NONE,
               "source_card_sha256": _TEXT + _NONE, "source_fingerprint": _TEXT + _NONE,
               "learnt_from": (dict,) + _NONE},
    "agreement": {"data": _TEXT, "metric": _TEXT, "max_abs_logit_diff": _NUMBER, "labels_compared": (int,),
                  "labels_changed": (int,), "reference_score": _NUMBER, "score": _NUMBER},
    "speed": {"ratio": _NUMBER, "cpu": _TEXT, "threads": (int,), "precision": _TEXT, "batch_size": (int,),
              "pytorch_examples_per_second": _NUMBER, "export_examples_per_second": _NUMBER},
}

__all__ = ["CARD_VERSION", "MODEL_CARD", "RESUME_FILE", "card_version", "folder_files", "model_files", "read_model_card",
           "rewrite_readme", "verify_model_files", "weights_sha256", "write_model_card"]


def rewrite_readme(directory: str | Path, about: dict) -> None:
    """Render README.md again with what a finished run knows (`about_run`), and record its new checksum in the
    card (a model whose card did not list a README gets one listed)."""
    from distill.models.readme import README, write_readme
    directory = Path(directory)
    card = read_json(directory / MODEL_CARD)
    files = [name for name in card.get("sha256", {}) if name != README]
    write_readme(directory, card, files, about)
    card["sha256"] = {**{name: card["sha256"][name] for name in files}, README: file_sha256(directory / README)}
    write_json(directory / MODEL_CARD, card)


def write_model_card(directory: str | Path, card: dict, files: list[str], about: dict | None = None) -> None:
    """Write the card with the sha256 of each of the model's files (call after they are all saved), after
    the README.md model card for people and the Hub (`distill.models.readme`; `about`: what the model's
    writer knows beyond the card, such as its base model), which the checksums include."""
    from distill.models.readme import README, write_readme
    directory = Path(directory)
    files = [name for name in files if name != README]
    files.append(write_readme(directory, card, files, about))
    write_json(directory / MODEL_CARD, {"format_version": CARD_VERSION, **card,
                                        "sha256": {name: file_sha256(directory / name) for name in files}})


def card_version(card: dict) -> int:
    """The card's format version; cards from before versions were recorded are version 1."""
    return card.get("format_version", 1)


def folder_files(directory: str | Path, folder: str) -> list[str]:
    """Every file below `directory/folder`, as paths relative to `directory` (for the card)."""
    directory = Path(directory)
    return sorted(str(p.relative_to(directory)) for p in (directory / folder).rglob("*") if p.is_file())


def _not_a_config(path: Path) -> str | None:
    """What is wrong with a folder's config.json as a transformers model's (None: nothing, it names its
    architectures or model type, as `distill.models.hub_files.is_transformers_source` asks)."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        return "is not UTF-8 text"
    except OSError as err:
        return f"cannot be read ({err.strerror or err})"
    except ValueError as err:
        return f"is not valid JSON ({err})"
    if not isinstance(config, dict):
        return "is not a JSON object"
    from distill.models.hub_files import misnamed_model
    if misnamed_model(config) is not None:
        return misnamed_model(config)
    return None if "architectures" in config or "model_type" in config else \
        "names neither architectures nor model_type"


def read_model_card(directory: str | Path, unfinished: bool = False) -> dict:
    """The card of a finished model; `unfinished`: also that of an interrupted run's best epoch so far
    (its resume checks the model is whole), which every other reader refuses."""
    directory = Path(directory)
    if not directory.is_dir():
        if directory.exists() or directory.is_symlink():
            raise DistillError(f"{directory}: is {what_is(directory)}, not a model directory")
        raise DistillError(f"{directory}: model directory not found")
    if not unfinished and (directory / RESUME_FILE).exists():
        raise DistillError(f"{directory}: holds an interrupted run ({RESUME_FILE}), not a finished model: finish "
                           f"it with its {option('command and --resume', 'run and resume=True')}, or start over with "
                           f"{named(Output, 'overwrite', 'overwrite=True')}")
    if not (directory / MODEL_CARD).exists():
        wrong = _not_a_config(directory / "config.json") if (directory / "config.json").is_file() else None
        if wrong:  # a transformers folder whose config.json did not read as one
            raise DistillError(f"{directory}: its config.json {wrong}, so it is no transformers model (and there is "
                               f"no {MODEL_CARD}, the card of a model distill wrote)")
        raise DistillError(f"{directory}: not a model directory (no {MODEL_CARD}, the card of a model distill wrote, "
                           "nor config.json, a transformers model's)")
    card = read_json(directory / MODEL_CARD)
    if not isinstance(card, dict) or card.get("kind") not in KINDS:
        raise DistillError(f"{directory / MODEL_CARD}: unknown model kind")
    if not isinstance(card.get("sha256", {}), dict):
        raise DistillError(f"{directory / MODEL_CARD}: its field 'sha256' is {json.dumps(card['sha256'])[:40]}, not "
                           "the checksums of the model's files (a JSON object); restore the card from a good copy or "
                           "retrain")
    version = card_version(card)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise DistillError(f"{directory / MODEL_CARD}: format version {version!r} is not a version (1, 2, ...); "
                           "restore the card from a good copy or retrain")
    if version > CARD_VERSION:
        raise DistillError(f"{directory / MODEL_CARD}: format version {version} is newer than this distill reads "
                           f"({CARD_VERSION}); upgrade distill")
    edited = next((field for field in NAME_FIELDS if field in card and not isinstance(card[field], str)), None)
    if edited is not None:  # the card holds no checksum of itself: a hand-edited name fails here, not as a TypeError
        raise DistillError(f"{directory / MODEL_CARD}: its field {edited!r} is {json.dumps(card[edited])[:40]}, not a "
                           "name (a string); restore the card from a good copy or retrain")
    _check_records(directory / MODEL_CARD, card)
    return card


def _check_records(path: Path, card: dict) -> None:
    """Refuse a card whose export records (`CARD_RECORDS`) are not what distill wrote: another JSON type, a field
    missing or of another type (a bool is no number), so no reader fails on them with a TypeError or KeyError."""
    for record, fields in CARD_RECORDS.items():
        value = card.get(record)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise DistillError(f"{path}: its field {record!r} is {json.dumps(value)[:40]}, not a record (a JSON "
                               "object); restore the card from a good copy or retrain")
        for field, types in fields.items():
            found = value.get(field)
            if (field not in value and type(None) not in types) or isinstance(found, bool) \
                    or not isinstance(found, types):
                shown = "missing" if field not in value else f"{json.dumps(found)[:40]}"
                raise DistillError(f"{path}: its field '{record}.{field}' is {shown}, not what distill writes there; "
                                   "restore the card from a good copy or retrain")
    export = card.get("export") or {}
    for field, known in (("format", EXPORT_FORMATS), ("quantize", EXPORT_QUANTIZATIONS)):  # what an export is
        if export.get(field) is not None and export[field] not in known:
            raise DistillError(f"{path}: its field 'export.{field}' is {json.dumps(export[field])[:40]}, which "
                               f"distill does not write (it writes {', '.join(known)}); restore the card from a good "
                               "copy or retrain")


def model_files(directory: str | Path) -> list[Path]:
    """The files the card of `directory` says make up the model, the card included."""
    directory = Path(directory)
    return [directory / MODEL_CARD, *(directory / name for name in read_model_card(directory).get("sha256", {}))]


def weights_sha256(directory: str | Path, name: str) -> str:
    """The sha256 of a model file: the card's record (checked when the model was loaded), else computed."""
    recorded = read_model_card(directory).get("sha256", {}).get(name)
    return recorded or file_sha256(Path(directory) / name)


def verify_model_files(directory: str | Path, card: dict) -> None:
    """Refuse a model whose files differ from the card's record (missing, edited, truncated, added)."""
    directory = Path(directory)
    recorded = card.get("sha256", {})
    # version 2 lists every file a loader reads; older cards listed fewer, but always the weights (so a version
    # edited down to 1 with its checksums removed does not load unchecked)
    listed = LOADED_FILES if card_version(card) >= 2 else WEIGHT_FILES
    unlisted = [name for name in listed if (directory / name).exists() and name not in recorded]
    if unlisted or not recorded:
        raise DistillError(f"{directory / MODEL_CARD}: records no checksum of "
                           f"{unlisted[0] if unlisted else 'any file'}, so the model cannot be verified; "
                           "restore the card from a good copy or retrain")
    for name, expected in recorded.items():
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise DistillError(f"{directory / MODEL_CARD}: lists {name}, outside the model directory; "
                               "restore the card from a good copy or retrain")
        path = directory / name
        if not path.is_file():
            raise DistillError(f"{directory}: missing {name}; the model is incomplete: restore it from a good copy "
                               "or retrain")
        if file_sha256(path) != expected:
            raise DistillError(f"{path}: corrupted or truncated (sha256 differs from {MODEL_CARD}); "
                               "restore it from a good copy or retrain")
    for folder in SEALED_FOLDERS:
        if card_version(card) < 2 and not any(name.startswith(f"{folder}/") for name in recorded):
            continue  # a card from before every file was recorded: nothing to compare with
        extra = [name for name in folder_files(directory, folder) if name not in recorded]
        if extra:
            raise DistillError(f"{directory / extra[0]}: not part of the model as saved ({MODEL_CARD} does not "
                               "list it); remove it or retrain")
    if card_version(card) >= 2 and "transformers" in (card.get("format"), card.get("model")):
        # transformers' loaders read the folder's tokenizer and weights files by name, listed or not: one dropped
        # in (added_tokens.json, a second vocabulary) changes how text is read, as in a teacher's encoder folder
        from distill.models.hub_files import reads_file
        extra = sorted(path.name for path in directory.iterdir()
                       if path.is_file() and reads_file(path.name) and path.name not in recorded)
        if extra:
            raise DistillError(f"{directory / extra[0]}: not part of the model as saved ({MODEL_CARD} does not "
                               "list it); remove it or retrain")
