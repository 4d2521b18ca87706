"""Distillation: the composed loss, teacher/student alignment, the logit cache, pseudo-labelling."""

import functools
import json
import re
import shutil

import pytest
import torch

from distill.distillation import (CachedTeacherLogits, DistillObjective, OnlineTeacherLogits,
                                  TeacherStudentDistill)
from distill.errors import DistillError
from distill.inference import predict_logits
from distill.losses import IGNORE_INDEX, kl_distill, weighted_nll
from distill.models import load_model
from distill.models.students import build_student
from distill.training import make_batch
from distill.pseudo_label import pseudo_label, run_signature, signature_path
from tests.conftest import SAMPLES, cli, config_for, dev_metrics, kd_with

SENTENCES = [["Karl", "Weber", "visited", "\u200b", "Port", "Halden", "yesterday"], ["Unbelievably", "good"]]


def student_for(teacher, examples):
    name = "lstm" if teacher.task == "classification" else "lstm-tagger"
    torch.manual_seed(0)
    return build_student(config_for(name, embedding_dim=8, hidden_dim=6, dropout=0.0),
                         teacher.hierarchy, examples).eval()


@pytest.mark.parametrize("fixture", ["tiny_classifier_teacher", "tiny_tagging_teacher"])
def test_cached_and_online_teacher_give_the_same_loss(request, fixture):
    teacher = load_model(request.getfixturevalue(fixture))
    examples = SENTENCES if teacher.task == "tagging" else ["a fine film", "dull , dull , dull", "great"]
    labels = [None] * len(examples)
    student = student_for(teacher, examples)
    batch = make_batch(student, examples, labels, list(reversed(range(len(examples)))))
    logits = student(**batch["inputs"])
    cached = DistillObjective(TeacherStudentDistill(), CachedTeacherLogits(predict_logits(teacher, examples)))
    online = DistillObjective(TeacherStudentDistill(), OnlineTeacherLogits(teacher, examples))
    assert cached(student, logits, batch).item() == pytest.approx(online(student, logits, batch).item(), rel=1e-5)


def test_teacher_word_logits_align_with_student_words(tiny_tagging_teacher):
    """Sub-token count differs from word count; a word with no sub-token gets no distill term."""
    teacher = load_model(tiny_tagging_teacher)
    results = predict_logits(teacher, SENTENCES)
    logits, scored = results.example(0)
    assert logits.shape[0] == len(SENTENCES[0]) and scored.tolist() == [True, True, True, False, True, True, True]
    alone = predict_logits(teacher, [["Port", "Halden", "yesterday"]]).example(0)[0]
    assert not torch.allclose(logits[3], logits[4])  # nothing shifted onto a neighbour
    student = student_for(teacher, SENTENCES)
    batch = make_batch(student, SENTENCES, [None, None], [0, 1])
    student_logits = student(**batch["inputs"])
    distiller = DistillObjective(TeacherStudentDistill(student_weight=0.0, distill_weight=1.0),
                                 CachedTeacherLogits(results))
    teacher_grid, teacher_scored = results.batch([0, 1])
    mask = batch["mask"] & teacher_scored
    expected = kl_distill(student_logits[mask], teacher_grid[mask], distiller.loss.temperature)
    assert distiller(student, student_logits, batch).item() == pytest.approx(expected.item(), rel=1e-6)
    assert alone.shape[0] == 3


def test_pseudo_targets_use_teacher_argmax_only_for_unlabeled_rows():
    teacher_logits = torch.tensor([[0.0, 5.0], [4.0, 0.0], [0.1, 0.0]])
    distiller = TeacherStudentDistill(min_confidence=0.6)
    targets = distiller.pseudo_targets(teacher_logits, torch.tensor([0, IGNORE_INDEX, IGNORE_INDEX]),
                                       torch.tensor([True, False, False]), None)
    assert targets.tolist() == [0, 0, IGNORE_INDEX]  # gold kept; confident guess; unsure guess dropped


def test_loss_weights_compose(tiny_classifier_teacher):
    teacher = load_model(tiny_classifier_teacher)
    examples = ["a fine film", "dull"]
    student = student_for(teacher, examples)
    batch = make_batch(student, examples, ["positive", "negative"], [0, 1])
    logits = student(**batch["inputs"])
    source = CachedTeacherLogits(predict_logits(teacher, examples))
    nll = weighted_nll(logits, batch["targets"])
    kl = kl_distill(logits, source.logits([0, 1])[0], 3.0)
    loss = DistillObjective(TeacherStudentDistill("kl", 3.0, 0.3, 0.7), source)(student, logits, batch)
    assert loss.item() == pytest.approx((0.3 * nll + 0.7 * kl).item(), rel=1e-6)
    # the same loss as a plain function of logits and targets, as another trainer would call it
    plain = TeacherStudentDistill("kl", 3.0, 0.3, 0.7)(logits, source.logits([0, 1])[0], batch["targets"])
    assert plain.item() == pytest.approx(loss.item(), rel=1e-6)


