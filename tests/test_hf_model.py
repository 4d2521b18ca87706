"""The teacher as a transformers model: same logits, and `pipeline` gives the teacher's labels."""

from __future__ import annotations

import pytest
from transformers import pipeline

from tests.conftest import SAMPLES
from distill.data import read_unlabeled
from distill.inference import decode_labels, predict_logits
from distill.models import load_model
from distill.hf_model import max_logit_difference, to_transformers


@pytest.mark.parametrize("fixture, corpus, pooling", [("tiny_classifier_teacher", "unlabeled_movies.txt", "first"),
                                                      ("tiny_classifier_teacher", "unlabeled_movies.txt", "mean"),
                                                      ("tiny_tagging_teacher", "unlabeled_news.txt", "first")])
def test_converted_teacher_computes_the_same_logits(request, fixture, corpus, pooling):
    teacher = load_model(request.getfixturevalue(fixture))
    teacher.config.pooling = pooling  # same weights, other head: the conversion must follow it
    model, _ = to_transformers(teacher)
    column = "text" if teacher.task == "classification" else "tokens"
    examples = list(read_unlabeled(SAMPLES / corpus, teacher.task)[column])[:40]
    assert max_logit_difference(teacher, model, examples) < 1e-4


def test_text_classification_pipeline_agrees_with_the_teacher(tiny_classifier_teacher):
    teacher = load_model(tiny_classifier_teacher)
    texts = list(read_unlabeled(SAMPLES / "unlabeled_movies.txt", "classification")["text"])[:40]
    model, tokenizer = to_transformers(teacher)
    classify = pipeline("text-classification", model=model, tokenizer=tokenizer, device="cpu")
    predicted = [r["label"] for r in classify(texts, batch_size=8, truncation=True)]
    assert predicted == decode_labels(teacher, predict_logits(teacher, texts))
