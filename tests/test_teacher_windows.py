"""Long texts and the classification teacher: the truncation warning (once per run, with its counts),
windows that cover every sub-token, a windowed teacher through every command, old checkpoints, export."""

from __future__ import annotations

import csv
import json
import logging
import shutil
from pathlib import Path

import pytest
import torch

from distill.errors import DistillError
from distill.features import content_ids, encode_texts, special_token_frame, text_reach, window_starts
from distill.inference import predict_logits
from distill.io import file_sha256
from distill.labels import LabelHierarchy
from distill.models import MODEL_CARD, load_model
from distill.models.teacher import Teacher, TeacherConfig
from tests.conftest import SAMPLES, cli, run_main

SHORT = ["a gripping, beautifully acted film", "dull and far too long"]
WINDOWED = ["--long-inputs", "windows", "--window-overlap", "2", "--max-windows", "4"]


def long_text(words: int) -> str:
    """The sample reviews' words, repeated up to `words` words."""
    pool = " ".join(row["text"] for row in csv.DictReader(open(SAMPLES / "sentiment_train.csv"))).split()
    return " ".join((pool * (words // len(pool) + 1))[:words])


def write_csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    return path


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "distill" and r.levelno == logging.WARNING]


@pytest.fixture(scope="module")
def tokenizer(tiny_encoder_dir):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(tiny_encoder_dir)


@pytest.fixture(scope="module")
def windowed_teacher(tiny_encoder_dir, tmp_path_factory) -> str:
    """A tiny teacher that reads the samples in windows of 8 sub-tokens (6 between [CLS] and [SEP])."""
    out = tmp_path_factory.mktemp("teacher-windows") / "teacher"
    cli("teacher", "--task", "classification", "--encoder", tiny_encoder_dir, "--epochs", "1", "--encoder-lr", "1e-3",
        "--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv", "--output", out,
        "--quiet", "--max-length", "8", *WINDOWED)
    return str(out)


# --- the arithmetic of windows --------------------------------------------------------------------------------

@pytest.mark.parametrize("length, capacity, overlap, max_windows, starts", [
    (0, 126, 32, 8, [0]),                 # an empty text still gets its one window of special tokens
    (126, 126, 32, 8, [0]),               # fits exactly
    (127, 126, 32, 8, [0, 94]),           # one sub-token more: a second window, 32 shared with the first
    (300, 126, 32, 8, [0, 94, 188]),      # 188 + 126 = 314 >= 300
    (1000, 126, 32, 3, [0, 94, 188]),     # capped: sub-tokens 314.. are cut
    (10, 6, 0, 8, [0, 6]),                # no overlap: consecutive
])
def test_window_starts(length, capacity, overlap, max_windows, starts):
    assert window_starts(length, capacity, overlap, max_windows) == starts


def test_windows_cover_every_sub_token_up_to_their_reach():
    capacity, overlap = 6, 2
    for length in range(0, 60):
        for max_windows in (1, 3, 100):
            starts = window_starts(length, capacity, overlap, max_windows)
            covered = {i for start in starts for i in range(start, min(start + capacity, length))}
            reach = text_reach(capacity, overlap, max_windows)
            assert covered == set(range(min(length, reach)))
            assert all(start < length for start in starts[1:])  # no window beyond the text
    assert text_reach(126, 32, 3) == 314


def test_text_windows_hold_the_text_in_order(tokenizer):
    text = long_text(60)
    ids = content_ids(tokenizer, [text])[0]
    prefix, suffix = special_token_frame(tokenizer)
    windows = encode_texts(tokenizer, [text, "short"], max_length=10, overlap=3, max_windows=100)
    first = [w for w in windows if w.example == 0]
    assert [w.example for w in windows] == [0] * len(first) + [1] and len(first) > 5
    for k, window in enumerate(first):
        assert len(window.input_ids) <= 10
        assert window.input_ids[:len(prefix)] == prefix and window.input_ids[-len(suffix):] == suffix
        assert window.input_ids[len(prefix):-len(suffix)] == ids[k * 5:k * 5 + 8]  # step = 8 - 3
    # one window is exactly the tokenizer's own truncation, which truncating teachers read
    truncated = tokenizer([text], truncation=True, max_length=10)["input_ids"][0]
    assert encode_texts(tokenizer, [text], 10)[0].input_ids == truncated == first[0].input_ids


# --- the windowed teacher ---------------------------------------------------------------------------------------

def teacher_from(tiny_encoder_dir: str, **settings) -> Teacher:
    torch.manual_seed(0)
    config = TeacherConfig(encoder=tiny_encoder_dir, pooling="mean", **settings)
    return Teacher.from_encoder(config, LabelHierarchy(["negative", "positive"]))


def test_windows_give_the_truncating_teachers_logits_when_every_text_fits(tiny_encoder_dir):
    truncating = teacher_from(tiny_encoder_dir, max_length=64)
    windowed = teacher_from(tiny_encoder_dir, max_length=64, long_inputs="windows")
    assert torch.equal(predict_logits(truncating, SHORT).logits, predict_logits(windowed, SHORT).logits)
    inputs, _ = windowed.prepare(SHORT)
    assert torch.equal(inputs["window_weights"], torch.eye(2))


def test_windowed_teacher_reads_the_end_of_a_long_text(tiny_encoder_dir):
    """Two texts that differ only in their last word: a truncating teacher reads the same window of both,
    a windowed one reads the end. Rows of one batch are compared within float noise, not bit for bit: a CPU
    matrix product may sum a row in another order by where it lies in memory (seen on AVX-512 machines,
    where two identical truncated texts got logits 1e-8 apart)."""
    texts = [long_text(120) + " superb", long_text(120) + " dreadful"]
    gaps = {}
    for long_inputs in ("truncate", "windows"):
        teacher = teacher_from(tiny_encoder_dir, max_length=32, long_inputs=long_inputs, window_overlap=8,
                               max_windows=20)
        logits = predict_logits(teacher, texts).logits
        gaps[long_inputs] = (logits[0] - logits[1]).abs().max().item()
    assert gaps["truncate"] <= 1e-5 < 1e-4 <= gaps["windows"], gaps


def test_windowed_teacher_trains_evaluates_predicts_pseudo_labels_and_distils(windowed_teacher, tmp_path, capsys):
    teacher = load_model(windowed_teacher)
    assert (teacher.config.long_inputs, teacher.config.window_overlap, teacher.config.max_windows) == \
        ("windows", 2, 4)
    inputs, _ = teacher.prepare(SHORT)
    assert inputs["input_ids"].shape[0] > 2 and inputs["window_weights"].shape == (2, inputs["input_ids"].shape[0])
    cli("evaluate", windowed_teacher, SAMPLES / "sentiment_test.csv", "--output", tmp_path / "eval.json", "--quiet")
    assert json.loads((tmp_path / "eval.json").read_text())["examples"] == 60
    (tmp_path / "texts.txt").write_text("\n".join([*SHORT, long_text(40)]) + "\n")
    capsys.readouterr()
    cli("predict", windowed_teacher, tmp_path / "texts.txt")
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(records) == 3 and all(r["label"] in ("negative", "positive") for r in records)
    cli("pseudo-label", "--teacher", windowed_teacher, "--input", tmp_path / "texts.txt", "--output",
        tmp_path / "pseudo.jsonl", "--cache-dir", tmp_path / "cache", "--quiet")
    labelled = [json.loads(line)["label"] for line in (tmp_path / "pseudo.jsonl").read_text().splitlines()]
    assert labelled == [r["label"] for r in records]
    cli("kd", "--teacher", windowed_teacher, "--model", "lstm", "--train", SAMPLES / "sentiment_train.csv",
        "--dev", SAMPLES / "sentiment_dev.csv", "--unlabeled", tmp_path / "pseudo.jsonl", "--cache-dir",
        tmp_path / "cache", "--output", tmp_path / "kd", "--embedding-dim", "8", "--hidden-dim", "8", "--epochs", "1",
        "--quiet")
    summary = json.loads((tmp_path / "kd" / "train_summary.json").read_text())
    assert summary["cached_examples"] == 3  # kd reused the windowed teacher's logits from pseudo-label


def test_teacher_saved_before_windows_loads_and_predicts_identically(tiny_classifier_teacher, tmp_path):
    """A checkpoint without the long-input settings (as saved before they existed) truncates, as it did."""
    old = Path(shutil.copytree(tiny_classifier_teacher, tmp_path / "old"))
    checkpoint = torch.load(old / "checkpoint.pt", weights_only=True)
    for key in ("long_inputs", "window_overlap", "max_windows"):
        del checkpoint["config"][key]
    torch.save(checkpoint, old / "checkpoint.pt")
    card = json.loads((old / MODEL_CARD).read_text())
    card["sha256"]["checkpoint.pt"] = file_sha256(old / "checkpoint.pt")
    (old / MODEL_CARD).write_text(json.dumps(card))
    loaded = load_model(old)
    assert loaded.config.long_inputs == "truncate"
    texts = [*SHORT, long_text(200)]
    assert torch.equal(predict_logits(loaded, texts).logits, predict_logits(load_model(tiny_classifier_teacher),
                                                                              texts).logits)


def test_windowed_teacher_exports_to_onnx_with_its_window_mapping(windowed_teacher, tmp_path):
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install -e .[export])")
    from distill.models.onnx import OnnxModel
    cli("export", windowed_teacher, "--output", tmp_path / "onnx", "--check-data", SAMPLES / "sentiment_test.csv")
    exported = load_model(tmp_path / "onnx")
    assert isinstance(exported, OnnxModel) and "window_weights" in exported.input_names
    texts = [*SHORT, long_text(30), long_text(80)]  # 1 to 4 windows per text
    for batch_size in (1, 4):
        ours = predict_logits(load_model(windowed_teacher), texts, batch_size).logits
        assert (ours - predict_logits(exported, texts, batch_size).logits).abs().max() <= 1e-4


def test_windowed_teacher_has_no_transformers_head_model(windowed_teacher):
    from distill.hf_model import to_transformers
    with pytest.raises(DistillError, match="has no transformers head model"):
        to_transformers(load_model(windowed_teacher))


def test_window_settings_that_cannot_work_are_refused(tiny_encoder_dir, tmp_path, capsys):
    base = ["teacher", "--encoder", tiny_encoder_dir, "--output", tmp_path / "t", "--quiet"]
    classification = ["--task", "classification", "--train", SAMPLES / "sentiment_train.csv",
                      "--dev", SAMPLES / "sentiment_dev.csv"]
    status, err = run_main(capsys, *base, *classification, "--window-overlap", "4")
    assert status == 2 and "--window-overlap applies to --long-inputs windows" in err
    status, err = run_main(capsys, *base, *classification, "--long-inputs", "windows", "--max-length", "8",
                           "--window-overlap", "6")
    assert status == 2 and "error: --window-overlap 6 leaves the windows no room to advance: a window of " \
        "--max-length 8 holds 6 sub-tokens; use at most 5" in err
    status, err = run_main(capsys, *base, "--task", "tagging", "--train", SAMPLES / "ner_train.conll",
                           "--dev", SAMPLES / "ner_dev.conll", "--long-inputs", "windows")
    assert status == 2 and "--long-inputs windows is for classification" in err
    assert not (tmp_path / "t").exists()
    with pytest.raises(DistillError, match="long_inputs must be one of truncate, windows"):
        teacher_from(tiny_encoder_dir, long_inputs="slide")


# --- the warning ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def long_test_file(tmp_path_factory) -> Path:
    """Two texts longer than 62 sub-tokens (what the conftest teacher, --max-length 64, reads), two shorter."""
    rows = [(long_text(90), "positive"), (SHORT[0], "positive"), (long_text(150), "negative"), (SHORT[1], "negative")]
    return write_csv(tmp_path_factory.mktemp("long-texts") / "test.csv", rows)


def expected_warning(tokenizer, path: Path, reach: int) -> tuple[int, int]:
    """(texts cut, mean sub-tokens lost by those), counted by hand."""
    texts = [row["text"] for row in csv.DictReader(open(path))]
    lost = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) - reach for t in texts]
    lost = [n for n in lost if n > 0]
    return len(lost), round(sum(lost) / len(lost))