def test_the_loss_is_a_module_whose_class_weights_move_with_it():
    loss = TeacherStudentDistill(class_weights=[1.0, 3.0])
    assert isinstance(loss, torch.nn.Module) and list(loss.parameters()) == []
    assert loss.state_dict() == {}  # the weights are a setting, recorded by settings()
    assert loss.double().class_weights.dtype == torch.float64
    assert "class_weights=[1.0, 3.0]" in repr(loss)
    outer = torch.nn.ModuleDict({"loss": loss})  # composes as a submodule
    assert outer["loss"] is loss and loss.settings()["class_weights"] == [1.0, 3.0]


@pytest.mark.parametrize("kwargs, message", [({"temperature": 0}, "temperature must be at least 0.001, got 0: below"),
                                             ({"student_weight": -1}, "weights must be >= 0"),
                                             ({"kd_loss": "js"}, "unknown kd loss"),
                                             ({"kd_loss": "mse", "temperature": 5.0}, "has no effect there")])
def test_nonsensical_options_are_refused(kwargs, message):
    with pytest.raises(DistillError, match=message):
        TeacherStudentDistill(**kwargs)


def test_the_temperature_defaults_to_two_for_kl_and_stays_unset_for_mse():
    assert TeacherStudentDistill().temperature == TeacherStudentDistill("kl", 2.0).temperature == 2.0
    assert TeacherStudentDistill("mse").settings()["kd_loss"] == "mse"


def test_kd_cli_cache_matches_online_teacher(tiny_classifier_teacher, tmp_path):
    common = ["kd", "--teacher", tiny_classifier_teacher, "--model", "cnn", "--train", SAMPLES / "sentiment_train.csv",
              "--dev", SAMPLES / "sentiment_dev.csv", "--unlabeled", SAMPLES / "unlabeled_movies.txt",
              "--epochs", "2", "--quiet"]
    cache = ["--cache-dir", tmp_path / "cache"]
    cli(*common, *cache, "--output", tmp_path / "cached")
    cli(*common, *cache, "--output", tmp_path / "cached-again")
    cli(*common, "--output", tmp_path / "online", "--online-teacher")
    read = lambda name: [json.loads(line) for line in open(tmp_path / name / "metrics.jsonl")]  # noqa: E731
    for cached, online in zip(read("cached"), read("online")):
        assert cached["train_loss"] == pytest.approx(online["train_loss"], rel=1e-4)
    summaries = [json.load(open(tmp_path / n / "train_summary.json")) for n in ("cached", "cached-again")]
    assert summaries[0]["cached_examples"] == 0
    assert summaries[1]["cached_examples"] == summaries[1]["train_examples"] > 0  # every example found
    assert summaries[0]["unlabeled_examples"] == 300


def test_kd_vocabulary_covers_the_unlabeled_text(tiny_classifier_teacher, tmp_path):
    """Words seen only in --unlabeled text get their own embedding rather than <unk>."""
    from distill.vocab import word_tokenize
    labelled = {w.lower() for line in (SAMPLES / "sentiment_train.csv").read_text().splitlines()
                for w in word_tokenize(line)}
    only_unlabeled = {w.lower() for line in (SAMPLES / "unlabeled_movies.txt").read_text().splitlines()
                       for w in word_tokenize(line)} - labelled
    assert only_unlabeled, "the fixture needs words that occur only in the unlabeled text"
    cli("kd", "--teacher", tiny_classifier_teacher, "--model", "lstm", "--train", SAMPLES / "sentiment_train.csv",
        "--dev", SAMPLES / "sentiment_dev.csv", "--unlabeled", SAMPLES / "unlabeled_movies.txt", "--epochs", "1",
        "--quiet", "--cache-dir", tmp_path / "cache", "--output", tmp_path / "kd")
    vocabulary = set(json.loads((tmp_path / "kd" / "vocab.json").read_text())["words"]["tokens"])
    assert only_unlabeled <= vocabulary


