"""The zero-shot teacher (`nlp-train teacher --zero-shot`): label descriptions embedded by a sentence encoder,
logits = cosine similarity / temperature, saved as a teacher folder that every command takes."""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch.nn import functional

from conftest import SAMPLES, cli
from procedures.cli import main

LABELS = "negative=a bad film|boring and dull,positive=a great film|moving and wonderful"


def run_cli(*args) -> tuple[int, str]:
    """nlp-train's exit status (0 for success)."""
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    return exit_info.value.code


@pytest.fixture(scope="module")
def zero_shot_dir(tiny_encoder_dir, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("zero-shot") / "teacher"
    cli("teacher", "--zero-shot", "--encoder", tiny_encoder_dir, "--labels", LABELS, "--dev",
        SAMPLES / "sentiment_dev.csv", "--output", out, "--quiet", "--max-length", "64")
    return str(out)


def mean_pooled(encoder_dir: str, texts: list[str]) -> torch.Tensor:
    """Sentence embeddings as sentence-transformers computes them: token states averaged over the attention mask,
    L2-normalised; from the encoder folder, independently of distill's code."""
    from transformers import AutoModel, AutoTokenizer
    tokenizer, model = AutoTokenizer.from_pretrained(encoder_dir), AutoModel.from_pretrained(encoder_dir).eval()
    batch = tokenizer(texts, padding=True, truncation=True, max_length=64, return_tensors="pt")
    with torch.no_grad():
        hidden = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)


def test_logits_are_cosine_similarity_over_the_fitted_temperature(zero_shot_dir, tiny_encoder_dir):
    from distill import load_model
    from distill.data import read_split
    from distill.inference import predict_logits
    teacher = load_model(zero_shot_dir)
    card = json.loads(open(f"{zero_shot_dir}/train_summary.json").read())
    temperature = card["temperature"]
    assert card["temperature_from"] == "dev" and temperature != 0.05
    labels = [functional.normalize(mean_pooled(tiny_encoder_dir, texts).mean(0), dim=0)
              for texts in (["a bad film", "boring and dull"], ["a great film", "moving and wonderful"])]
    texts = ["an utterly wonderful film", "dull", "the plot meanders"]
    expected = mean_pooled(tiny_encoder_dir, texts) @ torch.stack(labels).T / temperature
    assert torch.allclose(predict_logits(teacher, texts).logits, expected, atol=1e-4)
    # the temperature is the one that minimises the NLL of dev's gold labels (`fit_temperature`, tested below)
    from distill.models.zero_shot import fit_temperature
    dev, gold = read_split(str(SAMPLES / "sentiment_dev.csv"), "classification")
    similarities = mean_pooled(tiny_encoder_dir, list(dev)) @ torch.stack(labels).T
    target = torch.tensor([["negative", "positive"].index(label) for label in gold])
    assert math.isclose(temperature, fit_temperature(similarities, target), rel_tol=1e-3)


def test_without_dev_the_default_temperature_and_no_data_read(tiny_encoder_dir, tmp_path):
    from distill import load_model
    from distill.models.zero_shot import DEFAULT_TEMPERATURE
    out = tmp_path / "teacher"
    cli("teacher", "--zero-shot", "--encoder", tiny_encoder_dir, "--labels", "sport,politics,tech", "--output", out,
        "--quiet")
    teacher = load_model(out)
    assert teacher.config.temperature == DEFAULT_TEMPERATURE and teacher.hierarchy.labels == ["sport", "politics",
                                                                                             "tech"]
    assert teacher.config.descriptions == {"sport": ["sport"], "politics": ["politics"], "tech": ["tech"]}
    out2 = tmp_path / "fixed"
    cli("teacher", "--zero-shot", "--encoder", tiny_encoder_dir, "--labels", "sport,politics", "--output", out2,
        "--quiet", "--temperature", "0.2")
    assert load_model(out2).config.temperature == 0.2


