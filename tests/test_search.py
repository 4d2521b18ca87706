"""`nlp-train search` / `distill.search`: the space as data and its refusals, a search end to end (its files,
the best model, --test for it alone), the budget's choice, pruning, and resuming after SIGTERM or with two
processes on one storage (docs/search.md)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

import pytest
import torch
import yaml

from distill import search
from distill.errors import DistillError
from distill.models import load_model
from distill.student_search import DEFAULT_SPACES, load_space, parse_space
from tests.conftest import ROOT, SAMPLES, broken_package, cli, copy_of, free_port, run_main

TRAIN, DEV, TEST = SAMPLES / "sentiment_train.csv", SAMPLES / "sentiment_dev.csv", SAMPLES / "sentiment_test.csv"
# Two students of distinct sizes, two epochs a trial: seconds a trial here
SPACE = {"students": {"lstm": {"hidden_dim": [4, 24], "embedding_dim": 8},
                      "cnn": {"filters": {"low": 4, "high": 24}, "embedding_dim": 8}},
         "loss": {"kd_loss": ["kl", "mse"], "temperature": {"low": 1.0, "high": 4.0}},
         "training": {"epochs": 2, "lr": {"low": 1.0e-3, "high": 1.0e-2, "log": True}}}


def read_report(folder: Path) -> dict:
    return json.loads((folder / "trials.json").read_text())


# -- the space -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("space, message", [
    ({"students": {"lstm": {"hiden_dim": [8]}}}, r"student 'lstm' has no field 'hiden_dim' \(its fields: "
                                                 r"embedding_dim, .*hidden_dim, layers\)"),
    ({"students": {"rnn": {}}}, r"students: unknown student model 'rnn': choose one of lstm, cnn"),
    ({"students": {"lstm": {"hidden_dim": {"low": 64, "high": 8}}}}, r"students.lstm.hidden_dim: bad range 64 to 8"),
    ({"students": {"lstm": {"hidden_dim": {"low": 0, "high": 8, "log": True}}}}, "a log range needs low above 0"),
    ({"students": {"lstm": {"hidden_dim": [16, 0]}}}, r"students.lstm.hidden_dim: 0: hidden_dim must be >= 1"),
    ({"students": {"lstm": {"hidden_dim": {"low": 8, "high": 16, "stride": 2}}}}, "stride is no part of one"),
    # Optuna rounds a whole range's fractional steps, and cuts a range to its last whole step (to low for a step
    # beyond it) with a warning only: the trials searched another range than the space's
    ({"students": {"lstm": {"hidden_dim": {"low": 8, "high": 16, "step": 1.5}}}}, "a range of whole numbers takes a "
                                                                                  "whole step, got 1.5"),
    ({"students": {"lstm": {"hidden_dim": {"low": 8, "high": 16, "step": 100}}}}, "step 100 does not divide the "
                                                                                  "range 8 to 16 into whole steps"),
    ({"students": {"lstm": {}}, "loss": {"temperature": {"low": 1.0, "high": 4.0, "step": 2.0}}},
     "loss.temperature: step 2.0 does not divide"),
    ({"students": {"lstm-tagger": {}}}, "student 'lstm-tagger' does tagging, and the teacher classification"),
    ({"students": {"lstm": {}}, "loss": {"temprature": 2}}, r"loss has no field 'temprature' \(its fields: kd_loss, "
                                                            r"temperature"),
    ({"students": {"lstm": {}}, "loss": {"kd_loss": ["kl", "l1"]}}, "loss.kd_loss: 'l1': unknown kd loss 'l1'"),
    ({"students": {"lstm": {}}, "training": {"lr": {"low": 0.1, "high": 2.0}}}, r"training.lr: 2.0: lr must be"),
    ({"students": {"lstm": {}}, "optimizer": {}}, "unknown section 'optimizer'"),
    ({"students": {}}, "students: name at least one student"),
    # judged together, before a study is made: a trial drawing both weights 0 failed the search after others ran
    ({"students": {"lstm": {}}, "loss": {"student_weight": [0.0, 0.5], "distill_weight": {"low": 0.0, "high": 1.0}}},
     r"loss: a trial may draw student_weight 0.0, distill_weight 0.0: loss weights must be >= 0 and not both 0"),
    # no trial would take the temperature: each drops it beside mse, which refuses one
    ({"students": {"lstm": {}}, "loss": {"kd_loss": "mse", "temperature": 3.0}}, r"loss.temperature: every trial's "
                                                                                 r"kd_loss is mse"),
    ({"students": {"lstm": {}}, "training": {"select_metric": ["accuracy", "macro_f1"]}},
     r"training.select_metric: the trials are compared on their dev scores, each of its own select metric"),
    ({"students": {"lstm": {}}, "training": {"seed": [1, 2, 3]}}, r"training.seed: the search seeds every trial itself "
                                                                  r"\(seed=, and the reseeded runs"),
])
def test_a_space_is_checked_against_the_classes_it_sets(space, message):
    with pytest.raises(DistillError, match=message):
        parse_space(space, "classification")


def test_a_trial_leaves_out_a_loss_setting_its_other_draws_turn_off():
    """TeacherStudentDistill refuses min_confidence beside a student weight of 0 (it would change nothing), so a
    trial drawing both leaves min_confidence out, as one drawing mse leaves out the temperature; a space in which no
    trial could use it is refused, as one of mse alone with a temperature is."""
    from optuna.trial import FixedTrial
    space = parse_space({"students": {"lstm": {}}, "loss": {"min_confidence": 0.5, "student_weight": [0.0, 0.5],
                                                            "teacher_mistakes": "drop"}}, "classification")
    off = space.sample(FixedTrial({"student": "lstm", "loss.student_weight": 0.0}))
    on = space.sample(FixedTrial({"student": "lstm", "loss.student_weight": 0.5}))
    assert off.loss == {"student_weight": 0.0, "teacher_mistakes": "drop"}
    assert on.loss == {"min_confidence": 0.5, "student_weight": 0.5, "teacher_mistakes": "drop"}
    with pytest.raises(DistillError, match=r"loss: a trial may draw distill_weight 0.0, teacher_mistakes 'shift': "
                                           r"teacher_mistakes shift changes the distillation term"):
        parse_space({"students": {"lstm": {}}, "loss": {"distill_weight": 0.0, "teacher_mistakes": "shift"}},
                    "classification")
    parse_space({"students": {"lstm": {}}, "loss": {"teacher_layers": "0,1", "cosine_weight": [0.0, 1.0]}},
                "classification")


def test_a_registered_students_fields_are_searchable_without_an_edit(monkeypatch):
    """A student registered outside the package (examples/bag_student.py) is searched by its config's fields."""
    from distill.models import registry
    monkeypatch.setattr(registry, "_STUDENTS", registry._STUDENTS.copy())  # the registry is left as it was
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    monkeypatch.delitem(sys.modules, "bag_student", raising=False)
    importlib.import_module("bag_student")
    parsed = parse_space({"students": {"bag": {"embedding_dim": [16, 32], "dropout": {"low": 0.0, "high": 0.5}}}},
                         "classification")
    assert sorted(parsed.students["bag"]) == ["dropout", "embedding_dim"]
    with pytest.raises(DistillError, match=r"student 'bag' has no field 'hidden_dim' \(its fields: embedding_dim"):
        parse_space({"students": {"bag": {"hidden_dim": [8]}}}, "classification")


def test_the_default_spaces_parse_and_a_file_is_read_as_yaml_or_json(tmp_path):
    for task, space in DEFAULT_SPACES.items():
        assert set(parse_space(space, task).students) == set(space["students"])
    (tmp_path / "space.json").write_text(json.dumps(SPACE))
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(SPACE))
    assert load_space(tmp_path / "space.json", "classification").given == SPACE
    assert load_space(tmp_path / "space.yaml", "classification").given == SPACE
    (tmp_path / "bad.json").write_text("{students: ")
    with pytest.raises(DistillError, match=r"bad.json: not valid JSON"):
        load_space(tmp_path / "bad.json", "classification")
    (tmp_path / "twice.yaml").write_text("students:\n  cnn: {filters: 8, filters: 16}\n")  # YAML kept the last
    with pytest.raises(DistillError, match=r"twice.yaml: filters is given twice; give it once"):
        load_space(tmp_path / "twice.yaml", "classification")


def test_print_space_writes_the_default_as_yaml(capsys):
    cli("search", "--print-space", "tagging")
    assert yaml.safe_load(capsys.readouterr().out) == DEFAULT_SPACES["tagging"]
    # alone: it exits before any other option is read, which it would drop in silence (a --space FILE among them)
    status, err = run_main(capsys, "search", "--print-space", "tagging", "--space", "mine.yaml", "--trials", "5")
    assert status == 2 and "--print-space prints a default space and exits: give it alone (it would ignore --space, " \
                           "--trials)" in err
    status, err = run_main(capsys, "search", "--teacher", "t", "--train", "a", "--dev", "b", "--output", "o",
                           "--timeout", "0")  # its help said [x>=0], and the library refused 0 without the option
    assert status == 2 and "Invalid value for '--timeout': 0.0 is not in the range x>0" in err