def test_kd_refuses_mismatched_labels(tiny_classifier_teacher, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        from procedures.cli import main
        main(["kd", "--teacher", tiny_classifier_teacher, "--model", "lstm", "--train",
              str(SAMPLES / "topics_train.csv"), "--dev", str(SAMPLES / "topics_dev.csv"),
              "--output", str(tmp_path / "x"), "--quiet"])
    assert exit_info.value.code == 2 and not (tmp_path / "x").exists()


def test_kd_takes_a_student_as_teacher(tmp_path, capsys):
    """A teacher-assistant chain: any trained student teaches the next stage (here without embeddings to copy)."""
    common = ["--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv", "--epochs", "1",
              "--quiet", "--filters", "4", "--embedding-dim", "8"]
    cli("student", "--model", "cnn", *common, "--output", tmp_path / "s")
    cli("kd", "--teacher", tmp_path / "s", "--model", "cnn", "--random-embeddings", *common,
        "--cache-dir", tmp_path / "cache", "--output", tmp_path / "k")
    teacher = load_model(tmp_path / "s")
    assert json.loads((tmp_path / "k" / "train_summary.json").read_text())["teacher"] == str(tmp_path / "s")
    assert (tmp_path / "cache" / teacher.fingerprint()).is_dir()


def test_a_one_logit_teacher_is_read_as_its_sigmoid():
    """A --binary teacher (a chain's student) gives one logit z: its pseudo-labels follow z's sign with
    confidence sigmoid(z), and the KL term depends on z, for a two-logit student and a --binary one."""
    z = torch.tensor([[5.0], [-5.0], [0.2]])
    distiller = TeacherStudentDistill(min_confidence=0.6)  # the student loss counts: on the pseudo-labels
    targets = distiller.pseudo_targets(torch.cat([torch.zeros_like(z), z], -1), torch.full((3,), IGNORE_INDEX),
                                       torch.zeros(3, dtype=torch.bool), None)
    assert targets.tolist() == [1, 0, IGNORE_INDEX]  # sigmoid(0.2) = 0.55 < 0.6
    unlabeled, no_targets = torch.zeros(3, dtype=torch.bool), torch.full((3,), IGNORE_INDEX)
    for student in (torch.tensor([[0.0, 1.0], [0.5, 0.0], [0.0, 0.0]]), torch.tensor([[1.0], [-0.5], [0.0]])):
        loss = lambda teacher: sum(term.mean() for term in distiller.terms(student, teacher, no_targets,  # noqa: E731
                                                                           labelled=unlabeled))
        assert loss(z).item() == pytest.approx(loss(torch.cat([torch.zeros_like(z), z], -1)).item())
        assert loss(z).item() != pytest.approx(loss(-z).item())


def test_kd_from_a_binary_student_trains_a_binary_student(tmp_path):
    common = ["--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv", "--epochs", "1",
              "--quiet", "--hidden-dim", "8", "--embedding-dim", "8", "--model", "lstm", "--binary"]
    cli("student", *common, "--output", tmp_path / "s")
    cli("kd", "--teacher", tmp_path / "s", "--random-embeddings", *common, "--unlabeled",
        SAMPLES / "unlabeled_movies.txt", "--min-confidence", "0.5", "--output", tmp_path / "k")
    assert load_model(tmp_path / "k").predict(["a fine film"])[0] in ("negative", "positive")


def test_kd_refuses_unlabeled_text_for_a_crf_teacher(tmp_path):
    """A CRF tagger's labels are Viterbi paths: per-word argmax pseudo-labels of unlabeled text would teach
    tags it never outputs. On labelled data (gold targets, its emission scores as soft ones) it teaches."""
    from distill.distiller import Distiller
    common = ["--model", "lstm-tagger", "--epochs", "1", "--quiet", "--hidden-dim", "8", "--embedding-dim", "8",
              "--char-filters", "4", "--train", SAMPLES / "ner_train.conll", "--dev", SAMPLES / "ner_dev.conll"]
    cli("student", *common, "--crf", "--output", tmp_path / "crf")
    with pytest.raises(DistillError, match="is a CRF tagger: its labels are Viterbi paths"):
        Distiller(str(tmp_path / "crf"), config_for("lstm-tagger", hidden_dim=8)).fit(
            str(SAMPLES / "ner_train.conll"), str(SAMPLES / "ner_dev.conll"), str(SAMPLES / "unlabeled_news.txt"))
    cli("kd", "--teacher", tmp_path / "crf", *common, "--random-embeddings", "--output", tmp_path / "kd")
    assert (tmp_path / "kd" / "distill.json").exists()


@pytest.mark.parametrize("size", [0, -1, 1.5, True])
def test_the_teacher_batch_size_is_checked_where_it_is_given(size):
    from distill.distiller import Distiller
    with pytest.raises(DistillError, match="teacher_batch_size must be a whole number >= 1"):
        Distiller("teacher", "lstm", teacher_batch_size=size)


def test_pseudo_label_resume_after_interruption_matches_uninterrupted(tiny_tagging_teacher, tmp_path):
    source = SAMPLES / "unlabeled_news.txt"
    full = tmp_path / "full.jsonl"
    pseudo_label(tiny_tagging_teacher, str(source), str(full), chunk_size=64, progress=False)
    rows = full.read_text().splitlines(keepends=True)
    assert len(rows) == 300 and not (tmp_path / "full.jsonl.part").exists()
    interrupted = tmp_path / "resumed.jsonl"
    part = tmp_path / "resumed.jsonl.part"
    part.write_text("".join(rows[:130]) + rows[130][:25])  # killed mid-write of record 131
    signature = run_signature(tiny_tagging_teacher, str(source), min_confidence=0.0, with_logits=False,
                              batch_size=64, chunk_size=64)
    signature_path(interrupted).write_text(json.dumps(signature))  # as the interrupted run left it
    stats = pseudo_label(tiny_tagging_teacher, str(source), str(interrupted), chunk_size=64, resume=True,
                         progress=False)
    # after the last whole chunk (128 records): the third chunk, cut by the kill, is labelled again as it was
    assert stats["resumed_after_line"] == json.loads(rows[127])["line"]
    assert interrupted.read_text() == full.read_text()


def test_pseudo_label_min_confidence_filters(tiny_classifier_teacher, tmp_path):
    args = ["pseudo-label", "--teacher", tiny_classifier_teacher, "--input", SAMPLES / "unlabeled_movies.txt",
            "--logits", "--quiet"]
    cli(*args, "--output", tmp_path / "all.jsonl")
    confidences = sorted(json.loads(line)["confidence"] for line in open(tmp_path / "all.jsonl"))
    threshold = confidences[150]
    cli(*args, "--output", tmp_path / "kept.jsonl", "--min-confidence", threshold)
    records = [json.loads(line) for line in open(tmp_path / "kept.jsonl")]
    assert all(r["confidence"] >= threshold and len(r["logits"]) == 2 for r in records)
    # the filter compares exact confidences; `threshold` is one rounded to 6 decimals, which its own may fall below
    assert sum(c > threshold for c in confidences) <= len(records) <= sum(c >= threshold for c in confidences) < 300


def test_kd_reuses_the_logits_pseudo_label_computed(tiny_classifier_teacher, tmp_path, monkeypatch):
    """pseudo-label stores the teacher's logits by content; kd --unlabeled on its output runs the
    teacher over nothing it has scored before: here, over nothing at all."""
    from distill.models.teacher import Teacher
    cache = ("--cache-dir", tmp_path / "cache")
    common = ["--teacher", tiny_classifier_teacher, "--quiet", *cache]
    kd = ["kd", *common, "--model", "cnn", "--train", SAMPLES / "sentiment_train.csv",
          "--dev", SAMPLES / "sentiment_dev.csv", "--epochs", "1"]
    cli(*kd, "--output", tmp_path / "plain")  # scores the training set
    cli("pseudo-label", *common, "--input", SAMPLES / "unlabeled_movies.txt", "--output", tmp_path / "pseudo.jsonl")

    def no_teacher_pass(*args, **kwargs):
        raise AssertionError("the teacher ran again")
    monkeypatch.setattr(Teacher, "forward", no_teacher_pass)
    cli(*kd, "--unlabeled", tmp_path / "pseudo.jsonl", "--output", tmp_path / "with-unlabeled")
    summary = json.load(open(tmp_path / "with-unlabeled" / "train_summary.json"))
    assert summary["unlabeled_examples"] == 300 and summary["cached_examples"] == summary["train_examples"]
    cli("pseudo-label", *common, "--input", SAMPLES / "unlabeled_movies.txt", "--output", tmp_path / "again.jsonl")
    assert (tmp_path / "again.jsonl").read_bytes() == (tmp_path / "pseudo.jsonl").read_bytes()


def test_teacher_mistakes_shift_or_drop_only_the_labelled_rows_the_teacher_gets_wrong():
    """Row 0: the teacher is right; row 1: wrong (gold 0, its top class 1); row 2: unlabeled, never judged."""
    student = torch.tensor([[0.5, 0.0, -0.5], [0.0, 1.0, 0.0], [1.0, 0.0, 2.0]])
    teacher = torch.tensor([[2.0, 1.0, 0.0], [0.5, 3.0, -1.0], [0.0, 4.0, 0.0]])
    targets = torch.tensor([0, 0, IGNORE_INDEX])
    labelled = torch.tensor([True, True, False])
    distill_term = lambda mistakes: TeacherStudentDistill(teacher_mistakes=mistakes).terms(  # noqa: E731
        student, teacher, targets, labelled=labelled)[1].mean().item() / 0.5
    shifted = torch.tensor([[2.0, 1.0, 0.0], [3.0, 0.5, -1.0], [0.0, 4.0, 0.0]])
    assert distill_term("keep") == pytest.approx(kl_distill(student, teacher, 2.0).item())
    assert distill_term("shift") == pytest.approx(kl_distill(student, shifted, 2.0).item())
    assert distill_term("drop") == pytest.approx(kl_distill(student[[0, 2]], teacher[[0, 2]], 2.0).item())
    students = [TeacherStudentDistill(teacher_mistakes=m).terms(student, teacher, targets, labelled=labelled)[0]
                for m in ("keep", "shift", "drop")]
    assert all(torch.equal(s.total, students[0].total) for s in students)  # the loss on the labels is untouched


def test_dropping_teacher_mistakes_of_a_tagger_leaves_those_words_out_of_the_term():
    torch.manual_seed(0)
    student, teacher = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    targets = teacher.argmax(-1)
    targets[0, 1] = (targets[0, 1] + 1) % 4  # the teacher's one mistake
    targets[1, 2] = IGNORE_INDEX
    mask = torch.tensor([[True, True, True], [True, True, False]])
    term = TeacherStudentDistill(teacher_mistakes="drop").terms(student, teacher, targets, mask)[1]
    kept = mask.clone()
    kept[0, 1] = False
    assert term.denominator.item() == 4
    assert term.mean().item() == pytest.approx(0.5 * kl_distill(student, teacher, 2.0, kept).item())


def test_teacher_mistakes_is_a_recorded_setting():
    assert "teacher_mistakes" not in TeacherStudentDistill().settings()  # runs of before keep their signature
    assert TeacherStudentDistill(teacher_mistakes="shift").settings()["teacher_mistakes"] == "shift"
    with pytest.raises(DistillError, match="teacher mistakes 'fix': choose one of keep, shift, drop"):
        TeacherStudentDistill(teacher_mistakes="fix")


def test_kd_reports_the_teachers_dev_score_beside_the_students(tiny_tagging_teacher, tmp_path, capsys, monkeypatch):
    """The teacher's dev scores come from its logits through the cache: a second run runs no teacher."""
    from distill.data import DataOptions, labelled_examples
    from distill.inference import evaluate
    from distill.metrics import class_f1
    from distill.models.teacher import Teacher
    kd = ["kd", "--teacher", tiny_tagging_teacher, "--model", "lstm-tagger", "--train", SAMPLES / "ner_train.conll",
          "--dev", SAMPLES / "ner_dev.conll", "--epochs", "2", "--cache-dir", tmp_path / "cache", "--quiet"]
    cli(*kd, "--output", tmp_path / "keep")
    summary = json.load(open(tmp_path / "keep" / "train_summary.json"))
    teacher = load_model(tiny_tagging_teacher)
    expected = evaluate(teacher, SAMPLES / "ner_dev.conll")
    assert {name: summary["teacher_dev"][name] for name in expected} == pytest.approx(expected)
    assert set(summary["teacher_dev"]["class_f1"]) <= {"LOC", "MISC", "ORG", "PER"}
    student = load_model(tmp_path / "keep")
    dev = labelled_examples(str(SAMPLES / "ner_dev.conll"), "tagging", DataOptions())
    gold, predicted = dev.labels, student.predict(dev.inputs)
    assert summary["dev_class_f1"] == pytest.approx(class_f1("tagging", None, gold, predicted))
    assert summary["classes_above_teacher"] == [name for name, f1 in summary["dev_class_f1"].items()
                                                if f1 > summary["teacher_dev"]["class_f1"].get(name, 0.0)]
    out = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("teacher: dev"))
    assert out.startswith(f"teacher: dev f1 {summary['teacher_dev']['f1']:.4f} (the student's "
                          f"{summary['best']['dev']['f1']:.4f}); the student's dev F1 is above the teacher's on ")
    assert "entity types" in out

    def no_teacher_pass(*args, **kwargs):
        raise AssertionError("the teacher ran again")
    monkeypatch.setattr(Teacher, "forward", no_teacher_pass)
    cli(*kd, "--output", tmp_path / "shift", "--teacher-mistakes", "shift")
    shifted = json.load(open(tmp_path / "shift" / "train_summary.json"))
    assert shifted["teacher_dev"] == summary["teacher_dev"] and shifted["kd"]["teacher_mistakes"] == "shift"


