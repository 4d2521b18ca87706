"""The multi-task teacher: one encoder, a head per task, trained by the one loop, used head by head
or all heads in one encoder pass."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from collections import Counter
from pathlib import Path

import pytest
import torch

from distill.errors import DistillError
from distill.inference import evaluate, predict_logits
from distill.models import load_model
from distill.models.multitask import MultiTaskTeacher, TaskSampling
from distill.models.teacher import Teacher
from distill.training import FitTask, epoch_batches, training_batches
from tests.conftest import SAMPLES, cli, interrupt_evaluation, run_main, run_main_printed

SENTIMENT = f"sentiment:classification:{SAMPLES / 'sentiment_train.csv'}:{SAMPLES / 'sentiment_dev.csv'}"
NER = f"ner:tagging:{SAMPLES / 'ner_train.conll'}:{SAMPLES / 'ner_dev.conll'}"


def train_args(encoder: str, output, *extra: str) -> list:
    return ["teacher", "--encoder", encoder, "--epochs", "2", "--encoder-lr", "1e-3", "--max-length", "128",
            "--task-spec", SENTIMENT, "--task-spec", f"{NER}:pre_classifier=true", "--output", output, "--quiet",
            *extra]


@pytest.fixture(scope="module")
def multitask_teacher(tiny_encoder_dir, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("multitask") / "teacher"
    cli(*train_args(tiny_encoder_dir, out))
    return str(out)


def run_cli(*args) -> tuple[int, str]:
    """nlp-train in-process: its exit status and what it printed to stderr."""
    import contextlib
    import io

    from procedures.cli import main
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    return exit_info.value.code, errors.getvalue()


def texts_and_tokens() -> tuple[list[str], list[list[str]]]:
    lines = (SAMPLES / "unlabeled_news.txt").read_text(encoding="utf-8").splitlines()[:40]
    return lines, [line.split() for line in lines]


def test_checkpoint_keeps_the_teacher_schema_with_per_head_parts_and_round_trips(multitask_teacher, tmp_path):
    checkpoint = torch.load(f"{multitask_teacher}/checkpoint.pt", weights_only=True)
    assert sorted(checkpoint) == ["classifier_state_dict", "config", "encoder_state_dict", "hierarchy",
                                  "optimizer_state_dict"]
    assert sorted(checkpoint["config"]["heads"]) == sorted(checkpoint["hierarchy"]) == \
        sorted(checkpoint["classifier_state_dict"]) == ["ner", "sentiment"]
    assert checkpoint["config"]["heads"]["ner"]["pre_classifier"] is True
    assert checkpoint["config"]["heads"]["sentiment"]["pre_classifier"] is False
    assert "pre_classifier.weight" in checkpoint["classifier_state_dict"]["ner"]
    card = json.loads((Path(multitask_teacher) / "distill.json").read_text())
    assert card["kind"] == "multitask-teacher" and card["heads"]["sentiment"]["labels"] == ["negative", "positive"]

    model = MultiTaskTeacher.from_pretrained(multitask_teacher)
    assert model.names == ["sentiment", "ner"] and model.task == "tagging"
    assert isinstance(load_model(multitask_teacher), MultiTaskTeacher)
    model.save_pretrained(tmp_path / "copy")
    again = MultiTaskTeacher.from_pretrained(tmp_path / "copy")
    state, copied = model.state_dict(), again.state_dict()
    assert sorted(state) == sorted(copied) and all(torch.equal(state[k], copied[k]) for k in state)
    _, tokens = texts_and_tokens()
    assert again.predict(tokens) == model.predict(tokens)
    with pytest.raises(DistillError, match="multitask-teacher directory, expected a teacher"):
        Teacher.from_pretrained(multitask_teacher)


def test_task_sampling_weights_follow_data_size_temperature_or_uniform():
    sizes = {"big": 900, "small": 100}
    assert TaskSampling().weights(sizes) == pytest.approx({"big": 0.9, "small": 0.1})
    assert TaskSampling("temperature", 2.0).weights(sizes) == pytest.approx({"big": 0.75, "small": 0.25})
    assert TaskSampling("uniform").weights(sizes) == pytest.approx({"big": 0.5, "small": 0.5})
    with pytest.raises(DistillError, match="cannot select on 'nope'"):
        TaskSampling(select="nope").check(["big", "small"])
    for temperature in (0, -1.0, float("nan"), float("inf"), "2", True):  # was: inf accepted, as --task-temperature
        with pytest.raises(DistillError, match=r"task temperature must be a number in \(0, inf\)"):  # refuses it
            TaskSampling("temperature", temperature).check(["big", "small"])


def test_epoch_batches_are_seeded_single_task_batches_in_the_sampled_proportions():
    big, small = [f"b{i}" for i in range(400)], [f"s{i}" for i in range(100)]
    tasks = {"big": FitTask(None, None, big, None, [], [], "accuracy", 0.2),
             "small": FitTask(None, None, small, None, [], [], "accuracy", 0.8)}
    draw = lambda seed: epoch_batches(tasks, 10, torch.Generator().manual_seed(seed))  # noqa: E731
    first = draw(1)
    assert first == draw(1) and first != draw(2)
    assert len(first) == 50  # as many steps as the tasks have batches together
    for name, indices in first:
        assert all(i < len(tasks[name].train_examples) for i in indices)
    counts = Counter(name for seed in range(20) for name, _ in draw(seed))
    assert counts["small"] / sum(counts.values()) == pytest.approx(0.8, abs=0.03)
    # the small task is drawn far more often than it has batches: it starts further passes over its data
    assert Counter(i for name, indices in first if name == "small" for i in indices).most_common(1)[0][1] > 1
    # one task: exactly the single-task batches
    one = {"big": tasks["big"]}
    assert [b for _, b in epoch_batches(one, 10, torch.Generator().manual_seed(3))] == \
        training_batches(big, 10, torch.Generator().manual_seed(3))


def test_training_logs_every_heads_dev_metrics_and_picks_the_best_mean(multitask_teacher):
    history = [json.loads(line) for line in open(f"{multitask_teacher}/metrics.jsonl", encoding="utf-8")]
    assert [record["epoch"] for record in history] == [1, 2]
    for record in history:
        dev = record["dev"]
        assert dev["mean"] == pytest.approx((dev["sentiment"]["accuracy"] + dev["ner"]["f1"]) / 2)
        assert sum(record["task_batches"].values()) == 8 + 10  # 240 texts and 300 sentences, 32 a batch
    summary = json.loads(open(f"{multitask_teacher}/train_summary.json", encoding="utf-8").read())
    assert summary["best"]["dev"]["mean"] == max(record["dev"]["mean"] for record in history)
    assert summary["sampling_weights"]["sentiment"] == pytest.approx(240 / 540)


def test_evaluate_scores_one_head_as_that_heads_teacher_would(multitask_teacher, tmp_path):
    cli("evaluate", multitask_teacher, SAMPLES / "ner_dev.conll", "--head", "ner", "--output", tmp_path / "ner.json",
        "--quiet")
    written = json.loads((tmp_path / "ner.json").read_text())
    model = MultiTaskTeacher.from_pretrained(multitask_teacher)
    from distill.data import read_split
    examples, gold = read_split(str(SAMPLES / "ner_dev.conll"), "tagging")
    expected = evaluate(model.head("ner"), examples, gold)
    assert written["head"] == "ner" and written["f1"] == pytest.approx(expected["f1"])
    status, error = run_cli("evaluate", multitask_teacher, SAMPLES / "ner_dev.conll")
    assert status == 2 and "scored one head at a time" in error


def test_pseudo_label_writes_every_head_from_one_encoder_pass(multitask_teacher, tmp_path, monkeypatch):
    monkeypatch.setenv("DISTILL_CACHE", str(tmp_path / "cache"))
    model = MultiTaskTeacher.from_pretrained(multitask_teacher)
    passes = []
    model.encoder.register_forward_hook(lambda *args: passes.append(1))
    texts, tokens = texts_and_tokens()
    from distill.models.multitask import predict_heads
    predict_heads(model, tokens, batch_size=64)
    assert len(passes) == 1  # 40 sentences, one batch: one encoder pass for both heads

    output = tmp_path / "pseudo.jsonl"
    (tmp_path / "input.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    cli("pseudo-label", "--teacher", multitask_teacher, "--input", tmp_path / "input.txt", "--output", output,
        "--quiet")
    records = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert len(records) == len(texts)
    sentiment, ner = model.head("sentiment").predict(texts), model.head("ner").predict(tokens)
    for record, label, tags in zip(records, sentiment, ner):
        assert set(record["heads"]) == {"sentiment", "ner"}
        assert record["heads"]["sentiment"]["label"] == label  # one window each: as the head alone reads it
        assert record["heads"]["ner"]["tags"] == tags
        assert record["confidence"] == min(h["confidence"] for h in record["heads"].values())
        assert record["tokens"] == record["text"].split()
        assert all(h["confidence"] == round(h["confidence"], 6) for h in record["heads"].values())
    # --min-confidence compares the exact confidence; a written one is rounded to 6 decimals
    from distill.models.multitask import all_head_logits, head_records
    results = all_head_logits(model, tokens, None, 64)[0]
    exact = [record["confidence"] for record in head_records(model, tokens, results, exact=True)]
    rounding_up = next(c for c in exact if round(c, 6) > c)  # written above what it is
    threshold = math.nextafter(rounding_up, 1.0)  # drops it: the rounded confidence would have kept it
    # on the CPU, as `exact` was computed: a GPU's confidences differ in the last bits the threshold splits
    cli("pseudo-label", "--teacher", multitask_teacher, "--input", tmp_path / "input.txt", "--output",
        tmp_path / "kept.jsonl", "--min-confidence", threshold, "--quiet", "--no-cache", "--device", "cpu")
    kept = (tmp_path / "kept.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(kept) == sum(c >= threshold for c in exact) < len(texts)
    # one cache folder per head; a second run reads them all and runs no encoder pass
    assert len(list((tmp_path / "cache" / "teacher-logits").iterdir())) == 2
    from distill.pseudo_label import pseudo_label
    stats = pseudo_label(multitask_teacher, str(tmp_path / "input.txt"), str(tmp_path / "again.jsonl"),
                         progress=False, device="cpu")
    assert stats["cached"] == len(texts)


@pytest.mark.parametrize("head, model, train, dev", [
    ("sentiment", "lstm", "sentiment_train.csv", "sentiment_dev.csv"),
    ("ner", "lstm-tagger", "ner_train.conll", "ner_dev.conll"),
])
def test_kd_distils_one_head_with_its_own_logit_cache(multitask_teacher, tmp_path, monkeypatch, head, model, train,
                                                      dev):
    monkeypatch.setenv("DISTILL_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "student"
    cli("kd", "--teacher", multitask_teacher, "--head", head, "--model", model, "--train", SAMPLES / train,
        "--dev", SAMPLES / dev, "--output", out, "--epochs", "1", "--quiet")
    summary = json.loads((out / "train_summary.json").read_text())
    teacher = MultiTaskTeacher.from_pretrained(multitask_teacher)
    assert summary["kd"]["head"] == head
    assert summary["cache_dir"].endswith(teacher.head(head).fingerprint())
    assert load_model(out).hierarchy.labels == teacher.head(head).hierarchy.labels
    status, error = run_cli("kd", "--teacher", multitask_teacher, "--model", model, "--train", SAMPLES / train,
                            "--dev", SAMPLES / dev, "--output", tmp_path / "other", "--epochs", "1", "--quiet")
    assert status == 2 and "name the head to distil with --head" in error


@pytest.mark.parametrize("command", [
    ["evaluate", "{teacher}", SAMPLES / "ner_dev.conll", "--head", "nope"],
    ["predict", "{teacher}", SAMPLES / "unlabeled_news.txt", "--head", "nope"],
    ["pseudo-label", "--teacher", "{teacher}", "--input", SAMPLES / "unlabeled_news.txt", "--output", "{out}",
     "--head", "nope"],
    ["kd", "--teacher", "{teacher}", "--head", "nope", "--model", "lstm", "--train", SAMPLES / "sentiment_train.csv",
     "--dev", SAMPLES / "sentiment_dev.csv", "--output", "{out}"],
])
def test_a_head_that_does_not_exist_is_refused_in_one_line(multitask_teacher, tmp_path, command):
    args = [str(a).format(teacher=multitask_teacher, out=tmp_path / "out") for a in command]
    status, error = run_cli(*args)
    assert status == 2
    assert error.strip() == "error: no head 'nope': this teacher's heads are sentiment, ner"
    assert not (tmp_path / "out").exists()


def test_the_whole_teacher_checks_its_inputs_and_names_its_heads(multitask_teacher):
    """A text given to a tagging head would be read character by character; functions of one head's
    logits would fail on the heads' dict with a KeyError."""
    from distill import evaluate
    from distill.inference import predict_logits, prediction_records
    model = MultiTaskTeacher.from_pretrained(multitask_teacher)
    assert model.predict([]) == {"sentiment": [], "ner": []}
    for examples, message in ((["good film here"], "example 0 is not a non-empty list of tokens"),
                              ("Mina", "not one string")):
        with pytest.raises(DistillError, match=message):
            model.predict(examples)
    for call in (lambda: predict_logits(model, [["Mina"]]), lambda: list(prediction_records(model, [["Mina"]])),
                 lambda: evaluate(model, [["Mina"]], [["B-PER"]])):
        with pytest.raises(DistillError, match=r"a multi-task teacher has a head per task: score one with "
                                               r"model.head\(NAME\) \(its heads: sentiment, ner\)"):
            call()