@pytest.mark.parametrize("package", ["optuna", "sqlalchemy", "matplotlib", "onnx", "onnxruntime"])
def test_a_missing_package_of_the_extra_is_named_before_anything_runs(package, monkeypatch, tiny_classifier_teacher,
                                                                       tmp_path):
    """A missing onnx or onnxruntime was a traceback once the first trial had trained, a missing matplotlib an
    error once every trial had."""
    monkeypatch.setitem(sys.modules, package, None)  # as an uninstalled package: its import fails
    with pytest.raises(DistillError, match=rf"^the student search needs the {package} package: pip install "
                                           r"'distill\[search\]'$"):
        search(tiny_classifier_teacher, TRAIN, DEV, tmp_path / "s", trials=1, space=SPACE)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("storage, message", [
    ("postgresql://me:s3cret@127.0.0.1:1/search", "the study's storage postgresql://me:***@127.0.0.1:1/search needs "
                                                  "the psycopg package: pip install 'distill[postgres]'"),
    ("postgresql+psycopg2://me@127.0.0.1:1/search", "the study's storage postgresql+psycopg2://me@127.0.0.1:1/search "
                                                    "needs the psycopg2 package (SQLAlchemy's postgresql+psycopg2 "
                                                    "driver): install it, or give postgresql://HOST/DB with pip "
                                                    "install 'distill[postgres]'"),
], ids=["postgres-extra", "another-driver"])
def test_a_database_driver_missing_is_named_before_anything_runs(storage, message, monkeypatch, capsys,
                                                                 tiny_classifier_teacher, tmp_path):
    """--storage postgresql://... without the postgres extra's driver was Optuna's line, "Failed to import DB access
    module for the specified storage URL. Please install appropriate one.", naming neither the package nor the
    extra."""
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as an uninstalled package: its import fails
    status, err = run_main(capsys, "search", "--teacher", tiny_classifier_teacher, "--train", TRAIN, "--dev", DEV,
                           "--output", tmp_path / "s", "--trials", "1", "--storage", storage)
    assert status == 2 and err == f"error: {message}\n"
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("package", ["optuna", "sqlalchemy", "matplotlib", "onnx", "onnxruntime"])
def test_a_package_of_the_extra_that_does_not_import_is_one_line_before_anything_runs(package, monkeypatch, capsys,
                                                                                      tiny_classifier_teacher,
                                                                                      tmp_path):
    """Installed, but failing at its import (a dependency missing or of another version, a broken install): it was
    found installed, then the search stopped with the import's traceback (optuna's and sqlalchemy's as the storage
    was opened, matplotlib's once every trial had trained)."""
    broken_package(monkeypatch, tmp_path / "site", package)
    status, err = run_main(capsys, "search", "--teacher", tiny_classifier_teacher, "--train", TRAIN, "--dev", DEV,
                           "--output", tmp_path / "s", "--trials", "1")
    assert status == 2 and err == (f"error: the student search needs the {package} package: pip install "
                                   f"'distill[search]' ({package} is installed, but its import fails: ImportError: "
                                   "libdep.so.1: cannot open shared object file)\n")
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("storage, message", [
    ("study.db", "'study.db' is not a storage URL: give sqlite:///study.db for an SQLite file"),
    ("sqlite:/study.db", "is not a storage URL: give sqlite:///PATH for an SQLite file"),
    ("sqlite://study.db", "sqlite://study.db: an SQLite URL names no host; its file follows three slashes"),
    ("sqlite:///:memory:", "an in-memory SQLite database keeps the study only in this process"),
    ("sqlite://", "an in-memory SQLite database keeps the study only in this process"),
    ("postgresql://me:s3cret@127.0.0.1:1/search", "postgresql://me:***@127.0.0.1:1/search: cannot open the study's "
                                                  "storage"),
], ids=["a-path", "two-slashes-less", "a-host", "memory", "memory-empty", "password"])
def test_a_storage_url_that_cannot_hold_the_study_is_one_line_before_anything_runs(storage, message, capsys,
                                                                                   tiny_classifier_teacher, tmp_path):
    """A file's path (Optuna's own error: "Could not parse SQLAlchemy URL"), an in-memory database (the search ran,
    and its study was gone: no other process joined it, nor did a rerun resume it), and a database's password,
    which the line showed, on the terminal and in any log of it."""
    status, err = run_main(capsys, "search", "--teacher", tiny_classifier_teacher, "--train", TRAIN, "--dev", DEV,
                           "--output", tmp_path / "s", "--trials", "1", "--storage", storage)
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1 and "s3cret" not in err
    assert not (tmp_path / "s").exists()


def test_a_search_writes_nothing_among_a_models_files_nor_for_a_refused_input(tiny_classifier_teacher,
                                                                             tiny_tagging_teacher, tmp_path):
    """Its study, trials and best model would land among the teacher's (or another model's) files; a bad input
    is refused before any folder is made."""
    model = Path(tiny_classifier_teacher)
    before = sorted(p.name for p in model.iterdir())
    student = tmp_path / "student"
    cli("--threads", "1", "student", "--model", "lstm", "--embedding-dim", "8", "--hidden-dim", "8", "--train",
        TRAIN, "--dev", DEV, "--epochs", "1", "--output", student, "--quiet")
    for output, message in ((model, "is an input of this command"), (model / "search", "lies inside"),
                            (student, "is a model directory; a search writes a folder of its own")):
        with pytest.raises(DistillError, match=message):
            search(model, TRAIN, DEV, output, trials=1, space=SPACE)
    assert sorted(p.name for p in model.iterdir()) == before
    for bad in ({"as_fast_as": tmp_path / "missing"}, {"as_fast_as": tiny_tagging_teacher},
                {"train": tmp_path / "missing.csv"},
                {"dev": tmp_path / "missing.csv"}, {"test": tmp_path / "missing.csv"},  # not once the trials are done
                {"unlabeled": tmp_path / "missing.txt"}, {"storage": f"sqlite:///{tmp_path}/no/such/folder/s.db"},
                {"storage": f"sqlite:///{model}/study.db"}, {"storage": f"sqlite:///{student}/study.db"}):
        with pytest.raises(DistillError):
            search(model, **{"train": TRAIN, "dev": DEV, **bad}, output=tmp_path / "out", trials=1, space=SPACE)
        assert not (tmp_path / "out").exists()
    broken = copy_of(model, tmp_path, "broken")
    (broken / "checkpoint.pt").unlink()
    for teacher, train, message in ((model, SAMPLES / "topics_train.csv", "label sets differ"),
                                    (broken, TRAIN, "checkpoint.pt")):  # known once the teacher is loaded
        with pytest.raises(DistillError, match=message):
            search(teacher, train, DEV, tmp_path / "out", trials=1, space=SPACE)
        assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in model.iterdir()) == before  # no study written among the teacher's files
    with pytest.raises(DistillError, match=f"{tiny_tagging_teacher}: as_fast_as is timed on the search's dev data, "
                                           "and this model does tagging, the teacher classification"):
        search(model, TRAIN, DEV, tmp_path / "out", trials=1, space=SPACE, as_fast_as=tiny_tagging_teacher)


@pytest.mark.parametrize("bad, message", [
    ({"space": [1]}, r"space must be a YAML or JSON file's path, a mapping, or None \(the classification default\), "
                     r"got list \[1\]"),
    ({"storage": 5}, r"5 is not a storage URL: give sqlite:///PATH for an SQLite file"),
    ({"cache_dir": 5}, r"cache_dir must be a folder's path \(or None: the default cache\), got int 5"),
    ({"data": None}, r"data must be of type DataOptions"),
    ({"progress": "no"}, r"progress must be True or False, got 'no'"),
    ({"study_name": 5}, r"study_name must be a string"),
    ({"pruner": "median"}, r"pruner must be an Optuna pruner"),
    # a list of models was "['A', 'B']: model directory not found"
    ({"as_fast_as": ["a", "b"]}, r"as_fast_as must be one model directory's path \(the model whose latency is the "
                                 r"budget, or None\), got list \['a', 'b'\]"),
], ids=["space", "storage", "cache_dir", "data", "progress", "study_name", "pruner", "as_fast_as"])
def test_an_argument_of_the_wrong_type_is_one_line_before_anything_is_written(bad, message, tiny_classifier_teacher,
                                                                              tmp_path):
    """The Python API's arguments the command line can only give as text: a list for the space, a number for the
    storage or the cache were TypeErrors, data=None an AttributeError; progress="no" ran with progress bars."""
    with pytest.raises(DistillError, match=message):
        search(tiny_classifier_teacher, TRAIN, DEV, tmp_path / "s", **{"trials": 1, "space": SPACE, **bad})
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("space, name", [
    ({"students": {"lstm": {}}, "distiller": {"unlabeled_ratio": [None, 2]}}, "distiller.unlabeled_ratio"),
    ({"students": {"lstm": {}}, "loss": {"min_confidence": 0.5, "student_weight": 0.5}}, "loss.min_confidence"),
])
def test_a_space_of_unlabeled_settings_without_unlabeled_text_is_refused_before_any_trial(space, name,
                                                                                         tiny_classifier_teacher,
                                                                                         tmp_path):
    """Trial 0 failed, the study and its folder made, with "--unlabeled-ratio applies to unlabeled text ...: drop
    --unlabeled-ratio", an option the search does not take."""
    with pytest.raises(DistillError, match=rf"the search space: {name} applies to unlabeled text, and none was "
                                           rf"given: give unlabeled=, or drop {name} from the space"):
        search(tiny_classifier_teacher, TRAIN, DEV, tmp_path / "s", trials=1, space=space)
    assert not (tmp_path / "s").exists()


def test_a_select_metric_the_task_does_not_score_is_refused_before_any_trial(tiny_classifier_teacher, tmp_path):
    """Every trial failed on it, after the study had recorded the space: the corrected space was then refused as
    another space in that folder."""
    space = {**SPACE, "training": {**SPACE["training"], "select_metric": "f1"}}
    with pytest.raises(DistillError, match=r"the search space: training.select_metric: select metric 'f1' is not "
                                           r"scored for classification"):
        search(tiny_classifier_teacher, TRAIN, DEV, tmp_path / "s", trials=1, space=space)
    assert not (tmp_path / "s").exists()


def test_a_transformer_student_the_teacher_cannot_start_is_refused_before_any_trial(tiny_classifier_teacher, tmp_path):
    """A transformer student of more layers than the 2-layer teacher's (here a range's high end) failed its first
    trial, after the study had recorded the space: the corrected space was then refused as another space in that
    folder."""
    space = {**SPACE, "students": {"transformer": {"layers": {"low": 1, "high": 3}}}}
    with pytest.raises(DistillError, match=r"^the search space: students.transformer: a transformer student of 3 "
                                           r"layers: its encoder has only 2$"):
        search(tiny_classifier_teacher, TRAIN, DEV, tmp_path / "s", trials=1, space=space)
    assert not (tmp_path / "s").exists()


def test_a_transformer_student_deeper_than_its_pretrained_encoder_is_refused_before_any_trial(
        tiny_classifier_teacher, tiny_other_encoder_dir, tmp_path):
    """The same of a pretrained encoder's depth (here 3 layers), read from its config: it was checked only against
    the teacher's, so such a trial failed in the study as the one above did."""
    space = {**SPACE, "students": {"transformer": {"layers": {"low": 1, "high": 4},
                                                   "encoder": [tiny_other_encoder_dir]}}}
    with pytest.raises(DistillError, match=r"^the search space: students.transformer: a transformer student of 4 "
                                           r"layers: its encoder has only 3$"):
        search(tiny_classifier_teacher, TRAIN, DEV, tmp_path / "s", trials=1, space=space)
    assert not (tmp_path / "s").exists()