def test_a_student_above_its_teacher_is_told_what_to_try():
    from procedures.train_commands import weak_teacher_hint

    def summary(student: float, **kd) -> dict:
        return {"settings": {"select_metric": "token_accuracy"}, "best": {"dev": {"token_accuracy": student}},
                "teacher_dev": {"token_accuracy": 0.90, "class_f1": {"NN": 0.9, "WP$": 0.0}},
                "dev_class_f1": {"NN": 0.95, "WP$": 0.5, "PDT": 0.0},
                "kd": {"kd_loss": "kl", "temperature": 2.0, **kd}}

    assert weak_teacher_hint(summary(0.89)) is None  # below its teacher: nothing to say
    assert weak_teacher_hint(summary(0.92)) == (
        "the student is above its teacher on dev: kd pulls it towards the teacher's mistakes, and away from the classes "
        "it never gets right (WP$); try --teacher-mistakes shift --temperature 1, or compare with nlp-train student "
        "(docs/distillation.md, When the teacher is wrong)")
    assert "; try --temperature 1," in weak_teacher_hint(summary(0.92, teacher_mistakes="drop"))
    assert "; try --teacher-mistakes shift," in weak_teacher_hint(summary(0.92, kd_loss="mse"))
    assert weak_teacher_hint(summary(0.92, teacher_mistakes="shift", temperature=1.0)) is None  # tried already


