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


# -- input that only looks valid ------------------------------------------------------------------------------

@pytest.mark.parametrize("label", ["/Physics", "Science/", "Science//Physics", "Science/ /Physics"])
def test_a_hierarchical_label_with_an_empty_level_is_refused_where_it_is(tmp_path, label):
    """'/a' trained a level-0 class named '', 'a//b' a deeper hierarchy than meant, silently."""
    from distill.data import DataOptions, labelled_examples
    from distill.errors import on_command_line
    path = tmp_path / "train.csv"
    path.write_text(f"text,label\ngood film,Arts/Film\nnew stars,{label}\n", encoding="utf-8")
    with pytest.raises(DistillError, match=rf"train.csv:3: label '{label}' has an empty level \(split at '/': .*"
                                           r"read them flat with DataOptions\(separator=None\)$"):
        labelled_examples(str(path), "classification", DataOptions(), "train")
    with pytest.raises(DistillError, match=rf"^train: example 1: label '{label}' has an empty level"):
        labelled_examples((["good film", "new stars"], ["Arts/Film", label]), "classification", DataOptions(), "train")
    with on_command_line(), pytest.raises(DistillError, match=r"read them flat with --label-separator ''$"):
        labelled_examples(str(path), "classification", DataOptions(), "train")
    flat = labelled_examples(str(path), "classification", DataOptions(separator=None), "train")
    assert flat.labels == ["Arts/Film", label.strip()]  # flat labels may hold the character


def test_a_hierarchical_label_with_an_empty_level_stops_the_cli(tmp_path):
    from conftest import SAMPLES
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"text {i},{'Arts/Film' if i % 2 else 'Arts//Music'}\n"
                                              for i in range(8)), encoding="utf-8")
    status, stderr = run_cli("student", "--model", "ngram", "--train", train, "--dev", SAMPLES / "sentiment_dev.csv",
                             "--output", tmp_path / "out", "--quiet")
    assert status == 2 and stderr.startswith(f"error: {train}:2: label 'Arts//Music' has an empty level") \
        and stderr.rstrip().endswith("read them flat with --label-separator ''")


@pytest.mark.parametrize("content, message", [
    # a lone no-break space written as the word: split() drops it, leaving one field
    ("Mina B-PER\n\u00a0 O\n", r"t.conll:2: expected 2 fields like the first line, found 1: the line holds "
                                r"U\+00A0 NO-BREAK SPACE, a Unicode space, read as a separator, not a field"),
    ("Mina B-PER\nspoke\u3000\u3000\n", r"t.conll:2: expected 2 fields like the first line, found 1: the line holds "
                                        r"U\+3000 IDEOGRAPHIC SPACE, a Unicode space"),
    ("\u00a0 O\nMina B-PER\n", r"t.conll:1: tag column -1 is the word itself \(lines have 1 field\); .*: the line "
                               r"holds U\+00A0 NO-BREAK SPACE, a Unicode space"),
    # a zero-width space is no space to split(): it was read as a word
    ("Mina B-PER\n\u200b O\n", r"t.conll:2: field 1 is only U\+200B ZERO WIDTH SPACE, which shows nothing"),
    ("Mina B-PER\nspoke \u2060\n", r"t.conll:2: field 2 is only U\+2060 WORD JOINER, which shows nothing"),
])
def test_a_conll_field_of_only_invisible_characters_is_named(tmp_path, content, message):
    from distill.data import read_tagging
    path = tmp_path / "t.conll"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DistillError, match=message):
        read_tagging(str(path))


@pytest.mark.parametrize("name, content, message", [
    ("c.csv", "text,label\n\u00a0,pos\n", r"c.csv:2: the text in column 'text' is only U\+00A0 NO-BREAK SPACE"),
    ("c.csv", "text,label\ngood,\u200b\n", r"c.csv:2: the label in column 'label' is only U\+200B ZERO WIDTH SPACE"),
    ("c.jsonl", '{"text": "\\u200b\\u200d", "label": "pos"}\n',
     r"c.jsonl:1: the text in column 'text' is only U\+200B ZERO WIDTH SPACE, U\+200D ZERO WIDTH JOINER"),
    ("t.jsonl", '{"tokens": ["Mina", "\\u3164"], "tags": ["B-PER", "O"]}\n',
     r"t.jsonl:1: token 2 is only U\+3164 HANGUL FILLER"),
    ("t.jsonl", '{"tokens": ["Mina", "spoke"], "tags": ["B-PER", "\\ufeff"]}\n',
     r"t.jsonl:1: tag 2 is only U\+FEFF ZERO WIDTH NO-BREAK SPACE"),
])
def test_any_field_of_only_invisible_characters_is_refused_naming_them(tmp_path, name, content, message):
    """The same rule for every field of labelled data: a text, a label, a token or a tag that shows nothing."""
    from distill.data import read_classification, read_tagging
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DistillError, match=message + ", which shows nothing"):
        (read_tagging if name.startswith("t") else read_classification)(str(path))
