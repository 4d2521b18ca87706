"""bf16 autocast: opt-in, close to fp32, and usable for training as well as inference."""

import json

import pytest
import torch

from distill.errors import DistillError
from distill.inference import predict_logits
from distill.models import load_model
from distill import precision as precision_module
from distill.precision import bf16_supported, set_precision
from tests.conftest import SAMPLES, cli, sample_texts

needs_bf16 = pytest.mark.skipif(not bf16_supported(torch.device("cpu")),
                                reason="this CPU has no bf16 support (needs AVX-512 BF16 or AMX); "
                                       "the bf16 path is tested where the CPU has it")


@pytest.fixture
def precision():
    yield set_precision
    set_precision("fp32")


@needs_bf16
def test_bf16_teacher_logits_are_close_to_fp32_but_not_equal(tiny_classifier_teacher, precision):
    teacher = load_model(tiny_classifier_teacher)
    texts = sample_texts()[:40]
    fp32 = predict_logits(teacher, texts).logits
    precision("bf16")
    bf16 = predict_logits(teacher, texts).logits
    assert bf16.dtype == torch.float32 and not torch.equal(bf16, fp32)  # autocast ran, results come back fp32
    torch.testing.assert_close(bf16, fp32, rtol=0.05, atol=0.05)


@needs_bf16
def test_bf16_student_training_runs(tmp_path, precision):  # the fixture restores fp32 afterwards
    cli("--threads", "1", "--precision", "bf16", "student", "--model", "cnn", "--train",
        SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv", "--output", tmp_path / "s",
        "--epochs", "1", "--quiet")
    record = json.loads((tmp_path / "s" / "metrics.jsonl").read_text())
    assert 0 < record["train_loss"] < 10


def test_unknown_precision_is_refused(precision):
    with pytest.raises(DistillError, match="unknown precision"):
        precision("fp8")


def test_bf16_without_hardware_support_is_refused_and_auto_falls_back(tmp_path, precision, monkeypatch, capsys):
    """On a CPU without bf16, --precision bf16 is one clear error and auto runs in fp32 (checked on any CPU)."""
    monkeypatch.setattr(precision_module, "bf16_supported", lambda device: False)
    from procedures.cli import main
    args = ["--threads", "1", "student", "--model", "cnn", "--train", SAMPLES / "sentiment_train.csv",
            "--dev", SAMPLES / "sentiment_dev.csv", "--epochs", "1", "--quiet"]
    with pytest.raises(SystemExit) as exit_info:
        main(["--precision", "bf16", *map(str, args), "--output", str(tmp_path / "bf16")])
    assert exit_info.value.code == 2
    assert "has no bf16 support; use fp32 or auto" in capsys.readouterr().err
    assert not (tmp_path / "bf16").exists()
    cli("--precision", "auto", *args, "--output", tmp_path / "auto")
    assert precision_module.uses_bf16(torch.device("cpu")) is False