def test_a_dev_set_of_training_examples_is_refused_before_the_search_starts(tiny_classifier_teacher, tmp_path):
    """It was refused by the first trial that trained, after the folder and study were made; with every trial
    pruned before training (far over the latency budget), never."""
    with pytest.raises(DistillError, match=r"of its examples are also in the training data"):
        search(tiny_classifier_teacher, TRAIN, TRAIN, tmp_path / "s", trials=1, space=SPACE)
    assert not (tmp_path / "s").exists()


def test_a_folder_of_other_files_is_no_search_output(tiny_classifier_teacher, tmp_path):
    """A folder holding a model of its own at best/ (and a trials.json) had both replaced by the search's; an empty
    folder, or one holding only hidden names, is new to the search."""
    folder = tmp_path / "mine"
    (folder / "best").mkdir(parents=True)
    (folder / "best" / "notes.txt").write_text("mine")
    (folder / "trials.json").write_text("{}")
    with pytest.raises(DistillError, match=rf"^{folder}: holds best and more, and no search's trials/: a search "
                                           r"writes its study, trials, reports and best/ there"):
        search(tiny_classifier_teacher, TRAIN, DEV, folder, trials=1, space=SPACE)
    assert sorted(p.name for p in folder.iterdir()) == ["best", "trials.json"]
    assert (folder / "best" / "notes.txt").read_text() == "mine"
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / ".gitkeep").write_text("")
    from distill.student_search.study import check_search_output
    check_search_output(hidden, [])  # accepted: nothing of the user's is named as the search's files


def test_a_student_teacher_is_searched_from_random_word_embeddings_or_refused_before_any_trial(tmp_path):
    """A student has no sub-word embeddings to start word embeddings from: a space that would start them from
    it is refused before the teacher is scored or a folder made, in the space's own words; one fixing
    teacher_embeddings off searches."""
    teacher = tmp_path / "student"
    cli("--threads", "1", "student", "--model", "lstm", "--embedding-dim", "8", "--hidden-dim", "8", "--train",
        TRAIN, "--dev", DEV, "--epochs", "1", "--output", teacher, "--quiet")
    with pytest.raises(DistillError, match=r"the teacher \(lstm\) has no sub-word embeddings to start the "
                                           r"students' word embeddings from: fix distiller: "
                                           r"\{teacher_embeddings: false\} in the search space \(space=\)"):
        search(teacher, TRAIN, DEV, tmp_path / "out", trials=1, space=SPACE)
    assert not (tmp_path / "out").exists()
    cli("export", teacher, "--format", "onnx", "--output", tmp_path / "student.onnx")  # named as kd names it, not
    with pytest.raises(DistillError, match=r"the teacher \(lstm\) has no sub-word"):  # "(OnnxModel)"
        search(tmp_path / "student.onnx", TRAIN, DEV, tmp_path / "out", trials=1, space=SPACE)
    random_start = {**SPACE, "distiller": {"teacher_embeddings": False}}
    result = search(teacher, TRAIN, DEV, tmp_path / "out", trials=1, space=random_start, reseed_top=0)
    assert [t["state"] for t in search_trials(result.report)] == ["complete"]


# -- a search end to end --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def finished_search(tiny_classifier_teacher, tmp_path_factory) -> Path:
    """Three trials through the CLI (the two default students first), the best one and the best default trained
    again with two other seeds, with --test."""
    folder = tmp_path_factory.mktemp("search")
    (folder / "space.yaml").write_text(json.dumps(SPACE))  # JSON is YAML: the students' order is kept
    cli("--threads", "1", "search", "--teacher", tiny_classifier_teacher, "--train", TRAIN, "--dev", DEV,
        "--space", folder / "space.yaml", "--trials", "3", "--output", folder / "out", "--test", TEST,
        "--cache-dir", folder / "cache", "--quiet", "--no-prune", "--reseed-top", "1", "--seeds", "2")
    return folder / "out"


def search_trials(report: dict) -> list[dict]:
    return [t for t in report["trials"] if t["reseed_of"] is None]


def test_the_default_students_are_the_first_trials(finished_search):
    """Trial 0 and 1 are `kd --model lstm` and `kd --model cnn` as their classes default them (a default outside a
    searched range, hidden_dim 150 or filters 100, is kept), with what the space fixes (embedding_dim, epochs)."""
    from distill.models.registry import student_config
    trials = search_trials(read_report(finished_search))
    assert [t["default"] for t in trials] == ["lstm", "cnn", None]
    for trial in trials[:2]:
        settings = trial["settings"]
        full = student_config(trial["default"], embedding_dim=8)
        assert settings["config"] == {key: getattr(full, key) for key in SPACE["students"][trial["default"]]}
        assert settings["loss"] == {"kd_loss": "kl", "temperature": 2.0}
        assert settings["training"] == {"epochs": 2, "lr": 2e-3}
    assert trials[0]["settings"]["config"]["hidden_dim"] == 150 and trials[1]["settings"]["config"]["filters"] == 100
    rows = (finished_search / "trials.md").read_text().splitlines()
    assert "(default lstm) |" in next(row for row in rows if row.startswith("| 0 "))


def test_the_choice_is_the_best_mean_over_reseeded_runs(finished_search):
    """The best trial by dev and the best default (when another) are trained again with seeds 43 and 44, in
    trials of their own; the chosen one is the best mean of its three runs, and the best default is reported
    beside it, scored on --test too."""
    report = read_report(finished_search)
    trials = search_trials(report)
    top = max(trials, key=lambda t: (t["dev_score"], -t["latency_ms"]))
    default = max((t for t in trials if t["default"]), key=lambda t: (t["dev_score"], -t["latency_ms"]))
    candidates = [top["number"]] + ([default["number"]] if default is not top else [])
    assert report["reseeding"] == {"top": 1, "seeds": [43, 44], "candidates": candidates}
    reseeds = [t for t in report["trials"] if t["reseed_of"] is not None]
    assert sorted((t["reseed_of"], t["seed"]) for t in reseeds) == sorted((n, s) for n in candidates for s in (43, 44))
    assert all(t["state"] == "complete" and t["settings"] == report["trials"][t["reseed_of"]]["settings"]
               for t in reseeds)

    def mean(number: int) -> float:
        runs = [report["trials"][number]["dev_score"]] + [t["dev_score"] for t in reseeds if t["reseed_of"] == number]
        return sum(runs) / 3

    best = report["best"]
    assert best["trial"] == max(candidates, key=lambda n: (mean(n), -report["trials"][n]["latency_ms"]))
    assert best["mean_dev"] == pytest.approx(mean(best["trial"])) and len(best["dev_scores"]) == 3
    assert report["default"]["trial"] == default["number"] and report["default"]["student"] == default["default"]
    assert report["default"]["mean_dev"] == pytest.approx(mean(default["number"]))
    assert 0 <= report["default"]["test"]["score"] <= 1
    assert best["mean_dev"] >= report["default"]["mean_dev"]


def test_reseed_top_0_chooses_on_each_trials_own_run_though_the_study_holds_reseeded_runs():
    """--reseed-top 0 is "the best single run": a study resumed with it after a run with reseeding chose on the
    means over the reseeded runs all the same."""
    from distill.student_search import choose_best
    from distill.student_search.report import add_seed_means, best_default

    def record(number, dev, reseed_of=None, default=None):
        return {"number": number, "state": "complete", "within_budget": True, "reseed_of": reseed_of,
                "dev_score": dev, "latency_ms": 1.0, "default": default}
    records = [record(0, 0.80, default="lstm"), record(1, 0.82), record(2, 0.70, reseed_of=1),
               record(3, 0.81, reseed_of=0)]
    add_seed_means(records)  # trial 0: mean 0.805; trial 1: 0.76
    assert choose_best(records, 1)["number"] == 0
    assert choose_best(records, 0)["number"] == 1
    assert best_default(records, 0)["number"] == 0


