"""A model directory is verified whole before use: a damaged, edited or incomplete one is refused before any
prediction, and a planted pickle never runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from distill.errors import DistillError
from distill.models import load_model
from tests.conftest import SAMPLES, copy_of, run_main, write


class Payload:
    """Unpickling this runs code: what a planted checkpoint would do if loaded with plain pickle."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_planted_pickle_is_refused_and_never_runs(tiny_classifier_teacher, tmp_path):
    from distill.io import file_sha256
    from distill.models.card import MODEL_CARD
    teacher = Path(shutil.copytree(tiny_classifier_teacher, tmp_path / "teacher"))
    marker = tmp_path / "pwned"
    checkpoint = torch.load(teacher / "checkpoint.pt", weights_only=True)
    checkpoint["config"] = Payload(marker)
    torch.save(checkpoint, teacher / "checkpoint.pt")
    with pytest.raises(DistillError, match="corrupted or truncated"):
        load_model(teacher)  # the checksum catches the swapped file first...
    card = json.loads((teacher / MODEL_CARD).read_text())
    card["sha256"]["checkpoint.pt"] = file_sha256(teacher / "checkpoint.pt")
    (teacher / MODEL_CARD).write_text(json.dumps(card))
    with pytest.raises(DistillError, match="refused to load: not a plain tensor checkpoint"):
        load_model(teacher)  # ...and weights_only loading refuses it even with a forged checksum
    assert not marker.exists()


def _edit_json(path: Path) -> None:
    data = json.loads(path.read_text())
    data["edited"] = True
    path.write_text(json.dumps(data))


def _sealed_edit(path: Path, edit) -> None:
    """Edit a model file by hand and record its new checksum in the card, as a careful vandal would."""
    from distill.io import file_sha256
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    model = next(p for p in path.parents if (p / "distill.json").exists())
    card = json.loads((model / "distill.json").read_text())
    card["sha256"][str(path.relative_to(model))] = file_sha256(path)
    (model / "distill.json").write_text(json.dumps(card))


def _edit_card(model: Path, edit) -> None:
    card = json.loads((model / "distill.json").read_text())
    edit(card)
    (model / "distill.json").write_text(json.dumps(card))


MODEL_DAMAGE = [
    ("student-card-checksums-removed", "student", lambda d: _edit_card(d, lambda c: c.pop("sha256")),
     "records no checksum of config.json, so the model cannot be verified"),
    # a card edited down to version 1 (which listed the weights alone) with its checksums removed loaded unchecked
    ("student-card-version-1-checksums-removed", "student", lambda d: _edit_card(d, lambda c: (
        c.update(format_version=1), c.pop("sha256"))), "records no checksum of model.safetensors"),
    ("teacher-card-version-1-weights-unlisted", "teacher", lambda d: _edit_card(d, lambda c: (
        c.update(format_version=1), c["sha256"].pop("checkpoint.pt"))), "records no checksum of checkpoint.pt"),
    ("student-weights-unlisted", "student", lambda d: _edit_card(d, lambda c: c["sha256"].pop("model.safetensors")),
     "records no checksum of model.safetensors"),
    ("teacher-encoder-unlisted", "teacher", lambda d: _edit_card(
        d, lambda c: [c["sha256"].pop(n) for n in list(c["sha256"]) if n.startswith("encoder/")]),
     "encoder/config.json: not part of the model as saved"),
    ("student-card-lists-a-file-outside", "student", lambda d: _edit_card(d, lambda c: c["sha256"].update(
        {"../elsewhere.json": "0" * 64})), "outside the model directory"),
    ("student-config-size-a-string", "student", lambda d: _sealed_edit(d / "config.json", lambda c: c["config"].update(
        hidden_dim="16")), "hidden_dim must be a whole number, got '16'"),
    ("student-config-flag-a-string", "student", lambda d: _sealed_edit(d / "config.json", lambda c: c["config"].update(
        lowercase="no")), "lowercase must be true or false, got 'no'"),
    ("teacher-encoder-config-wrong-type", "teacher", lambda d: _sealed_edit(d / "encoder" / "config.json",
                                                                           lambda c: c.update(dim="32")),
     "its files do not make a model"),
    *[(f"student-card-version-{version!r}", "student", lambda d, v=version: _edit_card(d, lambda c: c.update(
        format_version=v)), "is not a version (1, 2, ...)") for version in ("2", 2.0, None, True, -7)],
    *[(f"student-card-{field}-not-a-name", "student", lambda d, f=field: _edit_card(d, lambda c: c.update({f: 5})),
       f"its field {field!r} is 5, not a name") for field in ("class", "model", "task")],
    ("teacher-card-model-a-list", "teacher", lambda d: _edit_card(d, lambda c: c.update(model=["Teacher"])),
     "its field 'model' is [\"Teacher\"], not a name"),
    # the card's task and labels, unread by loading, were copied into an export's card and README as edited
    ("student-card-labels-reordered", "student", lambda d: _edit_card(d, lambda c: c.update(labels=c["labels"][::-1])),
     'distill.json: names the labels ["positive", "negative"], the model\'s are ["negative", "positive"] (the card '
     'was edited after the model was saved)'),
    ("teacher-card-labels-a-string", "teacher", lambda d: _edit_card(d, lambda c: c.update(labels="negative")),
     'distill.json: names the labels "negative", the model\'s are'),
    ("student-card-model-renamed", "student", lambda d: _edit_card(d, lambda c: c.update(model="cnn")),
     "distill.json: names the model 'cnn', the model's config is of 'lstm' (the card was edited after"),
    ("teacher-card-task-tagging", "teacher", lambda d: _edit_card(d, lambda c: c.update(task="tagging")),
     "distill.json: names the task 'tagging', the model's is 'classification'"),
    ("student-vocab-deleted", "student", lambda d: (d / "vocab.json").unlink(), "missing vocab.json"),
    ("student-config-edited", "student", lambda d: _edit_json(d / "config.json"), "corrupted or truncated"),
    ("student-vocab-edited", "student", lambda d: _edit_json(d / "vocab.json"), "corrupted or truncated"),
    ("teacher-tokenizer-config-edited", "teacher", lambda d: _edit_json(d / "encoder" / "tokenizer_config.json"),
     "corrupted or truncated"),
    ("teacher-encoder-config-deleted", "teacher", lambda d: (d / "encoder" / "config.json").unlink(),
     "missing encoder/config.json"),
    ("teacher-tokenizer-file-added", "teacher",
     lambda d: write(d / "encoder" / "special_tokens_map.json", '{"unk_token": "[MASK]"}'), "not part of the model"),
]


@pytest.mark.parametrize("kind, damage, fragment", [c[1:] for c in MODEL_DAMAGE], ids=[c[0] for c in MODEL_DAMAGE])
def test_damaged_model_directories_are_refused_before_any_prediction(kind, damage, fragment, tiny_classifier_teacher,
                                                                     tiny_student, tmp_path, capsys):
    model = copy_of(tiny_student if kind == "student" else tiny_classifier_teacher, tmp_path, "model")
    damage(model)
    status, err = run_main(capsys, "predict", model, SAMPLES / "unlabeled_movies.txt")
    assert status == 2 and fragment in err and len(err.strip().splitlines()) == 1, err
    assert capsys.readouterr().out == "", "predictions were written from a damaged model"
