"""The training controls every run kind shares: AdamW and its weight decay, learning-rate schedules with a
warm-up, gradient accumulation, gradient clipping and fp16 (`distill.training.make_optimizer`, `fit_tasks`)."""

import copy
import json
import math
import re

import pytest
import torch

from distill.callbacks import Callback
from distill.data import read_classification, read_tagging
from distill.distillation import CachedTeacherLogits, DistillObjective, TeacherStudentDistill
from distill.errors import DistillError
from distill.inference import predict_logits
from distill.labels import build_hierarchy
from distill.models import load_model
from distill.models.students import build_student
from distill.trainers import Runtime, train_student
from distill.training import (FitTask, SupervisedObjective, TrainSettings, accumulate_gradients, lr_factor,
                              make_optimizer)
from tests.conftest import SAMPLES, cli, config_for, run_main

TRAIN, DEV = SAMPLES / "sentiment_train.csv", SAMPLES / "sentiment_dev.csv"
SMALL_LSTM = ["--model", "lstm", "--embedding-dim", "16", "--hidden-dim", "16", "--dropout", "0", "--quiet"]


class Rates(Callback):
    """Records each step's learning rates."""

    def __init__(self):
        self.rates = []

    def on_step(self, step) -> None:
        self.rates.append(step.learning_rates["lr"])


def test_adamw_without_weight_decay_steps_exactly_as_adam():
    """Students trained with Adam, as the benchmark measured them; AdamW at weight decay 0 (the default)
    gives the same weights bit for bit."""
    data = read_classification(str(TRAIN))
    examples, labels = list(data["text"][:32]), list(data["label"][:32])
    torch.manual_seed(0)
    first = build_student(config_for("lstm", embedding_dim=8, hidden_dim=6, dropout=0.0),
                          build_hierarchy("classification", labels, None, "train"), examples)
    second = copy.deepcopy(first)
    adam = torch.optim.Adam(first.parameters(), lr=2e-3)
    adamw, _ = make_optimizer([{"params": second.parameters(), "lr": 2e-3}], 0.0, "constant", 0.0, 10)
    for model, optimizer in ((first, adam), (second, adamw)):
        task = FitTask(model, SupervisedObjective(), examples, labels, [], [], "accuracy")
        for start in range(0, 32, 8):
            optimizer.zero_grad()
            accumulate_gradients(task, list(range(start, start + 8)), 8)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
    for (name, a), b in zip(first.state_dict().items(), second.state_dict().values()):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("schedule", ["constant", "linear", "cosine"])