def test_a_search_writes_its_trials_table_plot_and_best_model(finished_search):
    report = read_report(finished_search)
    trials = search_trials(report)
    assert [t["state"] for t in report["trials"]] == ["complete"] * len(report["trials"])
    assert len(trials) == 3
    for trial in trials:
        assert trial["settings"]["student"] in ("lstm", "cnn")
        assert trial["runtime"] in ("pytorch", "onnxruntime") and trial["latency_ms"] > 0 and trial["size_mb"] > 0
        assert trial["latency_ms"] == min(trial["pytorch_ms"], trial["onnx_ms"])
        assert (finished_search / trial["folder"] / "model.safetensors").is_file()
        if trial["settings"]["loss"]["kd_loss"] == "mse":
            assert "temperature" not in trial["settings"]["loss"]
    best = report["best"]
    model = load_model(finished_search / "best")  # every file checked against its card
    assert type(model).__name__ in ("LSTMClassifier", "CNNClassifier")
    assert json.loads((finished_search / "best-onnx" / "distill.json").read_text())["format"] == "onnx"
    assert (finished_search / "trials.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (finished_search / "trials.md").read_text()
    assert table.count("| complete |") == 3 and f"| {best['trial']} (best" in table
    assert set(report["pareto_latency"]) <= {t["number"] for t in trials} and report["pareto_latency"]
    # --test: the chosen model alone is scored on it (and the best default)
    assert best["test"]["data"] == str(TEST) and 0 <= best["test"]["score"] <= 1
    assert not any("test" in trial for trial in report["trials"])


def test_a_budget_chooses_among_the_trials_within_it(finished_search, tmp_path):
    """The same study reported again with a size budget between its trials' sizes: the trials over it are marked,
    kept, and the best is the best of the others; no trial is run again (3 are wanted, 3 are held)."""
    copy = tmp_path / "out"
    shutil.copytree(finished_search, copy)
    sizes = sorted(t["size_mb"] for t in read_report(copy)["trials"])
    assert sizes[0] < sizes[-1]
    limit = (sizes[0] + sizes[-1]) / 2
    held = len(read_report(copy)["trials"])
    result = search(read_report(copy)["search"]["teacher"], TRAIN, DEV, copy, trials=3, space=SPACE, max_mb=limit,
                    threads=1, cache_dir=tmp_path / "cache", reseed_top=0)
    assert len(result.trials) == held
    trials = search_trials(result.report)
    assert {t["number"] for t in trials if not t["within_budget"]} == {t["number"] for t in trials
                                                                      if t["size_mb"] > limit} != set()
    fits = [t for t in trials if t["size_mb"] <= limit]
    assert result.report["best"]["trial"] == max(fits, key=lambda t: t["dev_score"])["number"]
    assert load_model(result.best).parameter_count() == next(
        t for t in trials if t["number"] == result.report["best"]["trial"])["parameters"]
    # no --test this time: the score on it is kept for the same chosen model, and dropped for another
    assert ("test" in result.report["best"]) == (result.report["best"]["trial"] == read_report(finished_search)[
        "best"]["trial"])


def test_a_trial_just_over_a_models_latency_is_timed_again_beside_it(monkeypatch, tmp_path):
    """A default student of the reference's own architecture was in or out of the budget by the noise of one timing
    (the same model timed six times varied by 22%): one just over it is timed again, alternately with the reference,
    and the budget judges their best times; one far over it, or a budget of a number, is not timed again."""
    from distill.student_search import trial as trial_module
    times = {"reference": iter([11.0, 10.4]), "trial": iter([9.9, 10.6])}
    monkeypatch.setattr(trial_module, "measure", lambda folder, *args, **kwargs: {"latency_ms": next(times[folder.name])})
    job = trial_module.Job.__new__(trial_module.Job)
    job.budget, job.reference = trial_module.Budget(max_latency_ms=10.0), {"model": str(tmp_path / "reference"),
                                                                        "latency_ms": 10.0}
    job.dev_examples, job.batch_size, job.threads, job.output = [], 32, 1, tmp_path
    timed = trial_module.timed_beside_reference({"latency_ms": 10.5}, tmp_path / "trial", job)
    assert timed["beside_reference"] == {"trial_ms": [10.5, 9.9, 10.6], "reference_ms": [10.0, 11.0, 10.4],
                                         "ratio": 0.99}
    assert job.budget.holds(timed) and not job.budget.holds({"latency_ms": 10.5})
    # as fast as the model: at most 5% slower at their best times (a student of the model's own cost)
    assert [job.budget.holds({"latency_ms": 10.5, "beside_reference": {"ratio": ratio}}) for ratio in (1.04, 1.06)] \
        == [True, False]
    assert timed_again_never(trial_module, job, {"latency_ms": 15.5}, tmp_path)  # 1.55x: out of the budget
    job.reference = None  # --max-latency-ms 10: a number, timed once, as the user's
    assert timed_again_never(trial_module, job, {"latency_ms": 10.5}, tmp_path)


def test_a_student_of_the_reference_models_own_settings_is_within_its_budget_untimed(monkeypatch, tmp_path):
    """The quick benchmark's CoNLL search found no default student within the budget of the default student it was
    as fast as, beside three other processes: its one timing was over 1.5x. Equal settings cost the same."""
    from distill.student_search import trial as trial_module
    monkeypatch.setattr(trial_module, "measure", lambda *args, **kwargs: pytest.fail("timed again"))
    settings = {"model": "lstm-tagger", "hidden_dim": 150, "layers": 1, "crf": False}
    for name, config in (("reference", settings), ("trial", settings), ("wider", {**settings, "hidden_dim": 300})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({"config": config, "hierarchy": {}}))
    job = trial_module.Job.__new__(trial_module.Job)
    job.budget, job.reference = trial_module.Budget(max_latency_ms=10.0), {"model": str(tmp_path / "reference"),
                                                                        "latency_ms": 10.0}
    timed = trial_module.timed_beside_reference({"latency_ms": 31.0}, tmp_path / "trial", job)
    assert timed["beside_reference"] == {"same_architecture": True, "ratio": 1.0} and job.budget.holds(timed)
    wider = trial_module.timed_beside_reference({"latency_ms": 31.0}, tmp_path / "wider", job)
    assert "beside_reference" not in wider and not job.budget.holds(wider)  # 3.1x over: out, not timed again


def untrained_prune(trial_module, monkeypatch, tmp_path, untrained: list[float], reference: list[float] | None,
                    config: dict | None = None) -> dict:
    """`_prune_if_far_over_budget` on an lstm trial of `config` given these untrained timings (in turn) and the
    reference model's PyTorch ones (None: a --max-latency-ms budget of 10 ms, no model); the trial's user attrs,
    with ``pruned``."""
    import dataclasses
    import optuna
    import distill.models
    from distill.models.registry import student_config
    from distill.student_search.space import TrialSettings
    times, reference_times = iter(untrained), iter(reference or [])
    monkeypatch.setattr(trial_module, "untrained_latency", lambda settings, job: next(times))
    monkeypatch.setattr(trial_module, "_latency", lambda *args: next(reference_times))
    monkeypatch.setattr(distill.models, "load_model", lambda folder: torch.nn.Identity())
    (tmp_path / "reference").mkdir(exist_ok=True)
    (tmp_path / "reference" / "config.json").write_text(json.dumps(
        {"config": dataclasses.asdict(student_config("lstm", hidden_dim=150)), "hierarchy": {}}))
    job = trial_module.Job.__new__(trial_module.Job)
    job.budget = trial_module.Budget(max_latency_ms=10.0)
    job.reference = None if reference is None else {"model": str(tmp_path / "reference"), "latency_ms": 10.0}
    job.hierarchy, job.dev_examples, job.batch_size, job.threads = object(), [], 32, 1
    attrs: dict = {}
    trial = types.SimpleNamespace(set_user_attr=attrs.__setitem__)
    settings = TrialSettings("lstm", config or {"hidden_dim": 60}, {}, {}, {})
    try:
        trial_module._prune_if_far_over_budget(trial, settings, job, time.perf_counter())
    except optuna.TrialPruned:
        attrs["pruned"] = True
    assert next(times, None) is None and next(reference_times, None) is None  # every timing given was taken
    return attrs


@pytest.mark.parametrize("untrained, reference, config, pruned", [
    ([], [], {"hidden_dim": 150}, False),  # the reference's own settings: never pruned, not even timed
    ([39.0], [], None, False),  # within 4x the 10 ms budget
    ([139.0, 30.0, 45.0], [9.0, 8.0], None, False),  # one spike; best of three beside the reference: 30 <= 4 x 10
    ([139.0, 41.0, 45.0], [9.0, 11.0], None, True),  # over 4x the reference's best (9 ms, the budget's 10 kept)
    ([139.0, 80.0, 85.0], [30.0, 22.0], None, False),  # the machine got slower: 80 <= 4 x 22, the reference's now
    ([139.0, 45.0, 41.0], None, None, True),  # --max-latency-ms: its best timing against the number
])
def test_a_trial_is_pruned_untrained_only_when_its_best_timing_beside_the_reference_is_far_over(
        monkeypatch, tmp_path, untrained, reference, config, pruned):
    """The full CoNLL benchmark's search pruned its own default BiLSTM tagger before training, timed once at 139 ms
    a batch on a busy machine where the trained model of those settings, the reference, takes 8-10 ms: it chose
    without the default it was to beat. The reference's own settings are within its budget; a first timing over
    4x the budget is taken again, alternately with the reference in PyTorch, and the best of each is compared."""
    from distill.student_search import trial as trial_module
    attrs = untrained_prune(trial_module, monkeypatch, tmp_path, untrained, reference, config)
    assert attrs.get("pruned", False) == pruned
    if pruned:
        assert attrs["untrained_ms"] == min(untrained)


def timed_again_never(trial_module, job, measured: dict, tmp_path) -> bool:
    return trial_module.timed_beside_reference(measured, tmp_path / "trial", job) == measured


def test_a_budget_as_fast_as_a_model_is_that_models_latency_timed_here(finished_search, tmp_path):
    """--as-fast-as MODEL: the budget is the model's latency, measured when the search starts in the way every
    trial's is; it is recorded, nothing is written beside the model, and it cannot be given with a number."""
    copy = tmp_path / "out"
    shutil.copytree(finished_search, copy)
    reference = tmp_path / "models" / "reference"
    shutil.copytree(copy / read_report(copy)["trials"][0]["folder"], reference)
    result = search(read_report(copy)["search"]["teacher"], TRAIN, DEV, copy, trials=3, space=SPACE,
                    as_fast_as=reference, threads=1, cache_dir=tmp_path / "cache", reseed_top=0)
    budget = result.report["search"]["budget"]
    assert budget["as_fast_as"]["model"] == str(reference) and budget["as_fast_as"]["latency_ms"] > 0
    assert budget["max_latency_ms"] == budget["as_fast_as"]["latency_ms"]
    assert all(t["within_budget"] == (t["beside_reference"]["ratio"] <= 1.05 if "beside_reference" in t
                                      else t["latency_ms"] <= budget["max_latency_ms"]) for t in result.trials)
    assert [p.name for p in reference.parent.iterdir()] == ["reference"]  # its ONNX timing copy: in the output
    with pytest.raises(DistillError, match=r"as_fast_as sets the latency budget .* give it or max_latency_ms"):
        search(read_report(copy)["search"]["teacher"], TRAIN, DEV, copy, trials=3, space=SPACE,
               as_fast_as=reference, max_latency_ms=5.0, threads=1)


def test_a_study_resumed_with_another_seed_reseeds_after_each_trials_own_seed(finished_search, tmp_path):
    """The reseeded runs' seeds followed the process's --seed: a study of seed 42 resumed with --seed 41 and a third
    seed 'reseeded' its trials with 42, their own run again, counted twice in the mean that chooses. A trial's own
    seed is recorded, and its reseeded runs take the seeds after it, whichever process asks."""
    copy = tmp_path / "out"
    shutil.copytree(finished_search, copy)
    result = search(read_report(copy)["search"]["teacher"], TRAIN, DEV, copy, trials=3, space=SPACE, threads=1,
                    seed=41, reseed_top=1, seeds=3, prune=False, cache_dir=tmp_path / "cache")
    trials = result.report["trials"]
    added = [t for t in trials if t["reseed_of"] is not None and t["seed"] not in (43, 44)]
    assert added and {t["seed"] for t in added} == {45}  # 42 + 3; with --seed 41 it was 42, the trial's own
    assert all(t["seed"] == 42 for t in trials if t["reseed_of"] is None)
    assert result.report["reseeding"]["seeds"] == [43, 44, 45]


def test_a_search_resumed_with_another_space_is_refused(finished_search, tmp_path):
    copy = tmp_path / "out"
    shutil.copytree(finished_search, copy)
    other = {**SPACE, "training": {"epochs": 3}}
    with pytest.raises(DistillError, match=r"study 'distill-search' searched with another space; resume it with "
                                           r"the same one"):
        search(read_report(copy)["search"]["teacher"], TRAIN, DEV, copy, trials=4, space=other, threads=1)
    # other data options read other text or labels from the same files (the study's were the defaults)
    from distill.data import DataOptions
    with pytest.raises(DistillError, match=r"study 'distill-search' searched with other data options \(columns, "
                                           r"label separator\); resume it with the same one"):
        search(read_report(copy)["search"]["teacher"], TRAIN, DEV, copy, trials=4, space=SPACE, threads=1,
               data=DataOptions(separator="::"))


def test_trial_folders_of_another_study_are_refused_not_taken(finished_search, tmp_path):
    """A search whose study.db was removed, or given another --study-name or --storage for the same output, took
    the trial folders it found as its own trials' finished runs, and chose another study's model as best/."""
    teacher = read_report(finished_search)["search"]["teacher"]
    again = dict(trials=3, space=SPACE, threads=1, cache_dir=tmp_path / "cache", reseed_top=0)
    copy = tmp_path / "out"
    shutil.copytree(finished_search, copy)
    report = (copy / "trials.json").read_text()
    (copy / "study.db").unlink()
    with pytest.raises(DistillError, match=r"out: holds the trials of another study \('distill-search', in a storage "
                                           r"this search was not given, or one since removed\)"):
        search(teacher, TRAIN, DEV, copy, **again)
    assert not (copy / "study.db").exists()  # the refused run made no study there
    shutil.copy(finished_search / "study.db", copy / "study.db")
    with pytest.raises(DistillError, match="holds the trials of another study"):
        search(teacher, TRAIN, DEV, copy, study_name="other", **again)
    assert (copy / "trials.json").read_text() == report
    # the study of another folder, given as --storage: its trials' models are not in this output
    with pytest.raises(DistillError, match=r"elsewhere: study 'distill-search' ran its trials in another folder \(its "
                                           r"trials/0000 is not here\): give the output it ran in"):
        search(teacher, TRAIN, DEV, tmp_path / "elsewhere", storage=f"sqlite:///{copy / 'study.db'}", **again)
    assert not (tmp_path / "elsewhere").exists()


def test_a_storage_in_the_search_folder_is_its_own_study_file_alone(finished_search, tmp_path):
    """sqlite:///OUTPUT/study.db, the default named, was refused on a new folder (the storage was opened before the
    folder was made: "unable to open database file"); another file in the folder of a search to resume was taken:
    one in best/ or a trial's folder (models: best/ is replaced whole at the next choice) was written there before
    the study was refused, and trials.json's name would have had the study replaced by the report."""
    from tests.conftest import snapshot
    teacher = read_report(finished_search)["search"]["teacher"]
    again = dict(trials=1, space=SPACE, threads=1, cache_dir=tmp_path / "cache", reseed_top=0)
    named = search(teacher, TRAIN, DEV, tmp_path / "new", storage=f"sqlite:///{tmp_path / 'new' / 'study.db'}",
                   **again)
    assert [t["state"] for t in named.trials] == ["complete"] and (tmp_path / "new" / "study.db").is_file()
    copy = tmp_path / "out"
    shutil.copytree(finished_search, copy)
    before = snapshot(copy)
    for name in ("best/s.db", "trials/0000/s.db", "trials.json", "other.db"):
        with pytest.raises(DistillError, match=rf"^{copy / name}: lies in the search's folder {copy}, whose study is "
                                               rf"{copy / 'study.db'} \(storage=None\): give that, or a file outside "
                                               r"the folder$"):
            search(teacher, TRAIN, DEV, copy, storage=f"sqlite:///{copy / name}", **again)
        assert snapshot(copy) == before


def test_a_cache_in_the_search_folder_is_at_a_name_the_search_does_not_write(finished_search, tmp_path):
    """--cache-dir OUTPUT/best ran, its shards in best/ until the search replaced best/ whole (the cache gone),
    and the same command again was refused (best/ a model by then); one in trials/ sat among the trials' folders,
    one more folder there for a later study to take for a trial's. Another name there is the user's."""
    teacher = read_report(finished_search)["search"]["teacher"]
    again = dict(trials=1, space=SPACE, threads=1, reseed_top=0)
    for name in ("best", "best-onnx/cache", "trials", "trials/cache"):
        with pytest.raises(DistillError, match=rf"^{tmp_path / 'new' / name}: lies in the search's "
                                               rf"{Path(name).parts[0]}, which it writes \("):
            search(teacher, TRAIN, DEV, tmp_path / "new", cache_dir=tmp_path / "new" / name, **again)
        assert not (tmp_path / "new").exists()
    result = search(teacher, TRAIN, DEV, tmp_path / "new", cache_dir=tmp_path / "new" / "cache", **again)
    assert [t["state"] for t in result.trials] == ["complete"] and any((tmp_path / "new" / "cache").iterdir())


def test_a_search_stopped_before_its_first_trial_pins_no_inputs(tiny_classifier_teacher, tmp_path, monkeypatch):
    """A search on a storage of its own (--storage) stopped after it opened the study but before any trial (Ctrl-C
    while the teacher's logits were cached, say) had recorded its inputs with the study: the rerun with the right
    dev data was refused as "other data". The inputs are recorded as the first trial is asked; a study holding
    trials still refuses other data."""
    from distill.student_search import study as study_module
    database = tmp_path / "shared" / "study.db"
    database.parent.mkdir()
    again = dict(trials=1, space=SPACE, threads=1, reseed_top=0, storage=f"sqlite:///{database}")
    wrong = tmp_path / "dev.csv"
    wrong.write_text(DEV.read_text(encoding="utf-8") + "a review the dev set did not have,positive\n", encoding="utf-8")

    def stopped(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(study_module, "_warm_cache", stopped)
    with pytest.raises(KeyboardInterrupt):
        search(tiny_classifier_teacher, TRAIN, wrong, tmp_path / "out", **again)
    assert not (tmp_path / "out").exists() and database.is_file()
    monkeypatch.undo()
    result = search(tiny_classifier_teacher, TRAIN, DEV, tmp_path / "out", **again)
    assert [t["state"] for t in result.trials] == ["complete"]
    with pytest.raises(DistillError, match="study 'distill-search' searched with other data or another teacher"):
        search(tiny_classifier_teacher, TRAIN, wrong, tmp_path / "out", **{**again, "trials": 2})


def test_a_refused_search_leaves_no_storage_file_it_made(finished_search, tmp_path):
    """A new SQLite storage was made before a half-written --as-fast-as model was refused, and by a resume refused
    as another study's: an empty study file was left behind each time."""
    teacher = read_report(finished_search)["search"]["teacher"]
    again = dict(trials=1, space=SPACE, threads=1, cache_dir=tmp_path / "cache", reseed_top=0)
    database = tmp_path / "shared" / "study.db"
    database.parent.mkdir()
    half = tmp_path / "models" / "half"
    shutil.copytree(finished_search / "trials" / "0000", half)
    (half / "model.safetensors").unlink()
    with pytest.raises(DistillError, match="half: missing model.safetensors"):
        search(teacher, TRAIN, DEV, tmp_path / "new", storage=f"sqlite:///{database}", as_fast_as=half, **again)
    assert not (tmp_path / "new").exists() and list(database.parent.iterdir()) == []
    copy = tmp_path / "out"
    shutil.copytree(finished_search, copy)
    with pytest.raises(DistillError, match="holds the trials of another study"):
        search(teacher, TRAIN, DEV, copy, storage=f"sqlite:///{database}", **again)
    assert list(database.parent.iterdir()) == []
    with pytest.raises(DistillError, match=rf"^sqlite:///{tmp_path}/none/study.db: cannot open the study's storage "
                                           rf"\(no folder {tmp_path}/none\)$"):
        search(teacher, TRAIN, DEV, tmp_path / "new", storage=f"sqlite:///{tmp_path}/none/study.db", **again)
    assert not (tmp_path / "none").exists() and not (tmp_path / "new").exists()


def test_a_rerun_makes_a_damaged_best_again_and_removes_one_no_longer_chosen(finished_search, tmp_path):
    """best/ damaged after the search was kept (its trial and card were the same); a rerun whose budget no trial
    fits said 'nothing chosen' and left the earlier best/ and best-onnx/ there."""
    teacher = read_report(finished_search)["search"]["teacher"]
    again = dict(trials=3, space=SPACE, threads=1, cache_dir=tmp_path / "cache", reseed_top=0)
    copy = tmp_path / "out"
    shutil.copytree(finished_search, copy)
    with open(copy / "best" / "model.safetensors", "ab") as handle:
        handle.write(b"x")
    search(teacher, TRAIN, DEV, copy, **again)
    load_model(copy / "best")  # whole again: every file matches its card
    result = search(teacher, TRAIN, DEV, copy, max_mb=1e-6, **again)
    assert result.best is None and not (copy / "best").exists() and not (copy / "best-onnx").exists()
    damaged = tmp_path / "models" / "damaged"  # a refused --as-fast-as leaves no folder behind
    shutil.copytree(copy / "trials" / "0000", damaged)
    with open(damaged / "model.safetensors", "ab") as handle:
        handle.write(b"x")
    with pytest.raises(DistillError, match="damaged/model.safetensors: corrupted or truncated"):
        search(teacher, TRAIN, DEV, tmp_path / "new", as_fast_as=damaged, **again)
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("swap", ["best", "best-onnx", "link"])
def test_a_rerun_copies_the_chosen_trial_again_over_another_model_put_in_best(finished_search, tmp_path, swap):
    """best/ was kept when it was whole, whatever model it held: another model copied there (or best-onnx/ an export
    of another model) stayed the search's chosen model after a rerun that said it saved the trial there; best/ a
    link to another model was kept as the choice. Now best/ must be the trial's copy (its card) and best-onnx/ its
    export, else they are made again; a link is refused, the model it points to untouched."""
    report = read_report(finished_search)
    again = dict(trials=3, space=SPACE, threads=1, cache_dir=tmp_path / "cache", reseed_top=1)
    copy = tmp_path / "out"
    shutil.copytree(finished_search, copy)
    other = copy / next(t["folder"] for t in report["trials"] if t["number"] != report["best"]["trial"])
    if swap == "best":
        shutil.rmtree(copy / "best")
        shutil.copytree(other, copy / "best", ignore=shutil.ignore_patterns("resume.pt"))
    elif swap == "best-onnx":
        shutil.rmtree(copy / "best-onnx")
        cli("export", other, "--output", copy / "best-onnx")
    else:
        shutil.rmtree(copy / "best")
        (copy / "best").symlink_to(other)
        before = {p.name: p.read_bytes() for p in other.iterdir()}
        with pytest.raises(DistillError, match=rf"^{copy / 'best'}: is a symbolic link"):
            search(report["search"]["teacher"], TRAIN, DEV, copy, **again)
        assert {p.name: p.read_bytes() for p in other.iterdir()} == before
        return
    search(report["search"]["teacher"], TRAIN, DEV, copy, **again)
    chosen = copy / next(t["folder"] for t in report["trials"] if t["number"] == report["best"]["trial"])
    assert (copy / "best" / "distill.json").read_bytes() == (chosen / "distill.json").read_bytes()
    exported = json.loads((copy / "best-onnx" / "distill.json").read_text())["export"]
    assert exported["source"] == str(copy / "best")
    load_model(copy / "best-onnx")


@pytest.mark.parametrize("name, what", [("trials.json", "link"), ("trials.md", "folder"), ("best-onnx", "file")])
def test_what_a_search_writes_is_checked_before_it_runs_again(finished_search, tmp_path, name, what):
    """trials.json a link (to the user's data, say), trials.md a folder, best-onnx/ a file: the rerun did its work
    (best/ copied and exported again where it was no longer the same) and failed only at the end, on writing the
    report. Each is refused first, nothing in the folder changed, a link's target untouched."""
    report = read_report(finished_search)
    copy = tmp_path / "out"
    shutil.copytree(finished_search, copy)
    target = tmp_path / "data.csv"
    target.write_text("text,label\n")
    path = copy / name
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    if what == "link":
        path.symlink_to(target)
    elif what == "folder":
        path.mkdir()
    else:
        path.write_text("x")
    (copy / "best" / "distill.json").unlink()  # best/ no longer whole: a rerun would make it again first
    before = {str(p): p.read_bytes() for p in copy.rglob("*") if p.is_file() and not p.is_symlink()}
    with pytest.raises(DistillError, match=rf"^{path}: is a"):
        search(report["search"]["teacher"], TRAIN, DEV, copy, trials=3, space=SPACE, threads=1,
               cache_dir=tmp_path / "cache", reseed_top=1)
    assert {str(p): p.read_bytes() for p in copy.rglob("*") if p.is_file() and not p.is_symlink()} == before
    assert target.read_text() == "text,label\n"


def test_a_damaged_folder_of_the_chosen_trial_is_named_when_the_search_is_run_again(finished_search, tmp_path):
    """The chosen trial's card removed (best/ whole) was an OSError, 'No such file or directory', and its weights
    truncated were taken as the source of the same best/; the trial's folder is checked whole, as when best/ is
    copied from it, and named with its damaged file."""
    teacher = read_report(finished_search)["search"]["teacher"]
    again = dict(trials=3, space=SPACE, threads=1, cache_dir=tmp_path / "cache", reseed_top=1)  # as it chose: no run
    for damage, message in (("distill.json", r"there is no distill.json"),
                            ("model.safetensors", r"model.safetensors: corrupted or truncated")):
        copy = tmp_path / damage
        shutil.copytree(finished_search, copy)
        report = read_report(copy)
        chosen = copy / next(t["folder"] for t in report["trials"] if t["number"] == report["best"]["trial"])
        if damage == "distill.json":
            (chosen / damage).unlink()
        else:
            with open(chosen / damage, "ab") as handle:
                handle.write(b"x")
        written = (copy / "trials.json").read_text()
        with pytest.raises(DistillError, match=rf"^{chosen}.*{message}"):
            search(teacher, TRAIN, DEV, copy, **again)
        assert (copy / "trials.json").read_text() == written
        load_model(copy / "best")


def test_a_removed_folder_of_a_completed_trial_is_named_when_the_search_is_run_again(finished_search, tmp_path):
    """A completed trial's folder removed (not the chosen one's): the search run again exited 0 and its trials.json
    named the folder that was gone as that trial's model. It is named, and nothing is written."""
    report = read_report(finished_search)
    copy = tmp_path / "copy"
    shutil.copytree(finished_search, copy)
    gone = next(t for t in report["trials"] if t["state"] == "complete" and t["number"] != report["best"]["trial"]
                and t["reseed_of"] is None)
    shutil.rmtree(copy / gone["folder"])
    before = {str(p): p.read_bytes() for p in copy.rglob("*") if p.is_file() and p.name != "study.db"}
    with pytest.raises(DistillError, match=rf"^{copy / gone['folder']}: the folder of trial {gone['number']} "
                                           r"\(complete\) is gone: .*put it back, or give another output"):
        search(report["search"]["teacher"], TRAIN, DEV, copy, trials=3, space=SPACE, threads=1,
               cache_dir=tmp_path / "cache", reseed_top=1)
    assert {str(p): p.read_bytes() for p in copy.rglob("*") if p.is_file() and p.name != "study.db"} == before


def test_what_another_command_put_at_a_new_trials_folder_is_never_removed(finished_search, tmp_path):
    """A search run with its output at another search's next trial folder (OUTPUT/trials/NNNN) was made there, and
    that search, run again, emptied the folder to train its trial N there: the other search was gone. The output is
    refused, and a new trial whose folder holds what no trial wrote stops the search, the folder kept."""
    report = read_report(finished_search)
    copy = tmp_path / "copy"
    shutil.copytree(finished_search, copy)
    after = copy / "trials" / f"{max(t['number'] for t in report['trials']) + 1:04d}"
    with pytest.raises(DistillError, match=rf"^{after}: lies in {copy / 'trials'}, which the search in {copy} writes"):
        search(report["search"]["teacher"], TRAIN, DEV, after, trials=1, space=SPACE)
    assert not after.exists()
    after.mkdir()
    (after / "notes.txt").write_text("mine")
    with pytest.raises(DistillError, match=rf"^{after}: holds what no trial of this search wrote"):
        search(report["search"]["teacher"], TRAIN, DEV, copy, trials=4, space=SPACE, threads=1,
               cache_dir=tmp_path / "cache", reseed_top=0)
    assert (after / "notes.txt").read_text() == "mine"


def test_pruned_trials_leave_no_folder_and_defaults_are_never_pruned(tiny_classifier_teacher, tmp_path):
    """A pruner that stops every trial: the two default students still finish (the search only adds to them),
    the third trial is pruned at epoch 1 and its folder removed."""
    import optuna
    result = search(tiny_classifier_teacher, TRAIN, DEV, tmp_path / "s", trials=3, space=SPACE, threads=1,
                    pruner=optuna.pruners.ThresholdPruner(lower=2.0), cache_dir=tmp_path / "cache", reseed_top=0)
    assert [(t["state"], t.get("pruned_at"), t["default"]) for t in result.trials] == \
        [("complete", None, "lstm"), ("complete", None, "cnn"), ("pruned", 1, None)]
    assert result.report["best"]["trial"] in (0, 1)
    assert sorted(p.name for p in (tmp_path / "s" / "trials").iterdir()) == ["0000", "0001", "study.json"]
    assert "pruned at epoch 1" in (tmp_path / "s" / "trials.md").read_text()


def test_a_trial_far_over_the_latency_budget_untrained_is_pruned_before_it_trains(tiny_classifier_teacher, tmp_path,
                                                                                  monkeypatch):
    """A trial that cannot fit the budget (a BiLSTM against a static student's latency) was trained to the end, to be
    refused once trained: a student whose untrained forward pass is over UNTRAINED_SLACK times the budget is pruned
    before it trains (a default too), its folder never made. The untrained latency is real; the decision is given
    a fixed one to be exact."""
    from distill.student_search import trial as trial_module
    timed = []

    def latency(settings, job):
        timed.append(real(settings, job))
        return 1000.0 if settings.student == "lstm" else 0.0
    real = trial_module.untrained_latency
    monkeypatch.setattr(trial_module, "untrained_latency", latency)
    result = search(tiny_classifier_teacher, TRAIN, DEV, tmp_path / "s", trials=2, space=SPACE, threads=1,
                    max_latency_ms=1000.0 / trial_module.UNTRAINED_SLACK - 1, cache_dir=tmp_path / "cache",
                    reseed_top=0)
    assert [(t["state"], t["default"], t.get("untrained_ms")) for t in result.trials] == \
        [("pruned", "lstm", 1000.0), ("complete", "cnn", None)]
    assert len(timed) == 2 + trial_module.BESIDE_ROUNDS and all(ms > 0 for ms in timed)  # the lstm's timed again
    assert sorted(p.name for p in (tmp_path / "s" / "trials").iterdir()) == ["0001", "study.json"]
    assert "pruned untrained (1000.0 ms a batch)" in (tmp_path / "s" / "trials.md").read_text()


def test_an_interrupted_trial_pruned_untrained_when_resumed_leaves_no_folder(tiny_classifier_teacher, tmp_path,
                                                                             monkeypatch):
    """A trial stopped by Ctrl-C leaves its run's resume state in its folder; resumed under a budget it is far over
    (another budget is allowed), it was pruned before training and its folder, resume state and all, was left."""
    from distill.student_search import trial as trial_module
    from tests.conftest import interrupt_evaluation
    arguments = dict(trials=2, space=SPACE, threads=1, cache_dir=tmp_path / "cache", reseed_top=0)
    interrupt_evaluation(monkeypatch)  # epoch 2 of trial 0 (the lstm default), its epoch 1 kept to resume from
    with pytest.raises(KeyboardInterrupt):
        search(tiny_classifier_teacher, TRAIN, DEV, tmp_path / "s", **arguments)
    assert (tmp_path / "s" / "trials" / "0000" / "resume.pt").is_file()
    monkeypatch.undo()
    monkeypatch.setattr(trial_module, "untrained_latency", lambda settings, job: 1000.0 * (settings.student == "lstm"))
    result = search(tiny_classifier_teacher, TRAIN, DEV, tmp_path / "s", **arguments,
                    max_latency_ms=1000.0 / trial_module.UNTRAINED_SLACK - 1)
    assert [(t["state"], t["default"], t["folder"]) for t in result.trials] == \
        [("fail", "lstm", "trials/0000"), ("pruned", "lstm", "trials/0000"), ("complete", "cnn", "trials/0002")]
    assert sorted(p.name for p in (tmp_path / "s" / "trials").iterdir()) == ["0002", "study.json"]


@pytest.mark.parametrize("damage", ["card removed", "resume state truncated", "resume state removed"])
def test_an_interrupted_trial_whose_folder_was_damaged_starts_over_when_the_search_runs_again(
        damage, tiny_classifier_teacher, tmp_path, monkeypatch):
    """An interrupted trial's card removed (its resume.pt kept) failed every rerun with "--overwrite replaces the
    whole folder", an option a search does not take; its resume.pt truncated, with "corrupt or truncated checkpoint"
    and no way on; its resume.pt removed (a SIGKILL between its best model and its resume state), with "already
    holds a student model; pass --overwrite". The folder is the study's own: the trial starts over there."""
    from tests.conftest import interrupt_evaluation
    arguments = dict(trials=1, space=SPACE, threads=1, cache_dir=tmp_path / "cache", reseed_top=0)
    interrupt_evaluation(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        search(tiny_classifier_teacher, TRAIN, DEV, tmp_path / "s", **arguments)
    monkeypatch.undo()
    folder = tmp_path / "s" / "trials" / "0000"
    if damage == "card removed":
        (folder / "distill.json").unlink()
    elif damage == "resume state removed":
        (folder / "resume.pt").unlink()
    else:
        (folder / "resume.pt").write_bytes((folder / "resume.pt").read_bytes()[:1000])
    result = search(tiny_classifier_teacher, TRAIN, DEV, tmp_path / "s", **arguments)
    assert [(t["state"], t["folder"]) for t in result.trials] == [("fail", "trials/0000"), ("complete", "trials/0000")]
    assert not (folder / "resume.pt").exists()
    load_model(folder)
    load_model(tmp_path / "s" / "best")


def test_a_transformers_classifier_is_a_teacher_the_search_takes(tiny_hf_classifier, tmp_path):
    """The teacher-kind table takes a transformers classifier's folder in the search as kd does (it was refused as
    if it were a multi-task teacher); what the search cannot take is refused with the table's line."""
    space = {"students": {"lstm": {"hidden_dim": [4], "embedding_dim": 8}}, "training": {"epochs": 1}}
    result = search(tiny_hf_classifier, TRAIN, DEV, tmp_path / "s", trials=1, space=space, threads=1,
                    cache_dir=tmp_path / "cache", reseed_top=0)
    assert [t["state"] for t in result.trials] == ["complete"] and result.best is not None
    assert result.report["search"]["teacher"] == tiny_hf_classifier
    multitask = tmp_path / "multitask"  # its card is all the table reads
    multitask.mkdir()
    (multitask / "distill.json").write_text(json.dumps({"kind": "multitask-teacher", "heads": {"a": {}, "b": {}}}))
    with pytest.raises(DistillError, match=r"multitask: search does not take a multi-task teacher \(its heads: a, "
                                           r"b\); use evaluate_model\(head=...\), compare_models\(head=...\) and "
                                           r"predict_file instead, or "
                                           r"distil a head with DistillSettings\(head=...\)"):
        search(multitask, TRAIN, DEV, tmp_path / "t", trials=1, space=space)
    with pytest.raises(DistillError, match=r"multitask: search does not take a multi-task teacher"):  # nor times one
        search(tiny_hf_classifier, TRAIN, DEV, tmp_path / "t", trials=1, space=space, as_fast_as=multitask)
    assert not (tmp_path / "t").exists()


def test_a_budget_as_fast_as_a_transformers_classifier_times_its_folder(tiny_hf_classifier, tmp_path):
    """The table takes a transformers classifier's folder as --as-fast-as; its size was read from a model card it
    does not have ("not a model directory (no distill.json ... nor config.json)"): now from the files it loads."""
    space = {"students": {"lstm": {"hidden_dim": [4], "embedding_dim": 8}}, "training": {"epochs": 1}}
    result = search(tiny_hf_classifier, TRAIN, DEV, tmp_path / "s", trials=1, space=space, threads=1,
                    cache_dir=tmp_path / "cache", reseed_top=0, as_fast_as=tiny_hf_classifier)
    timed = result.report["search"]["budget"]["as_fast_as"]
    folder = Path(tiny_hf_classifier)
    loaded = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt"]
    assert timed["pytorch_mb"] * 1e6 == sum((folder / name).stat().st_size for name in loaded
                                             if (folder / name).is_file())


def test_the_pruner_compares_a_trial_with_its_own_student_family_only():
    """Epoch-2 scores: two finished BiLSTMs at 0.80 and 0.82, a static student at 0.70. A median over every
    trial (the old pruner) would stop the static student; the family pruner has no two static students to
    compare it with and lets it run, and stops a BiLSTM at 0.75."""
    import optuna
    from optuna.distributions import CategoricalDistribution

    from distill.student_search import FamilyPruner
    study = optuna.create_study(direction="maximize")
    student = {"student": CategoricalDistribution(["lstm", "static"])}
    for score in (0.80, 0.82, 0.81):
        study.add_trial(optuna.trial.create_trial(params={"student": "lstm"}, distributions=student, value=score,
                                                  intermediate_values={1: score - 0.1, 2: score}))

    def running(name: str, score: float):
        trial = optuna.trial.create_trial(params={"student": name}, distributions=student, value=None,
                                          state=optuna.trial.TrialState.RUNNING,
                                          intermediate_values={1: score - 0.1, 2: score})
        return trial

    assert optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=2).prune(study, running("static", 0.70))
    assert not FamilyPruner().prune(study, running("static", 0.70))
    assert FamilyPruner().prune(study, running("lstm", 0.75))
    assert not FamilyPruner().prune(study, running("lstm", 0.85))


def test_the_time_budget_stops_starting_trials(tiny_classifier_teacher, tmp_path):
    """A budget of a millisecond: the first trial (the first default student) starts, as nothing is spent yet,
    and once it has taken longer no other starts, nor any reseeded run; resuming starts none either."""
    for _ in range(2):
        result = search(tiny_classifier_teacher, TRAIN, DEV, tmp_path / "s", trials=4, space=SPACE, threads=1,
                        time_budget=0.001, cache_dir=tmp_path / "cache")
        assert [(t["number"], t["state"], t["default"]) for t in result.trials] == [(0, "complete", "lstm")]
        assert result.report["stopped"] == "time budget"
        assert result.report["time_budget"]["spent"] >= result.report["time_budget"]["seconds"] == 0.001
    for budget in (0, float("inf")):  # inf as --time-budget inf is refused: no budget is None
        with pytest.raises(DistillError, match="time_budget must be a number in"):
            search(tiny_classifier_teacher, TRAIN, DEV, tmp_path / "s", trials=4, space=SPACE, time_budget=budget)


# -- interrupted, resumed, shared ------------------------------------------------------------------------------

def search_arguments(teacher: str, output: Path, space: Path, trials: int, reseed_top: int = 0) -> list[str]:
    return ["--threads", "1", "search", "--teacher", teacher, "--train", str(TRAIN), "--dev", str(DEV), "--space",
            str(space), "--trials", str(trials), "--output", str(output), "--cache-dir", str(output.parent / "cache"),
            "--quiet", "--no-prune", "--reseed-top", str(reseed_top), "--seeds", "1"]


@pytest.mark.parametrize("threads_again", [1, 2])
def test_sigterm_during_a_trial_then_the_same_command_loses_and_repeats_no_trial(threads_again, tiny_classifier_teacher,
                                                                                 tmp_path, caplog):
    """SIGTERM in trial 0's third epoch (sent to this process, as `kill` would): the command ends as a terminated
    run does (143), trial 0 is failed and queued again; the same command then continues its run from its last
    finished epoch and runs trial 1: two complete trials, each setting trained once, each epoch of trial 0's run
    once. Run again from Python at other torch threads (the latency's threads fixed, as the benchmark does), where
    that run cannot be continued exactly, the retried trial's run starts over (said once) and the search goes on."""
    from distill.training import runtime
    from procedures.cli import main
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump({**SPACE, "training": {"epochs": 12, "patience": 12, "lr": 0.003}}))
    output = tmp_path / "out"
    arguments = search_arguments(tiny_classifier_teacher, output, space, 2)
    log = output / "trials" / "0000" / "metrics.jsonl"

    def terminate_in_the_third_epoch() -> None:
        deadline = time.monotonic() + 240
        while not (log.is_file() and len(log.read_text().splitlines()) >= 2) and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGTERM)

    watcher = threading.Thread(target=terminate_in_the_third_epoch)
    watcher.start()
    with pytest.raises(SystemExit) as stopped:
        main(arguments)
    watcher.join()
    assert stopped.value.code == 128 + signal.SIGTERM
    assert (output / "trials" / "0000" / "resume.pt").is_file()
    caplog.clear()
    if threads_again == 1:
        cli(*arguments)
    else:
        with runtime(None, threads_again):
            search(tiny_classifier_teacher, TRAIN, DEV, output, trials=2, space=space, threads=1, prune=False,
                   reseed_top=0, seeds=1, cache_dir=output.parent / "cache")
    started_over = [r.message for r in caplog.records if "it starts over" in r.message]
    assert len(started_over) == (threads_again != 1) and all("runtime.threads" in m for m in started_over)
    trials = read_report(output)["trials"]
    assert [(t["number"], t["state"], t["retry_of"]) for t in trials] == \
        [(0, "fail", None), (1, "complete", 0), (2, "complete", None)]
    assert trials[1]["settings"] == trials[0]["settings"] and trials[1]["folder"] == "trials/0000"
    assert trials[2]["settings"] != trials[0]["settings"] and trials[2]["folder"] == "trials/0002"
    epochs = [json.loads(line)["epoch"] for line in log.read_text().splitlines()]
    assert epochs == list(range(1, 13))
    assert not (output / "trials" / "0000" / "resume.pt").exists()