def test_evaluate_predict_pseudo_label_and_kd_warn_once_with_the_share_cut(tiny_classifier_teacher, long_test_file,
                                                                        tokenizer, tmp_path, caplog, capsys):
    cut, lost = expected_warning(tokenizer, long_test_file, 62)
    assert cut == 2 and lost > 10
    message = (f"texts (50.0%) are longer than the 62 sub-tokens the teacher reads (--max-length 64) and lose "
               f"{lost} sub-tokens each on average")
    cli("evaluate", tiny_classifier_teacher, long_test_file, "--output", tmp_path / "eval.json", "--quiet",
        "--batch-size", "1")
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(row["text"] for row in csv.DictReader(open(long_test_file))) + "\n")
    cli("predict", tiny_classifier_teacher, texts, "--batch-size", "1")
    cli("pseudo-label", "--teacher", tiny_classifier_teacher, "--input", texts, "--output", tmp_path / "p.jsonl",
        "--no-cache", "--quiet", "--chunk-size", "1")
    cli("kd", "--teacher", tiny_classifier_teacher, "--model", "lstm", "--train", long_test_file, "--dev",
        SAMPLES / "sentiment_dev.csv", "--unlabeled", texts, "--output", tmp_path / "kd", "--cache-dir",
        tmp_path / "cache", "--embedding-dim", "8", "--hidden-dim", "8", "--epochs", "1", "--quiet")
    warned = warnings_of(caplog)
    # one per run; kd's names the file whose texts its teacher read (the unlabeled copies are the same texts)
    assert [w.split(": ", 2)[1] for w in warned] == [str(long_test_file), str(texts), str(texts), str(long_test_file)]
    assert all(w.startswith("warning: ") and "--long-inputs windows" in w for w in warned)
    assert [f": 2 of 4 {message}" in w for w in warned[:3]] == [True] * 3
    # kd's transfer set, the labelled texts and the same ones unlabeled: the teacher reads each once
    assert f": 2 of 4 {message}" in warned[3]