def test_an_ensembles_dev_score_is_its_mixtures(tiny_classifier_teacher, tmp_path):
    """A teacher with itself is that teacher: the ensemble's dev scores are the teacher's own."""
    from distill.inference import evaluate
    from distill.distiller import Distiller
    from distill.trainers import Runtime
    from distill.training import TrainSettings
    teacher, again = load_model(tiny_classifier_teacher), load_model(tiny_classifier_teacher)  # two models
    result = Distiller([teacher, again], config_for("cnn", filters=8), settings=TrainSettings(epochs=1),
                       cache_dir=tmp_path / "cache", env=Runtime(progress=False)).fit(
        SAMPLES / "sentiment_train.csv", SAMPLES / "sentiment_dev.csv")
    expected = evaluate(teacher, SAMPLES / "sentiment_dev.csv")
    assert {name: result.summary["teacher_dev"][name] for name in expected} == pytest.approx(expected)
    assert set(result.summary["teacher_dev"]["class_f1"]) == set(result.summary["dev_class_f1"]) == \
        {"negative", "positive"}


def test_a_damaged_logit_cache_is_recomputed_not_trusted(tiny_classifier_teacher, tmp_path):
    args = kd_with(tiny_classifier_teacher, tmp_path / "a", "--epochs", "1", "--cache-dir", tmp_path / "cache")
    cli(*args)
    shards = list((tmp_path / "cache").rglob("*.safetensors"))
    assert len(shards) == 2  # the transfer set's and the dev set's (the teacher's dev score kd reports)
    for cache_file in shards:
        data = bytearray(cache_file.read_bytes())
        data[-3] ^= 0x40  # one logit's value changes; the file still loads
        cache_file.write_bytes(bytes(data))
    cli(*kd_with(tiny_classifier_teacher, tmp_path / "b", "--epochs", "1", "--cache-dir", tmp_path / "cache"))
    summary = json.loads((tmp_path / "b" / "train_summary.json").read_text())
    assert summary["cached_examples"] == 0
    assert dev_metrics(tmp_path / "b") == dev_metrics(tmp_path / "a")


