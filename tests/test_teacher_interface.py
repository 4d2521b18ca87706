"""One teacher interface (issue 39): every model says what it reads text with and its input embeddings through
`sub_word_tokenizer()` and `input_embeddings()`, instead of callers probing attributes; a model of whole words, or
with no weights here, says None."""

from __future__ import annotations

import pytest
import torch

from distill.labels import LabelHierarchy
from distill.models import load_teacher
from tests.conftest import config_for


def _vocabulary_size(tokenizer) -> int:
    return len(tokenizer)


@pytest.mark.parametrize("fixture", ["tiny_classifier_teacher", "tiny_tagging_teacher", "tiny_hf_classifier",
                                     "tiny_causal_lm"])
def test_a_sub_word_teacher_gives_its_tokenizer_and_its_embedding_table(fixture, request):
    directory = request.getfixturevalue(fixture)
    from distill.models.prompt import prompt_settings
    with prompt_settings(labels="negative,positive"):  # a causal LM's labels; the others have theirs
        teacher = load_teacher(directory)
    tokenizer, table = teacher.sub_word_tokenizer(), teacher.input_embeddings()
    assert tokenizer is not None and tokenizer("a film")["input_ids"]
    assert isinstance(table, torch.Tensor) and table.device.type == "cpu" and not table.requires_grad
    assert table.shape[0] >= _vocabulary_size(tokenizer) - 1  # a row per sub-word (tables may be padded)


def test_a_student_of_whole_words_has_neither():
    from distill.models.registry import student_entry
    student = student_entry("lstm").cls.build(config_for("lstm", embedding_dim=8, hidden_dim=8),
                                              LabelHierarchy(["a", "b"]), ["one text", "another one"])
    assert student.sub_word_tokenizer() is None and student.input_embeddings() is None


def test_the_callers_ask_the_interface_and_probe_no_attribute():
    """augment.py and embedding_init.py found the tokenizer and embeddings by getattr probing: that is gone."""
    from pathlib import Path
    root = Path(__file__).parents[1] / "distill"
    for module in ("augment.py", "embedding_init.py", "models/students.py"):
        text = (root / module).read_text(encoding="utf-8")
        assert 'getattr(teacher, "tokenizer"' not in text and "get_input_embeddings" not in text, module