def test_kd_scoring_an_augmented_set_in_chunks_warns_once_per_file(tiny_classifier_teacher, long_test_file,
                                                                     tmp_path, caplog, monkeypatch):
    """An augmented transfer set is scored a chunk at a time (here one example a chunk): the cuts are counted
    over all chunks and warned of once per file, not once per chunk that holds a long text."""
    import distill.cache
    monkeypatch.setattr(distill.cache, "SPILL_CHUNK", 1)
    cli("kd", "--teacher", tiny_classifier_teacher, "--model", "lstm", "--train", long_test_file, "--dev",
        SAMPLES / "sentiment_dev.csv", "--augment", "2", "--augment-methods", "mask", "--output", tmp_path / "kd",
        "--cache-dir", tmp_path / "cache", "--embedding-dim", "8", "--hidden-dim", "8", "--epochs", "1", "--quiet")
    warned = warnings_of(caplog)
    made = json.loads((tmp_path / "kd" / "train_summary.json").read_text())["synthetic_examples"]
    assert [w.split(": ", 2)[1] for w in warned] == [str(long_test_file),
                                                     f"{made} synthetic examples of {long_test_file}"]
    assert ": 2 of 4 texts (50.0%)" in warned[0] and f": {made // 2} of {made} texts" in warned[1]