def test_a_cache_shard_whose_shapes_were_edited_is_recomputed_not_trusted(tiny_classifier_teacher, tmp_path):
    """The shard's checksum covered its values, not their shapes: a header edited from logits (20, 2) to (40, 1)
    (the same bytes) was trusted, and pseudo-label wrote one logit per example of a two-label teacher, labels
    and confidences of other examples' halves."""
    import struct
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"text number {n} is fine\n" for n in range(20)))
    pseudo_label(tiny_classifier_teacher, str(texts), str(tmp_path / "a.jsonl"), with_logits=True, progress=False,
                 cache_dir=str(tmp_path / "cache"))
    [shard] = (tmp_path / "cache").rglob("*.safetensors")
    data = shard.read_bytes()
    size = struct.unpack("<Q", data[:8])[0]
    header = data[8:8 + size].replace(b'"shape":[20,2]', b'"shape":[40,1]')
    assert len(header) == size and header != data[8:8 + size]
    shard.write_bytes(data[:8] + header + data[8 + size:])
    counts = pseudo_label(tiny_classifier_teacher, str(texts), str(tmp_path / "b.jsonl"), with_logits=True,
                          progress=False, cache_dir=str(tmp_path / "cache"))
    assert counts["cached"] == 0
    assert (tmp_path / "b.jsonl").read_text() == (tmp_path / "a.jsonl").read_text()