def test_schedules_follow_transformers_formulas(schedule):
    """The teacher stepped on transformers' linear warm-up and decay: `lr_factor` is the same curve, and so
    are the constant and cosine ones."""
    import transformers
    build = {"constant": transformers.get_constant_schedule_with_warmup,
             "linear": transformers.get_linear_schedule_with_warmup,
             "cosine": transformers.get_cosine_schedule_with_warmup}[schedule]
    total, warmup = 25, 5
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    reference = build(optimizer, warmup) if schedule == "constant" else build(optimizer, warmup, total)
    expected = [lr_factor(step, schedule, warmup, total) for step in range(total + 1)]
    got = []
    for _ in range(total + 1):
        got.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        reference.step()
    assert got == pytest.approx(expected, abs=1e-12)
    assert expected[0] == 0 and expected[warmup] == 1.0 and expected[warmup // 2] == pytest.approx(0.4)
    assert expected[-1] == (1.0 if schedule == "constant" else 0.0)
    if schedule == "cosine":
        assert expected[warmup + (total - warmup) // 2] == pytest.approx(0.5)


@pytest.mark.parametrize("schedule", ["constant", "linear", "cosine"])
def test_a_student_steps_on_its_schedule(schedule):
    """Each step's rate, as a callback hears it, is lr times the schedule's factor at that step; the
    schedule spans the epoch cap, warm-up included."""
    rates = Rates()
    settings = TrainSettings(lr=0.01, batch_size=16, epochs=2, patience=5, lr_schedule=schedule, warmup_ratio=0.25)
    train_student(config_for("lstm", embedding_dim=8, hidden_dim=6), str(TRAIN), str(DEV), settings,
                  env=Runtime(progress=False), callbacks=[rates])
    total = len(rates.rates)
    assert total == 2 * math.ceil(len(read_classification(str(TRAIN))["text"]) / 16)
    assert rates.rates == pytest.approx([0.01 * lr_factor(step, schedule, int(0.25 * total), total)
                                         for step in range(total)])
    assert rates.rates[0] == 0.0 and max(rates.rates) == pytest.approx(0.01)


ACCUMULATION_CASES = {  # kind: (teacher fixture for kd or None, student, kd options)
    "classification": (None, "lstm", None),
    "tagging": (None, "lstm-tagger", None),
    "kd-classification": ("tiny_classifier_teacher", "lstm", {"kd_loss": "kl"}),
    "kd-tagging": ("tiny_tagging_teacher", "lstm-tagger", {"kd_loss": "kl", "min_confidence": 0.3}),
}


def accumulation_task(request, kind: str) -> FitTask:
    """A student without dropout, class-weighted, on 12 examples (for kd the last 6 unlabeled)."""
    fixture, student, kd_options = ACCUMULATION_CASES[kind]
    if student == "lstm-tagger":
        data = read_tagging(str(SAMPLES / "ner_train.conll"))
        examples, labels = list(data["tokens"][:12]), list(data["tags"][:12])
    else:
        data = read_classification(str(TRAIN))
        examples, labels = list(data["text"][:12]), list(data["label"][:12])
    teacher = load_model(request.getfixturevalue(fixture)) if fixture else None
    task = "tagging" if student == "lstm-tagger" else "classification"
    hierarchy = teacher.hierarchy if teacher else build_hierarchy(task, labels, None, "train")
    weights = [1.0 + i % 3 for i in range(len(hierarchy))]
    torch.manual_seed(0)
    model = build_student(config_for(student, embedding_dim=8, hidden_dim=6, dropout=0.0), hierarchy, examples)
    if teacher is None:
        return FitTask(model, SupervisedObjective(weights), examples, labels, [], [], "accuracy")
    objective = DistillObjective(TeacherStudentDistill(class_weights=weights, **kd_options),
                                 CachedTeacherLogits(predict_logits(teacher, examples)))
    return FitTask(model, objective, examples, labels[:6] + [None] * 6, [], [], "accuracy")


def gradients_of(task: FitTask, micro_batch: int) -> tuple[float, dict, dict]:
    task.model.zero_grad(set_to_none=True)
    loss, terms = accumulate_gradients(task, list(range(12)), micro_batch)
    grads = {name: p.grad.clone() for name, p in task.model.named_parameters() if p.grad is not None}
    return loss, {name: value.item() for name, value in terms.items()}, grads


@pytest.mark.parametrize("kind", list(ACCUMULATION_CASES))
def test_accumulated_micro_batches_give_the_loss_and_gradient_of_one_batch(request, kind):
    """2 micro-batches of 6 (and 3 of 5, 5 and 2) give the loss, each term and the gradient of one batch of
    12: each term's sum is divided by its denominator over all of them (words scored, class weights,
    confident pseudo-labels), not averaged per micro-batch."""
    task = accumulation_task(request, kind)
    loss, terms, expected = gradients_of(task, 12)
    assert set(terms) == ({"student", "distillation"} if kind.startswith("kd") else {"nll"})
    for micro_batch in (6, 5):
        got_loss, got_terms, got = gradients_of(task, micro_batch)
        assert got_loss == pytest.approx(loss, rel=1e-6)
        assert got_terms == pytest.approx(terms, rel=1e-6)
        assert got.keys() == expected.keys()
        for name, value in expected.items():
            torch.testing.assert_close(got[name], value, rtol=1e-5, atol=1e-7, msg=name)


def test_a_run_with_accumulation_follows_the_run_with_a_larger_batch(tmp_path):
    """--batch-size 16 --grad-accumulation 2 draws the batches of --batch-size 32 and takes their steps:
    the same losses and dev scores, and the same weights to float noise."""
    cli("student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--epochs", "2", "--batch-size", "32",
        "--output", tmp_path / "large")
    cli("student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--epochs", "2", "--batch-size", "16",
        "--grad-accumulation", "2", "--output", tmp_path / "accumulated")
    large, accumulated = ([json.loads(line) for line in open(tmp_path / run / "metrics.jsonl")]
                          for run in ("large", "accumulated"))
    for a, b in zip(large, accumulated, strict=True):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-5)
        assert b["dev"] == pytest.approx(a["dev"])
    from distill.io import load_tensors
    one, two = (load_tensors(tmp_path / run / "model.safetensors") for run in ("large", "accumulated"))
    gaps = torch.cat([(two[name] - value).abs().flatten() for name, value in one.items()])
    assert gaps.mean() < 1e-5


def test_resume_with_a_cosine_schedule_and_accumulation_is_exact(tmp_path, capsys, monkeypatch):
    """Interrupted after epoch 1 and resumed, a run on a cosine schedule with a warm-up, accumulation and
    weight decay ends on the very weights of the uninterrupted run; a resume with another schedule is
    refused, naming it."""
    import distill.training
    from tests.conftest import interrupt_evaluation
    args = ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--epochs", "3", "--patience", "5",
            "--lr-schedule", "cosine", "--warmup-ratio", "0.2", "--grad-accumulation", "2", "--weight-decay", "0.01"]
    cli(*args, "--output", tmp_path / "whole")
    real_evaluate = distill.training.evaluate
    interrupt_evaluation(monkeypatch)
    assert run_main(capsys, *args, "--output", tmp_path / "resumed")[0] == 130
    monkeypatch.setattr(distill.training, "evaluate", real_evaluate)
    status, err = run_main(capsys, *args[:-8], "--lr-schedule", "linear", *args[-6:], "--output",
                           tmp_path / "resumed", "--resume")
    assert status == 2 and "settings.lr_schedule" in err, err
    cli(*args, "--output", tmp_path / "resumed", "--resume")
    for name in ("model.safetensors", "metrics.jsonl"):
        whole, resumed = ((tmp_path / run / name).read_bytes() for run in ("whole", "resumed"))
        if name == "metrics.jsonl":  # the epochs' seconds differ
            whole, resumed = ([{k: v for k, v in json.loads(line).items() if "second" not in k}
                               for line in text.splitlines()] for text in (whole, resumed))
        assert whole == resumed, name


