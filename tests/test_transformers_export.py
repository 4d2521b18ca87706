"""`nlp-train export --format transformers` and the README model card of every model folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from torch import nn
from transformers import (AutoConfig, AutoModelForSequenceClassification, AutoModelForTokenClassification,
                          AutoTokenizer, pipeline)

from distill.errors import DistillError
from distill.export import export_model
from distill.hf_model import max_logit_difference, stock_transformers
from distill.inference import decode_labels, predict_logits
from distill.models import load_model
from distill.models.registry import student_config
from distill.trainers import new_student
from tests.conftest import SAMPLES, cli

TEXTS = ["a witty , heartfelt film", "the plot is stale and the acting worse", "fine"]
SENTENCES = [["Peter", "lives", "in", "Paris"], ["EU", "rejects", "German", "call"]]  # within max_length


@pytest.fixture(scope="module")
def transformer_students(tiny_classifier_teacher, tiny_tagging_teacher, tmp_path_factory) -> dict[str, str]:
    """A transformer student and a transformer tagger (all their teacher's layers), saved."""
    folders = {}
    for teacher_dir, name in ((tiny_classifier_teacher, "transformer"), (tiny_tagging_teacher, "transformer-tagger")):
        teacher = load_model(teacher_dir)
        examples = TEXTS if teacher.task == "classification" else SENTENCES
        student = new_student(student_config(name, layers=1), teacher.hierarchy, examples, 0, teacher)
        folders[name] = str(student.save_pretrained(tmp_path_factory.mktemp("student") / name))
    return folders


def source_of(request, which: str) -> str:
    if which.startswith("transformer"):
        return request.getfixturevalue("transformer_students")[which]
    return request.getfixturevalue(which)


@pytest.mark.parametrize("which", ["tiny_classifier_teacher", "tiny_tagging_teacher", "transformer",
                                   "transformer-tagger"])
def test_a_transformers_export_loads_with_auto_classes_and_pipeline(request, tmp_path, which):
    source = source_of(request, which)
    out = tmp_path / "hf"
    cli("export", source, "--format", "transformers", "--output", out)
    ours = load_model(source)
    network = getattr(ours, "network", ours)
    classification = ours.task == "classification"
    assert AutoConfig.from_pretrained(out).id2label == dict(enumerate(ours.hierarchy.labels))
    auto = AutoModelForSequenceClassification if classification else AutoModelForTokenClassification
    model, info = auto.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    model.eval()
    examples = TEXTS if classification else SENTENCES
    if classification:  # the saved tokenizer, as a user of the folder runs it
        tokenizer = AutoTokenizer.from_pretrained(out)
        with torch.no_grad():
            theirs = model(**tokenizer(examples, padding=True, truncation=True, return_tensors="pt")).logits
        assert (theirs - predict_logits(ours, examples).logits).abs().max() <= 1e-5
    else:
        assert max_logit_difference(network, model, examples) <= 1e-5
    task = "text-classification" if classification else "token-classification"
    run = pipeline(task, model=str(out), device="cpu")
    expected = decode_labels(ours, predict_logits(ours, examples))
    if classification:
        assert [result["label"] for result in run(examples)] == expected
    else:
        for words, tags in zip(examples, expected):
            text = " ".join(words)
            starts = [sum(len(w) + 1 for w in words[:i]) for i in range(len(words))]
            by_start = {token["start"]: token["entity"] for token in run(text, ignore_labels=[])}
            assert [by_start[start] for start in starts] == tags
    # distill loads it too (a teacher: the transformers classifier), every file checked against its card
    assert load_model(out).predict(examples) == expected
    card = json.loads((out / "distill.json").read_text())
    assert card["format"] == "transformers" and {"config.json", "model.safetensors", "README.md"} <= set(card["sha256"])


def test_a_head_without_pre_classifier_is_exact_through_distilberts_relu(tiny_classifier_teacher):
    """DistilBertForSequenceClassification's ReLU never clips: its pre_classifier adds a shift above the
    bound of the encoder's last LayerNorm, which the classifier's bias takes back."""
    teacher = load_model(tiny_classifier_teacher)
    assert teacher.pre_classifier is None and teacher.config.pooling == "first"
    model, _ = stock_transformers(teacher, "t")
    hidden = teacher.encoder(**teacher.prepare(TEXTS)[0]).last_hidden_state[:, 0]
    assert (model.pre_classifier(hidden) > 0).all()
    teacher.pre_classifier = nn.Linear(32, 32)  # with one: DistilBERT's head as it is
    model, _ = stock_transformers(teacher, "t")
    assert torch.equal(model.pre_classifier.weight, teacher.pre_classifier.weight)


def test_a_windowed_head_is_refused(tiny_classifier_teacher):
    teacher = load_model(tiny_classifier_teacher)
    teacher.config.long_inputs = "windows"
    with pytest.raises(DistillError, match="has no stock transformers form") as error:
        stock_transformers(teacher, "t")
    assert "reads a long text in windows" in str(error.value) and "format='onnx'" in str(error.value)


@pytest.mark.parametrize("pre_classifier", [False, True])
def test_a_mean_pooling_teacher_exports_with_its_head_class_beside_it(tiny_classifier_teacher, tmp_path,
                                                                       pre_classifier):
    """No stock class pools by the mean (the default of sentence-transformers encoders such as minilm-l6): the
    export ships distill's class as remote code; distill loads such a folder with its own copy of the class."""
    teacher = load_model(tiny_classifier_teacher)
    teacher.config.pooling = "mean"
    if pre_classifier:
        teacher.config.pre_classifier, teacher.pre_classifier = True, nn.Linear(32, 32)
    source = teacher.save_pretrained(tmp_path / "mean")
    out = tmp_path / "hf"
    cli("export", source, "--format", "transformers", "--output", out)
    assert (out / "modeling_distill.py").is_file() and "modeling_distill.py" in json.loads(
        (out / "distill.json").read_text())["sha256"]
    assert 'pipeline("text-classification", model="PATH", trust_remote_code=True)' in (out / "README.md").read_text()
    model, info = AutoModelForSequenceClassification.from_pretrained(out, trust_remote_code=True,
                                                                     output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    assert type(model).__name__ == "DistillTeacherForSequenceClassification" and model.config.classifier_pooling == "mean"
    tokenizer = AutoTokenizer.from_pretrained(out, trust_remote_code=True)
    with torch.no_grad():
        theirs = model.eval()(**tokenizer(TEXTS, padding=True, truncation=True, return_tensors="pt")).logits
    assert (theirs - predict_logits(teacher, TEXTS).logits).abs().max() <= 1e-5
    expected = decode_labels(teacher, predict_logits(teacher, TEXTS))
    run = pipeline("text-classification", model=str(out), trust_remote_code=True, device="cpu")
    assert [result["label"] for result in run(TEXTS)] == expected
    assert load_model(out).predict(TEXTS) == expected
    # without trust_remote_code transformers built a stock DistilBertForSequenceClassification of it (first token, a
    # random dense layer: other labels), saying so only in a load report; its model type now has no stock class (in
    # a fresh process: one that loaded the class with trust_remote_code keeps it registered)
    loaded = subprocess.run([sys.executable, "-c", "import sys; from transformers import "
                             "AutoModelForSequenceClassification as A; A.from_pretrained(sys.argv[1])", str(out)],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert loaded.returncode != 0 and "trust_remote_code" in loaded.stderr.splitlines()[-1], loaded.stderr[-300:]
    # as a plain transformers folder (no distill card), a teacher too, built from distill's copy of the class
    (out / "distill.json").unlink()
    (out / "modeling_distill.py").write_text("raise RuntimeError('the folder code ran')")
    assert load_model(out).predict(TEXTS) == expected


def test_a_tagger_with_pre_classifier_and_word_students_are_refused(tiny_tagging_teacher, tmp_path):
    teacher = load_model(tiny_tagging_teacher)
    teacher.pre_classifier = nn.Linear(32, 32)
    with pytest.raises(DistillError, match="train it with pre_classifier=False"):
        stock_transformers(teacher, "t")
    cli("student", "--model", "lstm", "--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv",
        "--epochs", "1", "--output", tmp_path / "lstm", "--quiet")
    with pytest.raises(DistillError, match=r"format='transformers'\) does not take a word-level student \(lstm\); it "
                                           "has no transformers class.*format='onnx'"):
        export_model(str(tmp_path / "lstm"), str(tmp_path / "out"), format="transformers")
    assert not (tmp_path / "out").exists()


def test_a_multitask_teacher_exports_a_folder_per_head(tiny_encoder_dir, tmp_path):
    from tests.test_multitask import NER, SENTIMENT
    cli("teacher", "--encoder", tiny_encoder_dir, "--epochs", "1", "--max-length", "64", "--task-spec", SENTIMENT,
        "--task-spec", NER, "--output", tmp_path / "mt", "--quiet")
    meta = header(tmp_path / "mt")  # the finished run's card: each head's dev scores and the shared encoder
    assert "base_model" not in meta and len(meta["model-index"][0]["results"]) > 1, meta  # a local encoder: no id
    assert {result["dataset"]["split"] for result in meta["model-index"][0]["results"]} >= \
        {"dev (sentiment)", "dev (ner)", "dev"}, meta
    export_model(str(tmp_path / "mt"), str(tmp_path / "hf"), format="transformers")
    teacher = load_model(tmp_path / "mt")
    for head, auto in (("sentiment", AutoModelForSequenceClassification), ("ner", AutoModelForTokenClassification)):
        model, info = auto.from_pretrained(tmp_path / "hf" / head, output_loading_info=True)
        assert not info["missing_keys"] and not info["unexpected_keys"]
        examples = TEXTS if head == "sentiment" else SENTENCES
        assert max_logit_difference(teacher.head(head), model.eval(), examples) <= 1e-5
        assert load_model(tmp_path / "hf" / head).predict(examples) == teacher.head(head).predict(examples)
    card = json.loads((tmp_path / "hf" / "distill.json").read_text())
    assert card["kind"] == "multitask-teacher" and "ner/model.safetensors" in card["sha256"]
    with pytest.raises(DistillError, match="one transformers model per head"):
        load_model(tmp_path / "hf")
    cli("export", tmp_path / "mt", "--format", "transformers", "--output", tmp_path / "hf", "--overwrite")


@pytest.mark.parametrize("command", ["kd", "pseudo-label", "evaluate", "predict", "compare", "export", "search",
                                     "student"])
def test_a_multitask_teachers_transformers_export_is_refused_by_every_command_alike(command, tmp_path, capsys):
    """Its folder holds a transformers model per head, and is no model itself: evaluate advised --head (which
    then failed), compare, export and search to use kd --head (which failed), the rest to load DIR/HEAD. Now every
    command gives the table's line, before anything is loaded or written (the card is all the table reads)."""
    from tests.conftest import run_main
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "distill.json").write_text(json.dumps({"kind": "multitask-teacher", "format": "transformers",
                                                     "heads": {"sentiment": {}, "ner": {}}}))
    train, dev, out = SAMPLES / "sentiment_train.csv", SAMPLES / "sentiment_dev.csv", tmp_path / "out"
    args = {"kd": ["kd", "--teacher", folder, "--model", "lstm", "--train", train, "--dev", dev, "--output", out],
            "pseudo-label": ["pseudo-label", "--teacher", folder, "--input", train, "--output", out],
            "evaluate": ["evaluate", folder, dev, "--output", out], "predict": ["predict", folder, train],
            "compare": ["compare", folder, "--data", dev], "export": ["export", folder, "--output", out],
            "search": ["search", "--teacher", folder, "--train", train, "--dev", dev, "--output", out],
            "student": ["student", "--embeddings-from-teacher", folder, "--model", "lstm", "--train", train, "--dev",
                        dev, "--output", out]}[command]
    status, err = run_main(capsys, *args)
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert "does not take a multi-task teacher's transformers export (its heads: sentiment, ner); it holds one " \
           "transformers model per head: give a head's folder, DIR/HEAD" in err, err
    assert not out.exists()


def test_a_zero_shot_teachers_refusal_of_a_transformers_export_is_the_tables(tmp_path, capsys):
    """It was refused once loaded, inside the output, by a check of its class that the table did not know of."""
    from tests.conftest import run_main
    folder = tmp_path / "zero-shot"
    folder.mkdir()
    (folder / "distill.json").write_text(json.dumps({"kind": "teacher", "model": "ZeroShotTeacher"}))
    status, err = run_main(capsys, "export", folder, "--format", "transformers", "--output", tmp_path / "hf")
    assert status == 2 and err.strip() == (
        f"error: {folder}: export --format transformers does not take a zero-shot teacher; it normalises its features "
        "before its head, which no stock transformers classifier does: export it --format onnx or --format safetensors")


# ---- the README model card ----

def header(folder: str | Path) -> dict:
    text = (Path(folder) / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_every_kind_of_save_writes_a_card_with_hub_metadata(tiny_classifier_teacher, tiny_tagging_teacher,
                                                            transformer_students, tmp_path):
    meta = header(tiny_classifier_teacher)
    assert meta["library_name"] == "distill" and meta["pipeline_tag"] == "text-classification"
    assert "distillation" in meta["tags"] and "base_model" not in meta
    # local data: no Hub `datasets` entry (a folder name there links to another dataset); named in the results
    assert "datasets" not in meta and meta["model-index"][0]["results"][0]["dataset"]["name"] == "samples"
    assert "accuracy" in meta["metrics"] and meta["model-index"][0]["results"][0]["metrics"][0]["value"] >= 0
    text = (Path(tiny_classifier_teacher) / "README.md").read_text()
    summary = json.loads((Path(tiny_classifier_teacher) / "train_summary.json").read_text())
    assert summary["inputs"]["train"] in text and "sentiment_train.csv" in text and "load_model" in text
    assert header(tiny_tagging_teacher)["pipeline_tag"] == "token-classification"
    assert "README.md" in json.loads((Path(transformer_students["transformer"]) / "distill.json").read_text())["sha256"]
    cli("kd", "--teacher", tiny_classifier_teacher, "--model", "cnn", "--train", SAMPLES / "sentiment_train.csv",
        "--dev", SAMPLES / "sentiment_dev.csv", "--epochs", "1", "--output", tmp_path / "kd", "--quiet")
    meta = header(tmp_path / "kd")
    assert "base_model" not in meta and f"Distilled from the teacher `{tiny_classifier_teacher}`" in \
        (tmp_path / "kd" / "README.md").read_text()
    export_model(str(tmp_path / "kd"), str(tmp_path / "onnx"))
    assert header(tmp_path / "onnx")["library_name"] == "distill"
    export_model(tiny_classifier_teacher, str(tmp_path / "hf"), format="transformers")
    assert header(tmp_path / "hf")["library_name"] == "transformers"
    assert "datasets" not in header(tmp_path / "hf")


def test_a_card_names_hub_data_by_its_hub_id():
    """`datasets:` on the Hub are dataset ids: hub:NAME[:CONFIG]:SPLIT data gives NAME; a local folder's name would
    link to whatever Hub dataset has that name."""
    from distill.models.readme import render_readme
    card = {"kind": "student", "model": "cnn", "task": "classification", "labels": ["neg", "pos"]}
    about = {"data": [{"role": "train", "name": "hub:cornell-movie-review-data/rotten_tomatoes:train", "sha256": None},
                      {"role": "dev", "name": "hub:cornell-movie-review-data/rotten_tomatoes:validation",
                       "sha256": None}],
             "scores": [{"split": "dev", "metric": "accuracy", "value": 0.8}]}
    meta = yaml.safe_load(render_readme("runs/student", card, [], about).split("---\n")[1])
    assert meta["datasets"] == ["cornell-movie-review-data/rotten_tomatoes"]
    assert meta["model-index"][0]["results"][0]["dataset"]["type"] == "cornell-movie-review-data/rotten_tomatoes"


def test_the_card_is_checked_and_overwrite_knows_it_as_distills(tmp_path):
    out = tmp_path / "student"
    args = ["student", "--model", "cnn", "--train", SAMPLES / "sentiment_train.csv", "--dev",
            SAMPLES / "sentiment_dev.csv", "--epochs", "1", "--output", out, "--quiet"]
    cli(*args)
    readme = out / "README.md"
    original = readme.read_text()
    cli(*args, "--overwrite")  # the card distill wrote goes with the model it replaces
    assert readme.is_file() and load_model(out)
    readme.write_text(original + "\nmy notes\n")
    with pytest.raises(DistillError, match="README.md: corrupted or truncated"):
        load_model(out)
    from procedures.cli import main
    with pytest.raises(SystemExit) as exit_info:  # an edited card is the user's work: not replaced silently
        main([str(a) for a in (*args, "--overwrite")])
    assert exit_info.value.code == 2 and "my notes" in readme.read_text()


def test_save_pretrained_names_the_model_by_its_folder_not_the_staging_one(tiny_classifier_teacher, tmp_path):
    load_model(tiny_classifier_teacher).save_pretrained(tmp_path / "my-teacher")
    text = (tmp_path / "my-teacher" / "README.md").read_text(encoding="utf-8")
    assert "# my-teacher\n" in text and ".saving-" not in text


def test_a_model_without_a_card_readme_still_loads(tmp_path, tiny_classifier_teacher):
    import shutil
    old = tmp_path / "old"
    shutil.copytree(tiny_classifier_teacher, old)
    card = json.loads((old / "distill.json").read_text())
    del card["sha256"]["README.md"]
    (old / "distill.json").write_text(json.dumps(card))
    (old / "README.md").unlink()
    assert load_model(old).predict(TEXTS) == load_model(tiny_classifier_teacher).predict(TEXTS)


def test_a_cards_base_model_is_a_hub_id_or_none(tiny_classifier_teacher, tmp_path, monkeypatch):
    """The Hub refuses a README whose base_model is not a model id ("base_model" ... is not valid): a card naming
    a local folder there (the teacher, its encoder, the exported model: an absolute path) could not be uploaded.
    Local folders stay in the prose only; a Hub name is kept."""
    from distill.models.readme import hub_model_id
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "teacher").mkdir(parents=True)
    assert [hub_model_id(name) for name in ("minilm-l6", "hub:prajjwal1/bert-tiny", "bert-base-uncased",
                                            str(tmp_path), "runs/teacher", "./teacher", None)] == \
        ["sentence-transformers/all-MiniLM-L6-v2", "prajjwal1/bert-tiny", "bert-base-uncased", None, None, None, None]
    export_model(tiny_classifier_teacher, str(tmp_path / "hf"), format="transformers")
    text = (tmp_path / "hf" / "README.md").read_text()
    assert "base_model" not in header(tmp_path / "hf") and f"Exported from `{tiny_classifier_teacher}`" in text


def test_a_transformers_export_into_a_model_repository_lists_no_hidden_file(tiny_classifier_teacher, tmp_path):
    """The export's card listed every file in its folder: a model repository's .gitattributes, which --overwrite
    carries into the new export, became one of the model's files (editing it made the model refused)."""
    out = tmp_path / "hf"
    cli("export", tiny_classifier_teacher, "--format", "transformers", "--output", out)
    (out / ".gitattributes").write_text("*.safetensors filter=lfs\n")
    cli("export", tiny_classifier_teacher, "--format", "transformers", "--output", out, "--overwrite")
    assert not [name for name in json.loads((out / "distill.json").read_text())["sha256"] if name.startswith(".")]
    (out / ".gitattributes").write_text("*.bin filter=lfs\n")
    load_model(out)


@pytest.mark.parametrize("dropped", ["added_tokens.json", "special_tokens_map.json", "vocab.txt"])
@pytest.mark.parametrize("form", ["transformers", "onnx"])
def test_a_tokenizer_file_dropped_beside_a_transformers_models_is_refused(tiny_classifier_teacher, tmp_path, capsys,
                                                                         dropped, form):
    """transformers' tokenizer reads its files by name, listed in the card or not: an added_tokens.json dropped
    into a transformers export (or its ONNX export) gave words ids past the embedding table (predict's IndexError
    traceback), or silently read text otherwise. It is refused as an unlisted file in a teacher's encoder
    folder is, by every command that loads the model."""
    from tests.conftest import run_main
    hf = tmp_path / "hf"
    cli("export", tiny_classifier_teacher, "--format", "transformers", "--output", hf)
    model = hf
    if form == "onnx":
        model = tmp_path / "onnx"
        cli("export", hf, "--output", model)
    load_model(model)
    (model / dropped).write_text('{"witty": 100000}' if dropped.endswith(".json") else "[PAD]\nwitty\n")
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    status, err = run_main(capsys, "predict", model, texts)
    assert status == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert f"{model / dropped}: not part of the model as saved (distill.json does not list it)" in err, err


@pytest.mark.parametrize("name", ["special_tokens_map.json", "added_tokens.json", "generation_config.json"])
@pytest.mark.parametrize("form", ["transformers", "onnx"])
def test_evaluate_writes_no_file_a_transformers_export_would_read(tiny_classifier_teacher, tmp_path, capsys, name,
                                                                  form):
    """evaluate may write its metrics into a model folder distill wrote, but not under a name transformers' loaders
    read: `evaluate HF data --output HF/special_tokens_map.json` wrote its metrics there with exit 0, and every
    later command refused the model ("not part of the model as saved")."""
    from tests.conftest import run_main
    model = tmp_path / "hf"
    cli("export", tiny_classifier_teacher, "--format", "transformers", "--output", model)
    if form == "onnx":
        model = tmp_path / "onnx"
        cli("export", tmp_path / "hf", "--output", model)
    status, err = run_main(capsys, "evaluate", model, SAMPLES / "sentiment_dev.csv", "--output", model / name)
    assert status == 2 and f"{model / name}: is a file of the transformers model {model}" in err, err
    assert not (model / name).exists()
    load_model(model)