def test_a_damaged_cache_shard_does_not_hide_the_shard_written_again_beside_it(tiny_classifier_teacher, tmp_path):
    """A key's first shard by name was the only one looked up: a damaged shard of 20 examples hid the whole
    shard written again for 5 of them, and every later run recomputed those 5 (the newest shard won only in
    the run that wrote it)."""
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"text number {n} is fine\n" for n in range(20)))
    first = tmp_path / "first.txt"
    first.write_text("".join(texts.read_text().splitlines(keepends=True)[:5]))
    cache = str(tmp_path / "cache")
    label = functools.partial(pseudo_label, tiny_classifier_teacher, progress=False, cache_dir=cache, overwrite=True)
    label(str(texts), str(tmp_path / "all.jsonl"))
    [damaged] = (tmp_path / "cache").rglob("*.safetensors")
    data = bytearray(damaged.read_bytes())
    data[-3] ^= 0x40  # one logit's value changes; the keys still read
    damaged.write_bytes(bytes(data))
    damaged.rename(damaged.with_name(f"0{damaged.name}"))  # first by name, before the shard written for the 5
    assert label(str(first), str(tmp_path / "a.jsonl"))["cached"] == 0
    assert label(str(first), str(tmp_path / "b.jsonl"))["cached"] == 5
    assert (tmp_path / "b.jsonl").read_text() == (tmp_path / "a.jsonl").read_text()


@pytest.mark.parametrize("student, teacher, targets, message", [
    ((4, 2), (4, 3), [0, 1, 0, 1], "the teacher scores 3 labels, the student 2: build the student with the teacher's"),
    ((4, 2), (4, 5, 2), [0, 1, 0, 1], "the loss takes (batch, labels) logits, or (batch, words, labels)"),
    ((4, 5, 2), (4, 2), [[0] * 5] * 4, "a teacher of another task, or logits of other examples"),
    ((4, 2), (8, 2), [0, 1, 0, 1], "got the student's logits (4, 2), the teacher's (8, 2), the targets (4,)"),
    ((4, 1), (4, 3), [0, 1, 0, 1], "the teacher scores 3 labels, the student 1"),
    ((4, 2), (4, 2), [0, 1, 2, 1], "the targets hold label index 2, but the teacher scores 2 labels"),
    ((4, 2), (4, 2), [[1.0, 0.0], [0.0, 1.0]] * 2, "the targets are label indices (integers; -100 for none)"),
], ids=["labels", "tagging-teacher", "classifier-teacher", "batch", "binary-student", "target-range", "one-hot"])
def test_the_loss_called_by_hand_names_what_does_not_fit(student, teacher, targets, message):
    """A loop of one's own (transformers' Trainer, docs/trainer.md) passes the loss logits and targets by hand:
    a teacher of another task or label set, another batch, or one-hot targets is one DistillError, not torch's
    shape error."""
    targets = torch.tensor(targets)
    with pytest.raises(DistillError) as refused:
        TeacherStudentDistill(temperature=2.0)(torch.randn(*student), torch.randn(*teacher), targets)
    assert message in str(refused.value)
    binary = TeacherStudentDistill(temperature=2.0)(torch.randn(4, 1), torch.randn(4, 2), torch.tensor([0, 1, 0, -100]))
    assert torch.isfinite(binary)  # a one-logit student against a two-label teacher fits


def test_cached_teacher_logits_read_and_look_up_what_a_trainer_passes(tiny_classifier_teacher, tiny_tagging_teacher):
    """docs/trainer.md's way in: `teacher_logits` reads its examples as `predict_logits` does (one string is no
    list of its characters, none at all is refused), and `batch` refuses positions the logits do not hold
    (a negative one gave another example's logits)."""
    from distill import teacher_logits
    teacher = load_model(tiny_classifier_teacher)
    with pytest.raises(DistillError, match="give a list of examples, not one string"):
        teacher_logits(teacher, "a wonderful film", None)
    with pytest.raises(DistillError, match="no examples to score"):
        teacher_logits(teacher, [], None)
    cached, _ = teacher_logits(teacher, ["a wonderful film", "dull"], None)
    assert cached.batch([1, 0])[0].shape == (2, 2) and cached.batch([])[0].shape == (0, 2)
    for wrong, message in [([2], "position 2 is none of the 2 examples the logits were computed for"),
                           ([-1], "position -1 is none of the 2 examples"), ([0.5], "a list of whole numbers")]:
        with pytest.raises(DistillError, match=re.escape(message)):
            cached.batch(wrong)
    tagged, _ = teacher_logits(load_model(tiny_tagging_teacher), [["a", "film"], ["dull"]], None)
    with pytest.raises(DistillError, match="position 2 is none of the 2 examples"):
        tagged.batch([0, 2])