def test_a_teacher_everywhere(zero_shot_dir, tmp_path, capsys):
    """evaluate, predict, compare, pseudo-label, kd (alone and in an ensemble) and export take it."""
    cli("evaluate", zero_shot_dir, SAMPLES / "sentiment_dev.csv")
    capsys.readouterr()
    cli("predict", zero_shot_dir, SAMPLES / "unlabeled_movies.txt")
    predicted = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(predicted) == 300 and {record["label"] for record in predicted} <= {"negative", "positive"}
    cli("compare", zero_shot_dir, zero_shot_dir, "--data", SAMPLES / "sentiment_dev.csv")
    pseudo = tmp_path / "pseudo.jsonl"
    cli("pseudo-label", "--teacher", zero_shot_dir, "--input", SAMPLES / "unlabeled_movies.txt", "--output", pseudo,
        "--quiet", "--cache-dir", tmp_path / "cache")
    records = [json.loads(line) for line in pseudo.read_text().splitlines()]
    assert records and {r["label"] for r in records} <= {"negative", "positive"}
    cli("kd", "--teacher", zero_shot_dir, "--model", "lstm", "--train", SAMPLES / "sentiment_train.csv", "--dev",
        SAMPLES / "sentiment_dev.csv", "--unlabeled", pseudo, "--output", tmp_path / "student", "--epochs", "1",
        "--quiet", "--cache-dir", tmp_path / "cache", "--embedding-dim", "16", "--hidden-dim", "16")
    summary = json.loads((tmp_path / "student" / "train_summary.json").read_text())
    assert summary["cached_examples"] > 0  # pseudo-label's logits of the unlabeled text were reused
    cli("export", zero_shot_dir, "--format", "safetensors", "--output", tmp_path / "slim")
    from distill import load_model
    from distill.inference import predict_logits
    texts = ["a great film", "boring"]
    reference = predict_logits(load_model(zero_shot_dir), texts).logits
    assert torch.allclose(predict_logits(load_model(tmp_path / "slim"), texts).logits, reference, atol=1e-5)
    capsys.readouterr()
    assert run_cli("export", zero_shot_dir, "--format", "transformers", "--output", tmp_path / "hf") == 2
    assert "normalises its features" in capsys.readouterr().err
    assert not (tmp_path / "hf").exists()


def test_onnx_export(zero_shot_dir, tmp_path):
    pytest.importorskip("onnxruntime", reason="ONNX export needs the export extra")
    from distill.models import load_teacher
    from distill.inference import predict_logits
    cli("export", zero_shot_dir, "--output", tmp_path / "onnx", "--check-data", SAMPLES / "sentiment_dev.csv")
    card = json.loads((tmp_path / "onnx" / "distill.json").read_text())
    assert card["model"] == "ZeroShotTeacher" and card["agreement"]["identical_labels"] == 1.0
    texts = ["a great film", "boring"]
    from distill import load_model
    assert torch.allclose(predict_logits(load_teacher(str(tmp_path / "onnx")), texts).logits,
                          predict_logits(load_model(zero_shot_dir), texts).logits, atol=1e-4)


def test_ensemble_with_a_trained_teacher(zero_shot_dir, tiny_classifier_teacher, tmp_path):
    cli("kd", "--teacher", zero_shot_dir, "--teacher", tiny_classifier_teacher, "--model", "lstm", "--train",
        SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv", "--output", tmp_path / "student",
        "--epochs", "1", "--quiet", "--cache-dir", tmp_path / "cache", "--embedding-dim", "16", "--hidden-dim", "16")
    assert (tmp_path / "student" / "distill.json").exists()


def test_an_edited_folder_is_refused(zero_shot_dir, tmp_path):
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(zero_shot_dir, copy)
    meta = json.loads((copy / "checkpoint.json").read_text())
    meta["config"]["temperature"] = 1.0
    (copy / "checkpoint.json").write_text(json.dumps(meta))
    from distill import DistillError, load_model
    with pytest.raises(DistillError, match="checkpoint.json: corrupted or truncated"):
        load_model(copy)


