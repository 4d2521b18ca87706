"""Input that is accepted but makes the numbers meaningless, only looks valid, is named in another
caller's words, or is reported by numbers that mislead: each class refused or worded as its reader knows it."""

from __future__ import annotations

import pytest
import torch

from distill import losses
from distill.distillation import TeacherStudentDistill
from distill.errors import DistillError


def run_cli(*args) -> tuple[int, str]:
    """nlp-train in-process: its exit status and what it wrote to stderr."""
    import contextlib
    import io

    from procedures.cli import main
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    return exit_info.value.code, stderr.getvalue()


# -- settings that make the numbers meaningless ---------------------------------------------------------------

def centred_limit(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """T^2 * KL's limit as T grows: half the mean squared difference of the centred logits, in float64."""
    d = (teacher - student).double()
    return 0.5 * ((d - d.mean(-1, keepdim=True)) ** 2).mean(-1).mean()


@pytest.mark.parametrize("temperature", [1e3, 1e5, 1e6, 1e9, 1e12])
def test_a_large_temperature_gives_the_kl_term_not_rounding_noise(temperature):
    generator = torch.Generator().manual_seed(0)
    student, teacher = torch.randn(32, 5, generator=generator) * 3, torch.randn(32, 5, generator=generator) * 3
    expected = centred_limit(student, teacher).item()  # within 1e-5 of T^2 * KL for T >= 1e3 at this scale
    assert losses.kl_distill(student, teacher, temperature).item() == pytest.approx(expected, rel=1e-4)
    two = torch.randn(32, 2, generator=generator) * 3
    one = (two[:, 1] - two[:, 0]).unsqueeze(1)  # a one-logit student: the two-class KL of [0, s]
    expected = centred_limit(losses.two_class_logits(one), teacher[:, :2]).item()
    assert losses.binary_kl_distill(one, teacher[:, :2], temperature).item() == pytest.approx(expected, rel=1e-4)
    student.requires_grad_(True)
    losses.kl_distill(student, teacher, temperature).backward()
    s, t = student.detach().double(), teacher.double()
    if temperature <= 1e6:  # d/ds of T^2 KL is T (q - p), which float64 resolves this far
        exact = temperature * (torch.softmax(s / temperature, -1) - torch.softmax(t / temperature, -1)) / len(s)
    else:  # and beyond, its limit: the centred difference over the classes
        exact = (s - t - (s - t).mean(-1, keepdim=True)) / 5 / len(s)
    assert torch.allclose(student.grad.double(), exact, rtol=1e-4, atol=1e-5 * exact.abs().max().item())


def test_a_temperature_beyond_what_float32_resolves_is_refused_with_the_reason(tiny_classifier_teacher, tmp_path):
    TeacherStudentDistill(temperature=losses.MAX_TEMPERATURE)
    with pytest.raises(DistillError, match=r"temperature must be at most 1e\+12, got 1e\+13: .*float32"):
        TeacherStudentDistill(temperature=1e13)
    from conftest import SAMPLES
    status, stderr = run_cli("kd", "--teacher", tiny_classifier_teacher, "--model", "cnn", "--train",
                             SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv",
                             "--output", tmp_path / "student", "--temperature", "1e20", "--quiet")
    assert status == 2 and stderr.startswith("error: temperature must be at most 1e+12") and "Traceback" not in stderr