def test_a_trial_whose_process_was_killed_outright_runs_again_when_the_search_runs_again_at_once(
        tiny_classifier_teacher, tmp_path):
    """SIGKILL in trial 0's second epoch leaves it running in the study until its heartbeat goes stale (minutes):
    the search run again at once counted it as running elsewhere, ran trial 1 alone, and chose (exit 0) without
    the default student of trial 0. Its process, of this machine, is gone: the trial is failed and queued again
    at once, and its run continues from its first epoch."""
    output = tmp_path / "out"
    killed = subprocess.run([sys.executable, "-c", f"""
import os, signal, sys
sys.path.insert(0, {str(ROOT)!r})
import distill.training
from distill import search
real, calls = distill.training.evaluate, []
def evaluate(*args, **kwargs):
    calls.append(1)
    if len(calls) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)
distill.training.evaluate = evaluate
search({tiny_classifier_teacher!r}, {str(TRAIN)!r}, {str(DEV)!r}, {str(output)!r}, trials=2, space={SPACE!r},
       threads=1, cache_dir={str(tmp_path / "cache")!r}, reseed_top=0)
"""], env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    result = search(tiny_classifier_teacher, TRAIN, DEV, output, trials=2, space=SPACE, threads=1,
                    cache_dir=tmp_path / "cache", reseed_top=0)
    assert [(t["state"], t["retry_of"], t["folder"], t["default"]) for t in result.trials] == \
        [("fail", None, "trials/0000", "lstm"), ("complete", 0, "trials/0000", "lstm"),
         ("complete", None, "trials/0002", "cnn")]
    log = output / "trials" / "0000" / "metrics.jsonl"
    assert [json.loads(line)["epoch"] for line in log.read_text().splitlines()] == [1, 2]


def test_a_reseeded_run_stopped_by_ctrl_c_leaves_no_other_run_behind_when_the_search_resumes(tiny_classifier_teacher,
                                                                                              tmp_path, monkeypatch):
    """Ctrl-C in the first reseeded run queues it again; the resumed search queued the next reseeded run beside
    it, `study.ask` took the older one, and the search stopped with the newer one still waiting: the chosen
    trial's mean was over fewer seeds than asked. Every queued run now runs."""
    import distill.student_search.study as study_module
    run_trial = study_module.run_trial
    stopped = []

    def interrupted(trial, job):
        if "reseed_of" in trial.user_attrs and not stopped:
            stopped.append(trial.number)
            raise KeyboardInterrupt
        return run_trial(trial, job)
    monkeypatch.setattr(study_module, "run_trial", interrupted)
    arguments = dict(trials=1, space=SPACE, prune=False, reseed_top=1, seeds=2, cache_dir=tmp_path / "cache")
    with pytest.raises(KeyboardInterrupt):
        search(tiny_classifier_teacher, TRAIN, DEV, tmp_path / "out", **arguments)
    result = search(tiny_classifier_teacher, TRAIN, DEV, tmp_path / "out", **arguments)
    assert "waiting" not in result.report["states"], result.report["states"]
    reseeded = [t for t in result.report["trials"] if t["reseed_of"] is not None and t["state"] == "complete"]
    assert sorted(t["seed"] for t in reseeded) == [43, 44]


def test_a_default_student_whose_trial_failed_runs_again_when_the_search_is_run_again(tiny_classifier_teacher, tmp_path,
                                                                                       monkeypatch):
    """An error in the first default student's trial (here its measuring, after training) stops the search with it,
    the trial recorded as failed; the same search run again runs that default student again from the failed
    trial's folder (its finished run measured, not trained again): no default student is left out of the study."""
    import distill.student_search.trial as trial_module
    measure = trial_module.measure

    def fails(*args, **kwargs):
        raise DistillError("the disk is full")
    monkeypatch.setattr(trial_module, "measure", fails)
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(SPACE))
    output = tmp_path / "out"
    arguments = dict(trials=2, space=space, prune=False, reseed_top=0, seeds=1, cache_dir=tmp_path / "cache")
    with pytest.raises(DistillError, match="the disk is full"):
        search(tiny_classifier_teacher, TRAIN, DEV, output, **arguments)
    log = output / "trials" / "0000" / "metrics.jsonl"
    trained = log.read_text()
    monkeypatch.setattr(trial_module, "measure", measure)
    trials = search(tiny_classifier_teacher, TRAIN, DEV, output, **arguments).trials
    first, second = trials[0]["default"], ({"lstm", "cnn"} - {trials[0]["default"]}).pop()
    assert [(t["state"], t["default"], t["folder"]) for t in trials] == \
        [("fail", first, "trials/0000"), ("complete", first, "trials/0000"), ("complete", second, "trials/0002")]
    assert "the disk is full" in trials[0]["error"] and log.read_text() == trained