def test_a_transformer_student_warns_of_what_it_cuts(tiny_classifier_teacher, long_test_file, tokenizer, tmp_path,
                                                      caplog):
    """It reads --max-length sub-tokens: its kd run warns for it as well as for the teacher, over the
    labelled and unlabeled texts it trains on and naming both, and so do evaluate and pseudo-label with
    it (a chain's teacher); a word student reads every word, and says nothing."""
    cut, lost = expected_warning(tokenizer, long_test_file, 30)
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(row["text"] for row in csv.DictReader(open(long_test_file))) + "\n")
    cli("kd", "--teacher", tiny_classifier_teacher, "--model", "transformer", "--layers", "1", "--max-length", "32",
        "--train", long_test_file, "--dev", SAMPLES / "sentiment_dev.csv", "--unlabeled", texts,
        "--output", tmp_path / "ta", "--cache-dir", tmp_path / "cache", "--epochs", "1", "--quiet")
    cli("evaluate", tmp_path / "ta", long_test_file, "--output", tmp_path / "eval.json", "--quiet")
    warned = warnings_of(caplog)
    students = [w for w in warned if "the student reads" in w]
    # the kd run's teacher warning, the student's two, and evaluate's on the file the student learnt from
    assert len(students) == 2 and len(warned) == 4 and "was trained on (its 'train' input)" in warned[3]
    assert all(f"longer than the 30 sub-tokens the student reads (--max-length 32) and lose {lost} sub-tokens each"
               in w and "a larger --max-length" in w for w in students)
    assert f"{long_test_file} and {texts}: {2 * cut} of 8 texts" in students[0]  # kd: labelled and unlabeled
    assert f"{long_test_file}: {cut} of 4 texts" in students[1]  # evaluate
    caplog.clear()
    cli("student", "--model", "lstm", "--train", long_test_file, "--dev", SAMPLES / "sentiment_dev.csv",
        "--output", tmp_path / "lstm", "--embedding-dim", "8", "--hidden-dim", "8", "--epochs", "1", "--quiet")
    assert warnings_of(caplog) == []