@pytest.mark.parametrize("args, message", [
    (["--train", SAMPLES / "sentiment_train.csv"], "--train does not apply to --zero-shot"),
    (["--epochs", "2"], "--epochs does not apply to --zero-shot"),
    (["--task", "tagging"], "--task tagging does not apply to --zero-shot"),
    (["--temperature", "0.1", "--dev", SAMPLES / "sentiment_dev.csv"], "fixes the temperature that --dev would fit"),
    # was written, a teacher whose every text past 128 sub-tokens was a RuntimeError traceback in predict, kd, ...
    (["--max-length", "1000"], "--max-length 1000 is more than the 128 positions encoder "),
])
def test_refusals(tiny_encoder_dir, tmp_path, capsys, args, message):
    out = tmp_path / "teacher"
    capsys.readouterr()
    assert run_cli("teacher", "--zero-shot", "--encoder", tiny_encoder_dir, "--labels", LABELS, "--output", out,
                   "--quiet", *args) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_refusals_of_the_label_set_and_options(tiny_encoder_dir, tmp_path, capsys):
    out = tmp_path / "teacher"
    for args, message in ((["--zero-shot", "--encoder", tiny_encoder_dir, "--labels", "positive"],
                           "needs at least two labels"),
                          (["--zero-shot", "--labels", LABELS], "--zero-shot needs --encoder"),
                          (["--zero-shot", "--encoder", tiny_encoder_dir], "--zero-shot needs --labels"),
                          (["--labels", LABELS, "--encoder", tiny_encoder_dir], "--labels is for --zero-shot"),
                          (["--zero-shot", "--encoder", tiny_encoder_dir, "--labels", LABELS, "--dev",
                            SAMPLES / "topics_dev.csv"], "topics_dev.csv")):
        capsys.readouterr()
        assert run_cli("teacher", *args, "--output", out, "--quiet") == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) <= 3, err
        assert not out.exists()


def test_labels_once_per_label_take_words_with_commas_and_one_text_refuses_them(tiny_encoder_dir, tmp_path, capsys):
    """Was: --labels "negative=bad, awful,positive=good" made a third label, 'awful'."""
    out = tmp_path / "teacher"
    capsys.readouterr()
    assert run_cli("teacher", "--zero-shot", "--encoder", tiny_encoder_dir, "--labels", "negative=bad, awful,positive=good",
                   "--output", out, "--quiet") == 2
    err = capsys.readouterr().err
    assert "--labels: 'awful' after 'negative=bad' is ambiguous" in err and "give --labels once per label" in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()
    assert run_cli("teacher", "--zero-shot", "--encoder", tiny_encoder_dir, "--labels", "negative,positive",
                   "--labels", "neutral", "--output", out, "--quiet") == 2
    assert "'negative,positive' names several" in capsys.readouterr().err and not out.exists()
    cli("teacher", "--zero-shot", "--encoder", tiny_encoder_dir, "--labels", "negative=bad, awful", "--labels",
        "positive=good, great", "--output", out, "--quiet")
    from distill import load_model
    assert load_model(out).config.descriptions == {"negative": ["bad, awful"], "positive": ["good, great"]}
    again = tmp_path / "again"  # the run's record replays it
    cli("teacher", "--config", out / "run_config.yaml", "--output", again, "--quiet")
    assert load_model(again).config.descriptions == {"negative": ["bad, awful"], "positive": ["good, great"]}


@pytest.mark.parametrize("labels, unknown", [("Negative=a bad film,Positive=a great film", "negative, positive"),
                                             ("negative,positive,neutral", None), ("negative,neutral", "positive")])
def test_dev_labels_that_the_label_names_do_not_name(tiny_encoder_dir, tmp_path, capsys, labels, unknown):
    """Was: `label 'negative' is spelt 'Negative' in the training data` (or `was not seen in training`), of a teacher
    that has no training data: its label set is --labels. A label --labels names and dev lacks is fine."""
    out = tmp_path / "teacher"
    capsys.readouterr()
    status = run_cli("teacher", "--zero-shot", "--encoder", tiny_encoder_dir, "--labels", labels, "--dev",
                     SAMPLES / "sentiment_dev.csv", "--output", out, "--quiet", "--max-length", "64")
    err = capsys.readouterr().err
    if unknown is None:
        assert status == 0 and out.exists()
        return
    assert status == 2 and not out.exists()
    assert err.strip() == f"error: {SAMPLES / 'sentiment_dev.csv'}: has labels that --labels does not name: {unknown}"