def test_two_processes_share_one_study(tiny_classifier_teacher, tmp_path):
    """Two processes (another and this one) on one folder, so one SQLite storage: two trials in all, one each, the
    second joining while the first runs (the two default students), then the best one's reseeded run, by the
    process that has none left to wait for or by the one that waited."""
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump({**SPACE, "training": {"epochs": 3, "patience": 3}}))
    output = tmp_path / "out"
    arguments = search_arguments(tiny_classifier_teacher, output, space, 2, reseed_top=1)
    other = subprocess.Popen([sys.executable, "-m", "procedures.cli", *arguments], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    deadline = time.monotonic() + 240
    while not (output / "trials" / "0000").is_dir() and time.monotonic() < deadline:  # the other one has begun
        assert other.poll() is None, other.communicate()
        time.sleep(0.05)
    cli(*arguments)
    _, err = other.communicate(timeout=300)
    assert other.returncode == 0, err
    report = read_report(output)
    trials = search_trials(report)
    assert [t["state"] for t in report["trials"]] == ["complete"] * 3
    assert sorted(t["folder"] for t in trials) == ["trials/0000", "trials/0001"]
    assert len({json.dumps(t["settings"], sort_keys=True) for t in trials}) == 2
    assert len({t["process"] for t in trials}) == 2
    reseeded = report["trials"][2]
    assert (reseeded["reseed_of"], reseeded["seed"]) == (report["reseeding"]["candidates"][0], 43)


def test_the_next_step_is_decided_on_one_reading_of_the_study():
    """Two processes, trial 0 (lstm, dev 0.567) done, trial 1 (cnn, 0.583) running in the other: the study was read
    twice for one decision, and the other process's trial finished in between was running in one reading (no
    reseeding candidate) and complete in the other (nothing left to wait for), so the lstm was reseeded, not the
    best trial. The decision is taken on the reading it is given, and reads the study no more."""
    import datetime
    import optuna
    from distill.student_search import study as study_module
    from distill.student_search.trial import Budget, Job

    def trial(number, student, state, dev=None):
        attrs = {"default": student, "settings": {"student": student}, "folder": f"trials/{number:04d}",
                 "seconds": 1.0}
        if dev is not None:
            attrs.update(measured={"latency_ms": 1.0, "size_mb": 0.1}, dev={"score": dev, "metric": "accuracy"})
        return optuna.trial.FrozenTrial(
            number=number, state=state, value=dev, datetime_start=datetime.datetime.now(),
            datetime_complete=datetime.datetime.now() if dev is not None else None, params={}, distributions={},
            user_attrs=attrs, system_attrs={}, intermediate_values={}, trial_id=number + 1)

    class Study:  # the study another process changes: read only through the decision's argument
        enqueued: list = []

        def get_trials(self, deepcopy=True):
            raise AssertionError("the decision read the study again")

        def enqueue_trial(self, params, user_attrs):
            self.enqueued.append(user_attrs)

    job = Job.__new__(Job)
    job.budget, job.time_budget, job.reseed_top, job.seeds, job.seed = Budget(), None, 1, 1, 42
    states = optuna.trial.TrialState
    running = [trial(0, "lstm", states.COMPLETE, 0.567), trial(1, "cnn", states.RUNNING)]
    assert study_module._next_trial(Study(), job, 2, running) == ("wait", None) and Study.enqueued == []
    done = [running[0], trial(1, "cnn", states.COMPLETE, 0.583)]
    assert study_module._next_trial(Study(), job, 2, done) == ("ask", None)
    assert [(attrs["reseed_of"], attrs["seed"]) for attrs in Study.enqueued] == [(1, 43)]


@pytest.fixture
def postgresql(tmp_path):
    """A throwaway PostgreSQL server on 127.0.0.1 (a free port, trust authentication), its cluster made with
    initdb and started with pg_ctl; its URL. As root (CI), the server runs as the postgres user, as PostgreSQL
    refuses root. Skipped, with its reason, where the server or the driver is missing or it does not start."""
    if importlib.util.find_spec("psycopg") is None:
        pytest.skip("the PostgreSQL driver is missing: pip install 'distill[postgres]'")
    binaries = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    pg_ctl = str(binaries[-1]) if binaries else shutil.which("pg_ctl")
    if pg_ctl is None:
        pytest.skip("PostgreSQL's server is not installed (Debian: apt-get install postgresql)")
    as_user: list[str] = []
    cluster = Path(tempfile.mkdtemp(prefix="distill-pg-"))  # not under tmp_path: the postgres user must reach it
    if os.geteuid() == 0:
        import pwd
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root, and there is no postgres user to run PostgreSQL's server as")
        os.chown(cluster, owner.pw_uid, owner.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    port, data = free_port(), cluster / "data"
    initdb = [*as_user, str(Path(pg_ctl).parent / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-N"]
    start = [*as_user, pg_ctl, "-D", str(data), "-l", str(cluster / "log"), "-w", "-t", "180", "-o",
             f"-p {port} -k {cluster} -c listen_addresses=127.0.0.1 -c fsync=off", "start"]
    for command in (initdb, start):
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            log = (cluster / "log").read_text() if (cluster / "log").is_file() else ""
            shutil.rmtree(cluster, ignore_errors=True)
            pytest.skip(f"PostgreSQL did not start: {(done.stderr + log).strip()[-300:]}")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True, timeout=120)
        shutil.rmtree(cluster, ignore_errors=True)


def test_two_processes_share_a_search_on_a_postgresql_server(postgresql, tiny_classifier_teacher, tmp_path):
    """Two processes (as two machines would: each its own --seed) on one study in a real PostgreSQL server and
    one search folder, the second started once the first has begun: three trials in all, each trained once,
    whichever process took it; the best chosen once."""
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump({**SPACE, "training": {"epochs": 2, "patience": 2}}))
    output = tmp_path / "out"
    arguments = [*search_arguments(tiny_classifier_teacher, output, space, 3), "--storage", postgresql]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    processes = []
    for seed in (1, 2):  # the second once the first has made the study's tables (a race in optuna's schema creation)
        processes.append(subprocess.Popen([sys.executable, "-m", "procedures.cli", *arguments, "--seed", str(seed)],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT))
        deadline = time.monotonic() + 300
        while not (output / "trials" / "0000").is_dir() and time.monotonic() < deadline:
            assert processes[0].poll() is None, processes[0].communicate()
            time.sleep(0.05)
    done = [process.communicate(timeout=600) for process in processes]
    assert [process.returncode for process in processes] == [0, 0], [err[-2000:] for _, err in done]
    assert not (output / "study.db").exists()  # the study is in the server
    trials = read_report(output)["trials"]
    assert [t["state"] for t in trials] == ["complete"] * 3
    assert sorted(t["folder"] for t in trials) == ["trials/0000", "trials/0001", "trials/0002"]
    assert len({json.dumps(t["settings"], sort_keys=True) for t in trials}) == 3
    assert {t["process"].split(":")[1] for t in trials} <= {str(process.pid) for process in processes}
    report = read_report(output)
    assert report["best"]["trial"] in {t["number"] for t in trials} and (output / "best" / "distill.json").is_file()
    assert sorted(p.name for p in (output / "trials").iterdir()) == ["0000", "0001", "0002", "study.json"]