def test_make_batch_as_a_trainers_collator_names_what_does_not_fit(tiny_classifier_teacher):
    """docs/trainer.md makes `make_batch` the Trainer's data collator: labels=None (distillation alone) was a
    TypeError, fewer labels than examples or a position past the end an IndexError, and a negative position
    gave the last example silently."""
    student = build_student(config_for("lstm", embedding_dim=8, hidden_dim=6),
                            load_model(tiny_classifier_teacher).hierarchy, ["a good film", "dull"])
    texts = ["a good film", "dull"]
    batch = make_batch(student, texts, None, [1, 0])
    assert batch["targets"].tolist() == [IGNORE_INDEX] * 2 and not batch["labelled"].any()
    with pytest.raises(DistillError, match="make_batch: 2 examples and 1 labels: give one label"):
        make_batch(student, texts, ["positive"], [0])
    for wrong in ([2], [0, -1]):
        with pytest.raises(DistillError, match=f"position {wrong[-1]} is none of the 2 examples given to make_batch"):
            make_batch(student, texts, ["positive", "negative"], wrong)


def test_a_shard_left_half_written_by_a_killed_run_is_removed_and_a_live_writers_is_not(tiny_classifier_teacher,
                                                                                       tmp_path):
    """A run killed while writing a cache shard left its hidden .tmp file, which no later run removed: the cache
    grew by a dead shard each time. A later run removes such a file (unlocked, unwritten for long), never one a
    writer holds (writing now, or stopped), nor one just made."""
    import fcntl
    import os
    from distill.io import STALE_AFTER_S, atomic_path, remove_stale_temporaries
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"text number {n} is fine\n" for n in range(5)))
    label = functools.partial(pseudo_label, tiny_classifier_teacher, str(texts), progress=False,
                              cache_dir=str(tmp_path / "cache"))
    label(str(tmp_path / "a.jsonl"))
    [shard] = (tmp_path / "cache").rglob("*.safetensors")
    stale, held, fresh = (shard.with_name(f".{shard.name}.{name}.tmp") for name in ("stale", "held", "fresh"))
    for path in (stale, held, fresh):
        path.write_bytes(shard.read_bytes()[:100])
    for path in (stale, held):
        os.utime(path, (0, os.stat(path).st_mtime - STALE_AFTER_S - 1))
    with open(held, "rb") as writer:
        fcntl.flock(writer, fcntl.LOCK_EX)  # a writer stopped (Ctrl-Z) before it renamed its file
        assert label(str(tmp_path / "b.jsonl"))["cached"] == 5
        assert not stale.exists() and held.exists() and fresh.exists()
    with atomic_path(tmp_path / "out.txt") as tmp:  # atomic_path's own file is held while it writes
        os.utime(tmp, (0, 0))
        assert remove_stale_temporaries(tmp_path, ".out.txt.*.tmp") == 0 and tmp.exists()
    assert (tmp_path / "out.txt").exists()


def test_a_shard_copied_from_another_teachers_cache_folder_is_not_trusted(tiny_classifier_teacher, tiny_student,
                                                                          tmp_path):
    """A shard is keyed by its examples' text alone, and its checksum covered its content alone: one copied from
    another teacher's folder (a cache put together by hand) was trusted whole, and pseudo-label wrote the other
    teacher's labels and logits as this one's. A shard records whose it is; another's is recomputed and replaced."""
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"text number {n} is fine\n" for n in range(20)))
    cache = tmp_path / "cache"
    label = functools.partial(pseudo_label, input_path=str(texts), with_logits=True, progress=False,
                              cache_dir=str(cache))
    label(tiny_classifier_teacher, output_path=str(tmp_path / "teacher.jsonl"))
    [teachers] = cache.iterdir()
    label(tiny_student, output_path=str(tmp_path / "student.jsonl"))
    [students] = set(cache.iterdir()) - {teachers}
    for shard in students.glob("*.safetensors"):
        shard.unlink()
    for shard in teachers.glob("*.safetensors"):
        shutil.copy(shard, students / shard.name)
    assert label(tiny_student, output_path=str(tmp_path / "again.jsonl"))["cached"] == 0
    assert (tmp_path / "again.jsonl").read_text() == (tmp_path / "student.jsonl").read_text()
    assert label(tiny_student, output_path=str(tmp_path / "third.jsonl"))["cached"] == 20  # the shard written again