def test_training_warns_once_and_windows_read_what_truncation_cuts(tiny_encoder_dir, long_test_file, tmp_path,
                                                                   caplog):
    train = write_csv(tmp_path / "train.csv", [(SHORT[0], "positive"), (SHORT[1], "negative")] * 4
                      + [(long_text(90), "positive")])
    run = ["teacher", "--task", "classification", "--encoder", tiny_encoder_dir, "--epochs", "2", "--train", train,
           "--dev", SAMPLES / "sentiment_dev.csv", "--quiet", "--max-length", "32"]
    cli(*run, "--output", tmp_path / "truncating")
    warned = warnings_of(caplog)
    assert len(warned) == 1 and f"{train}: 1 of 9 texts (11.1%)" in warned[0]
    caplog.clear()
    cli(*run, "--output", tmp_path / "windowed", "--long-inputs", "windows", "--window-overlap", "8",
        "--max-windows", "9")
    assert warnings_of(caplog) == []  # 9 windows of 30 sub-tokens, 22 apart, read 206


def test_a_windowed_teacher_warns_of_what_lies_beyond_its_windows(windowed_teacher, long_test_file, tokenizer,
                                                                  tmp_path, caplog):
    cut, lost = expected_warning(tokenizer, long_test_file, 18)  # 6 + 3 * (6 - 2)
    cli("evaluate", windowed_teacher, long_test_file, "--output", tmp_path / "eval.json", "--quiet")
    warned, = warnings_of(caplog)
    assert (f"{cut} of 4 texts ({cut / 4:.1%}) are longer than the 18 sub-tokens the teacher reads (--max-windows 4 "
            f"of --max-length 8) and lose {lost} sub-tokens each on average") in warned
    assert warned.endswith("a teacher trained with a larger --max-windows reads them whole")


def test_tagging_reads_every_word_and_never_warns(tiny_tagging_teacher, tmp_path, caplog):
    sentence = ("Karl Weber visited the Orvane Institute of Technology in Port Halden today " * 6).split()
    (tmp_path / "long.txt").write_text(" ".join(sentence) + "\n")
    cli("pseudo-label", "--teacher", tiny_tagging_teacher, "--input", tmp_path / "long.txt", "--output",
        tmp_path / "p.jsonl", "--no-cache", "--quiet")
    record = json.loads((tmp_path / "p.jsonl").read_text())
    assert len(record["tags"]) == len(sentence) and warnings_of(caplog) == []
