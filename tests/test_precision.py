"""bf16 autocast: opt-in, close to fp32, and usable for training as well as inference."""

import json

import pytest
import torch

from distill.errors import DistillError
from distill.inference import predict_logits
from distill.models import load_model
from distill.precision import set_precision
from tests.conftest import SAMPLES, cli, sample_texts


@pytest.fixture
def precision():
    yield set_precision
    set_precision("fp32")


def test_bf16_teacher_logits_are_close_to_fp32_but_not_equal(tiny_classifier_teacher, precision):
    teacher = load_model(tiny_classifier_teacher)
    texts = sample_texts()[:40]
    fp32 = predict_logits(teacher, texts).logits
    precision("bf16")
    bf16 = predict_logits(teacher, texts).logits
    assert bf16.dtype == torch.float32 and not torch.equal(bf16, fp32)  # autocast ran, results come back fp32
    torch.testing.assert_close(bf16, fp32, rtol=0.05, atol=0.05)


def test_bf16_student_training_runs(tmp_path, precision):  # the fixture restores fp32 afterwards
    cli("--threads", "1", "--precision", "bf16", "student", "--model", "cnn", "--train",
        SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv", "--output", tmp_path / "s",
        "--epochs", "1", "--quiet")
    record = json.loads((tmp_path / "s" / "metrics.jsonl").read_text())
    assert 0 < record["train_loss"] < 10


def test_unknown_precision_is_refused(precision):
    with pytest.raises(DistillError, match="unknown precision"):
        precision("fp16")