def test_a_single_task_teacher_loads_and_predicts_as_before(tiny_classifier_teacher, tmp_path):
    """The single-task path writes the files it always did, and `--head` does not apply to it."""
    checkpoint = torch.load(f"{tiny_classifier_teacher}/checkpoint.pt", weights_only=True)
    assert "heads" not in checkpoint["config"] and checkpoint["config"]["task"] == "classification"
    assert all(isinstance(v, torch.Tensor) for v in checkpoint["classifier_state_dict"].values())
    teacher = Teacher.from_pretrained(tiny_classifier_teacher)
    texts, _ = texts_and_tokens()
    from distill.models import load_teacher
    loaded = load_teacher(tiny_classifier_teacher)
    assert type(loaded) is Teacher
    assert torch.equal(predict_logits(loaded, texts).logits, predict_logits(teacher, texts).logits)
    # forward is the pre-multi-task formula: Linear(dropout(features)) on the first token's state
    inputs, _ = teacher.prepare(texts[:4])
    with torch.inference_mode():
        hidden = teacher.encoder(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
        expected = teacher.classifier(hidden.last_hidden_state[:, 0])
        assert torch.allclose(teacher(**inputs), expected)
    status, error = run_cli("predict", tiny_classifier_teacher, SAMPLES / "unlabeled_movies.txt", "--head", "x")
    assert status == 2 and "not a multi-task teacher" in error


def test_task_spec_mistakes_are_refused_before_training(tiny_encoder_dir, tmp_path):
    for extra, message in [(["--train", SAMPLES / "sentiment_train.csv"], "--train is for a single-task teacher"),
                           (["--task-spec", "other:classification:a:b:c"], "use NAME:classification|tagging"),
                           (["--task-spec", f"{SENTIMENT}:colour=red"], "unknown setting 'colour'"),
                           (["--task-spec", f"other{SENTIMENT[9:]}:encoder_lr=fast"], "encoder_lr is a learning rate"),
                           (["--task-spec", f"other{SENTIMENT[9:]}:encoder_lr=0"], "encoder_lr is a learning rate"),
                           (["--task-spec", f"other{SENTIMENT[9:]}:pooling=max"], "pooling is auto, first or mean"),
                           (["--task-spec", f"other{SENTIMENT[9:]}:encoder_lr=1e-3:encoder_lr=0.5"],
                            "encoder_lr is given 2 times; give it once"),
                           (["--task-spec", SENTIMENT], "task name 'sentiment' is given twice"),
                           (["--task-spec", f"Sentiment{SENTIMENT[9:]}"],
                            "task names 'sentiment' and 'Sentiment' differ only in case"),
                           (["--task-spec", f"caf\u00e9{SENTIMENT[9:]}"], "use ASCII letters, digits, - and _"),
                           (["--task-spec", f"Mean{SENTIMENT[9:]}"], "(and not 'mean')")]:
        status, error = run_cli(*train_args(tiny_encoder_dir, tmp_path / "t"), *extra)
        assert status == 2 and message in error, error
        assert not (tmp_path / "t").exists()
    status, error = run_cli("teacher", "--encoder", tiny_encoder_dir, "--output", tmp_path / "t",
                            "--task-sampling", "uniform", "--task", "classification",
                            "--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv")
    assert status == 2 and "--task-sampling is for a multi-task teacher" in error


def test_an_interrupted_multitask_run_resumes_to_the_same_teacher(tiny_encoder_dir, multitask_teacher, tmp_path,
                                                                  monkeypatch):
    out = tmp_path / "teacher"
    interrupt_evaluation(monkeypatch, call=3)  # epoch 2's first head: resume state from epoch 1 is on disk
    status, _ = run_cli(*train_args(tiny_encoder_dir, out))
    assert status == 130
    monkeypatch.undo()
    cli(*train_args(tiny_encoder_dir, out, "--resume"))
    resumed = MultiTaskTeacher.from_pretrained(out).state_dict()
    whole = MultiTaskTeacher.from_pretrained(multitask_teacher).state_dict()
    assert all(torch.equal(resumed[k], whole[k]) for k in whole)


def test_one_pass_classification_reads_an_example_from_the_mean_of_its_windows(multitask_teacher):
    from distill.models.multitask import mean_per_example, predict_heads
    # rows: example 0 in two windows, example 1 in one, example 2 with no word (no sub-token at all)
    slots = torch.tensor([[0, 1], [2, -1], [4, 5], [-1, -1]])
    features = torch.tensor([[1.0], [3.0], [5.0], [7.0]])
    assert mean_per_example(features, slots, torch.tensor([3, 3])).tolist() == [[2.0], [5.0], [7.0]]
    model = MultiTaskTeacher.from_pretrained(multitask_teacher)
    texts, tokens = texts_and_tokens()
    together = predict_heads(model, tokens)["sentiment"].logits
    alone = predict_logits(model.head("sentiment"), texts).logits
    assert torch.allclose(together, alone, atol=1e-5)  # texts within max_length: the very same input


def test_classification_heads_read_long_texts_in_the_same_windows_as_each_head_alone(tiny_encoder_dir):
    """Texts read in windows (`long_inputs="windows"`, shared by the heads: one input for all) give
    every head, in one pass, the logits that head computes alone."""
    from distill.labels import LabelHierarchy
    from distill.models.teacher import TeacherConfig, TeacherTraining
    config = TeacherConfig(encoder=tiny_encoder_dir, max_length=16, long_inputs="windows", window_overlap=4)
    heads = {"polarity": (config, LabelHierarchy(["negative", "positive"]), TeacherTraining()),
             "topic": (config, LabelHierarchy(["film", "music", "sport"]), TeacherTraining())}
    model = MultiTaskTeacher.from_encoder(heads).eval()
    texts = ["a long and winding review of a film that goes on " * 6, "short"]
    inputs, _ = model.prepare(texts)
    assert inputs["window_weights"].shape[1] > len(texts)  # the long text really is read in several windows
    with torch.no_grad():
        together = model(**inputs)
        for name in heads:
            assert torch.allclose(together[name], model.head(name)(**inputs), atol=1e-6)
    other = TeacherConfig(encoder=tiny_encoder_dir, max_length=16)
    with pytest.raises(DistillError, match="long_inputs 'truncate' differs"):
        MultiTaskTeacher.from_encoder({**heads, "topic": (other, LabelHierarchy(["a", "b"]), TeacherTraining())})


def test_a_transformer_student_cannot_copy_a_multitask_teacher_without_a_head(multitask_teacher, tmp_path):
    """`student --embeddings-from-teacher` names no head: one line, not a traceback."""
    status, err = run_cli("student", "--model", "transformer", "--layers", "1", "--embeddings-from-teacher",
                          multitask_teacher, "--train", SAMPLES / "sentiment_train.csv", "--dev",
                          SAMPLES / "sentiment_dev.csv", "--epochs", "1", "--output", tmp_path / "s", "--quiet")
    assert status == 2 and "and the teacher is a multi-task teacher: give a pretrained encoder" in err


def test_a_classification_multitask_teacher_warns_what_it_cuts(tiny_encoder_dir, caplog):
    """Its heads read a text alike: the truncation warning of predict and pseudo-label counts for it."""
    import logging

    from distill.labels import LabelHierarchy
    from distill.models.teacher import TeacherConfig, TeacherTraining
    from distill.truncation import warn_if_truncated
    config = TeacherConfig(encoder=tiny_encoder_dir, max_length=8)
    heads = {"polarity": (config, LabelHierarchy(["negative", "positive"]), TeacherTraining()),
             "topic": (config, LabelHierarchy(["film", "music"]), TeacherTraining())}
    with caplog.at_level(logging.WARNING, logger="distill"):
        warn_if_truncated(MultiTaskTeacher.from_encoder(heads), ["a long review of a film that goes on " * 4,
                                                                 "short"], "texts.txt")
    assert any("texts.txt: 1 of 2 texts (50.0%) are longer" in r.getMessage() for r in caplog.records)


def test_shared_window_settings_do_not_depend_on_the_order_of_the_heads(tiny_encoder_dir):
    """--long-inputs windows is for the classification heads; a tagging head listed first does not refuse it."""
    from distill.labels import LabelHierarchy
    from distill.models.teacher import TeacherConfig, TeacherTraining
    config = TeacherConfig(encoder=tiny_encoder_dir, max_length=16, long_inputs="windows", window_overlap=4)
    tagging = (replace(config, task="tagging"), LabelHierarchy(["O", "B-PER", "I-PER"]), TeacherTraining())
    polarity = (config, LabelHierarchy(["negative", "positive"]), TeacherTraining())
    for heads in ({"ner": tagging, "polarity": polarity}, {"polarity": polarity, "ner": tagging}):
        assert MultiTaskTeacher.from_encoder(heads).names == list(heads)
    with pytest.raises(DistillError, match=r"TeacherConfig\(long_inputs='windows'\) is for classification"):
        MultiTaskTeacher.from_encoder({"ner": tagging, "other": tagging})


def test_each_head_moves_the_shared_encoder_at_its_own_rate(tiny_encoder_dir, monkeypatch):
    """A head's batches step the encoder at its task's default rate (5e-5 classification, 8e-5
    tagging: the single teachers' measured recipes, docs/multitask.md), or at --encoder-lr, or at
    its own encoder_lr setting; the optimizer's rate is the highest and each head's steps scale it."""
    import contextlib

    from distill import Runtime, TaskData, TeacherConfig, TeacherTraining, train_multitask_teacher
    from distill import training as training_module
    from distill.models.teacher import DEFAULT_ENCODER_LR
    scales = []
    real_rate = training_module.shared_rate

    @contextlib.contextmanager
    def recording(optimizer, scale):
        scales.append((round(scale, 6), [g["lr"] for g in optimizer.param_groups if g.get("shared")]))
        with real_rate(optimizer, scale):
            yield

    monkeypatch.setattr(training_module, "shared_rate", recording)
    sentiment = TaskData("sentiment", "classification", str(SAMPLES / "sentiment_train.csv"),
                         str(SAMPLES / "sentiment_dev.csv"))
    ner = TaskData("ner", "tagging", str(SAMPLES / "ner_train.conll"), str(SAMPLES / "ner_dev.conll"))
    quiet, config = Runtime(threads=1, progress=False), TeacherConfig(encoder=tiny_encoder_dir, max_length=32)
    classify, tag = DEFAULT_ENCODER_LR["classification"], DEFAULT_ENCODER_LR["tagging"]
    assert tag > classify
    for tasks, training, expected in (
            ([sentiment, ner], TeacherTraining(epochs=1), {"sentiment": classify, "ner": tag}),
            ([sentiment, ner], TeacherTraining(epochs=1, encoder_lr=1e-3), {"sentiment": 1e-3, "ner": 1e-3}),
            ([replace(sentiment, encoder_lr=2e-4), ner], TeacherTraining(epochs=1, encoder_lr=1e-4),
             {"sentiment": 2e-4, "ner": 1e-4})):
        scales.clear()
        result = train_multitask_teacher(tasks, config, training, env=quiet)
        heads = result.model.checkpoint()["config"]["heads"]
        assert {name: head["encoder_lr"] for name, head in heads.items()} == expected
        top = max(expected.values())
        assert {scale for scale, _ in scales} == {round(rate / top, 6) for rate in expected.values()}
        assert len(scales) == sum(result.history[0]["task_batches"].values())
        assert all(len(rates) == 1 for _, rates in scales)  # one shared group: the encoder


def test_shared_rate_scales_the_shared_groups_for_one_step_only():
    from distill.training import shared_rate
    shared, own = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([{"params": [shared], "lr": 0.1, "shared": True}, {"params": [own], "lr": 0.1}])
    shared.grad, own.grad = torch.ones(2), torch.ones(2)
    with shared_rate(optimizer, 0.25):
        optimizer.step()
    assert torch.allclose(shared, torch.full((2,), 1 - 0.025)) and torch.allclose(own, torch.full((2,), 0.9))
    assert [group["lr"] for group in optimizer.param_groups] == [0.1, 0.1]

def test_evaluate_replaces_only_the_same_heads_result(multitask_teacher, tmp_path):
    """A head's result under another head's name is not this run's to replace without --overwrite."""
    import shutil
    teacher = tmp_path / "teacher"
    shutil.copytree(multitask_teacher, teacher)
    evaluate = ["evaluate", teacher, SAMPLES / "sentiment_test.csv", "--head", "sentiment", "--quiet"]
    assert run_cli(*evaluate)[0] == 0 and run_cli(*evaluate)[0] == 0  # its own earlier result: replaced
    sentiment = (teacher / "eval_metrics.sentiment.json").read_bytes()
    status, error = run_cli("evaluate", teacher, SAMPLES / "ner_test.conll", "--head", "ner", "--quiet",
                            "--output", teacher / "eval_metrics.sentiment.json")
    assert status == 2 and "exists and is not" in error
    assert (teacher / "eval_metrics.sentiment.json").read_bytes() == sentiment


def test_compare_takes_a_multitask_teacher_by_its_head(multitask_teacher, tiny_classifier_teacher, tmp_path, capsys):
    """Was: compare refused a multi-task teacher ("use evaluate --head and predict instead"), and had no --head, which
    evaluate, predict, kd and pseudo-label take: a head's student could not be compared with its teacher. Now its
    head is compared (its score that of evaluate --head), the other models as they are; without --head, or with one
    and no multi-task teacher, one line."""
    from distill.evaluation import evaluate_model
    dev = SAMPLES / "sentiment_dev.csv"
    status, out, err = run_main_printed(capsys, "compare", multitask_teacher, tiny_classifier_teacher, "--data", dev,
                                        "--head", "sentiment", "--rounds", "1")
    assert status == 0, err
    row = out.splitlines()[1].split()
    assert row[1] == "[sentiment]"
    scored = evaluate_model(multitask_teacher, str(dev), output=str(tmp_path / "m.json"), head="sentiment",
                            progress=False)
    assert float(row[2]) == round(scored["accuracy"], 4)
    for argv, said in [((multitask_teacher,), "a multi-task teacher is scored one head at a time"),
                       ((tiny_classifier_teacher, "--head", "sentiment"),
                        "--head picks a multi-task teacher's head, and no model compared is one: drop it")]:
        status, err = run_main(capsys, "compare", *argv, "--data", dev, "--rounds", "1")
        assert status == 2 and said in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("edit, said", [
    (lambda heads: {"senti" if name == "sentiment" else name: head for name, head in heads.items()},
     'names the heads ["senti", "ner"], the model\'s are ["sentiment", "ner"]'),
    (lambda heads: {**heads, "sentiment": {**heads["sentiment"], "labels": heads["sentiment"]["labels"][::-1]}},
     'names the head \'sentiment\' as {"task": "classification", "labels": ["positive", "negative"]}, the model\'s is'),
    (lambda heads: list(heads), 'names the heads as ["sentiment", "ner"], not each head\'s task and labels'),
], ids=["renamed", "labels-reordered", "a-list"])
def test_a_multitask_card_whose_heads_were_edited_is_refused(edit, said, multitask_teacher, tmp_path):
    """The card's heads (their names, tasks and labels) went unchecked, loading reading its checked files alone:
    a head renamed or its labels reordered in the card was used in silence, and the card's words named heads the
    model does not have. Loading refuses such a card in one line."""
    import shutil
    teacher = tmp_path / "teacher"
    shutil.copytree(multitask_teacher, teacher)
    card = json.loads((teacher / "distill.json").read_text())
    card["heads"] = edit(card["heads"])
    (teacher / "distill.json").write_text(json.dumps(card))
    status, err = run_cli("predict", teacher, SAMPLES / "unlabeled_movies.txt", "--head", "sentiment")
    assert status == 2 and f"{teacher / 'distill.json'}: {said}" in err and err.count("\n") == 1, err