def test_fit_temperature_finds_the_minimum():
    from distill.models.zero_shot import fit_temperature
    torch.manual_seed(0)
    similarities = torch.rand(200, 3) * 0.4
    gold = (similarities + 0.05 * torch.randn(200, 3)).argmax(-1)
    fitted = fit_temperature(similarities, gold)
    grid = [10 ** (k / 200) for k in range(-600, 200)]
    best = min(grid, key=lambda t: float(functional.cross_entropy(similarities / t, gold)))
    assert math.isclose(fitted, best, rel_tol=0.02)


def test_a_dev_file_of_one_label_fits_no_temperature(tiny_encoder_dir, tmp_path, capsys):
    """--dev of one label only: the NLL falls the more confident the teacher is, whatever it says of the other
    labels, so the temperature was driven to the range's end (0.0099) and written: a teacher near one-hot on every
    text. Refused in one line, nothing written."""
    from distill.errors import DistillError
    from distill.models.zero_shot import fit_temperature
    rows = (SAMPLES / "sentiment_dev.csv").read_text(encoding="utf-8").splitlines()
    dev = tmp_path / "negative.csv"
    dev.write_text("\n".join([rows[0], *(row for row in rows[1:] if row.endswith(",negative"))]) + "\n")
    out = tmp_path / "teacher"
    capsys.readouterr()
    assert run_cli("teacher", "--zero-shot", "--encoder", tiny_encoder_dir, "--labels", LABELS, "--dev", dev,
                   "--output", out, "--quiet") == 2
    err = capsys.readouterr().err
    assert f"error: {dev}: all its examples have one label, " in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
    with pytest.raises(DistillError, match="all its examples have one label"):
        fit_temperature(torch.rand(5, 2), torch.zeros(5, dtype=torch.long))


def test_labels_the_encoder_reads_alike_are_refused(tiny_encoder_dir, tmp_path, capsys):
    """Was: 'café' and 'cafe' (or 'Film' and 'film', words an uncased tokenizer makes the same sub-tokens) were two
    labels of one embedding: a teacher written whose every text scored 0.5."""
    out = tmp_path / "teacher"
    capsys.readouterr()
    assert run_cli("teacher", "--zero-shot", "--encoder", tiny_encoder_dir, "--labels",
                   "negative=a caf\u00e9 film,positive=a cafe film", "--output", out, "--quiet") == 2
    err = capsys.readouterr().err
    assert err.strip() == f"error: --labels: the encoder {tiny_encoder_dir} reads the descriptions of negative and " \
                          "positive alike (its tokenizer makes them the same sub-tokens), so they would score alike " \
                          "for every text: give each label words of its own", err
    assert not out.exists()


@pytest.mark.parametrize("pooling, used", [([], "mean"), (["--pooling", "auto"], "first"), (["--pooling", "first"],
                                                                                           "first")])
def test_a_replay_reads_text_with_the_pooling_of_the_run(pooling, used, tiny_encoder_dir, tmp_path):
    """Was: --pooling auto (the first token's state, for an encoder not trained for mean-pooled sentences) was
    recorded as auto, the option's default, which the replay of run_config.yaml read as not given: a zero-shot
    teacher's mean, another teacher. The record holds the pooling the teacher used."""
    from distill import load_model
    out, again = tmp_path / "teacher", tmp_path / "again"
    cli("teacher", "--zero-shot", "--encoder", tiny_encoder_dir, "--labels", LABELS, "--output", out, "--quiet",
        *pooling)
    cli("teacher", "--config", out / "run_config.yaml", "--output", again, "--quiet")
    assert load_model(out).config.pooling == load_model(again).config.pooling == used