def test_fp16_on_a_cpu_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    from distill import precision
    monkeypatch.setattr(precision, "_setting", precision.current())  # the command line sets the process's
    status, err = run_main(capsys, "--precision", "fp16", "student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV,
                           "--output", tmp_path / "out", "--epochs", "1", "--device", "cpu")
    assert status == 2 and err.count("\n") == 1 and err.startswith("error: --precision fp16 needs a CUDA GPU"), err
    assert not (tmp_path / "out").exists()
    with pytest.raises(DistillError, match=r"Runtime\(precision='fp16'\) needs a CUDA GPU"):
        train_student("lstm", str(TRAIN), str(DEV), TrainSettings(epochs=1), env=Runtime("cpu", "fp16", progress=False))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="fp16 autocast and its gradient scaler need CUDA")
def test_fp16_trains_on_cuda(tmp_path):
    cli("--precision", "fp16", "student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--epochs", "2",
        "--device", "cuda", "--output", tmp_path / "out")
    records = [json.loads(line) for line in open(tmp_path / "out" / "metrics.jsonl")]
    assert len(records) == 2 and all(math.isfinite(r["train_loss"]) for r in records)


@pytest.mark.parametrize("device, local_rank, message", [
    ("cuda:1", "0", "device 'cuda:1': this machine has 1 GPU (cuda:0 to cuda:0)"),
    ("auto", "1", "torchrun started more processes on this machine than it has GPUs (1): local rank 1 has none"),
    ("cuda", "1", "torchrun started more processes on this machine than it has GPUs (1): local rank 1 has none; start it with --nproc-per-node 1, or give device=cpu to train on the CPU"),
])
def test_a_gpu_the_machine_lacks_is_refused_in_one_line(monkeypatch, device, local_rank, message):
    """On a 1-GPU machine (faked), cuda:1, or a second torchrun process on the GPU, is one line: on a real one,
    CUDA's "invalid device ordinal" stopped every torchrun test's second process at its start."""
    from distill.models.base import pick_device
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", local_rank)
    with pytest.raises(DistillError, match=re.escape(message)):
        pick_device(device)
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert pick_device("auto") == torch.device("cuda") and pick_device("cpu") == torch.device("cpu")


def test_max_grad_norm_zero_leaves_the_gradients_unclipped(monkeypatch):
    clipped = []
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda *args, **kwargs: clipped.append(args[1]))
    for norm in (0.0, 0.5):
        train_student(config_for("lstm", embedding_dim=8, hidden_dim=6), str(TRAIN), str(DEV),
                      TrainSettings(epochs=1, max_grad_norm=norm), env=Runtime(progress=False))
    assert clipped and set(clipped) == {0.5}


@pytest.mark.parametrize("settings, message", [
    ({"lr_schedule": "step"}, "unknown lr schedule 'step': choose one of constant, linear, cosine"),
    ({"grad_accumulation": 0}, "grad_accumulation must be a whole number >= 1, got 0"),
    ({"warmup_ratio": 1.5}, "warmup_ratio"),
    ({"weight_decay": -0.1}, "weight_decay"),
    ({"max_grad_norm": float("nan")}, "max_grad_norm"),
])
def test_bad_controls_are_refused(settings, message):
    with pytest.raises(DistillError, match=message.replace("(", r"\(")):
        TrainSettings(**settings)
