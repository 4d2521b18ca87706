"""Evaluation metrics: classification (with per-level scores for hierarchical labels) and tagging.

scikit-learn and seqeval load when a metric is computed, not when the package is imported.
"""

from __future__ import annotations

from typing import Sequence

from distill.labels import LabelHierarchy


def _scores(gold: Sequence[str], pred: Sequence[str]) -> dict[str, float]:
    from sklearn.metrics import accuracy_score, precision_recall_fscore_support
    scores = {"accuracy": float(accuracy_score(gold, pred))}
    for average in ("macro", "micro"):
        p, r, f, _ = precision_recall_fscore_support(gold, pred, average=average, zero_division=0)
        scores.update({f"{average}_precision": float(p), f"{average}_recall": float(r),
                       f"{average}_f1": float(f)})
    return scores


def classification_metrics(gold: Sequence[str], pred: Sequence[str],
                           hierarchy: LabelHierarchy | None = None) -> dict:
    """Accuracy and macro/micro P/R/F1 on leaf labels; for deep hierarchies also per level."""
    scores = _scores(gold, pred)
    if hierarchy is not None and hierarchy.depth > 1:
        scores["levels"] = [
            {"level": level, **_scores([hierarchy.at_level(g, level) for g in gold],
                                       [hierarchy.at_level(p, level) for p in pred])}
            for level in range(hierarchy.depth)]
    return scores


def tagging_metrics(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> dict[str, float]:
    """Entity precision/recall/F1 (seqeval, IOB2 as conlleval reads it) and token accuracy."""
    from seqeval.metrics import f1_score, precision_score, recall_score
    tokens = sum(len(g) for g in gold)
    correct = sum(g == p for gs, ps in zip(gold, pred) for g, p in zip(gs, ps))
    return {
        "f1": float(f1_score(gold, pred, zero_division=0)),
        "precision": float(precision_score(gold, pred, zero_division=0)),
        "recall": float(recall_score(gold, pred, zero_division=0)),
        "token_accuracy": correct / max(tokens, 1),
    }


def headline(task: str, metrics: dict) -> float:
    """The single number used for model selection: accuracy or entity F1."""
    return metrics["accuracy"] if task == "classification" else metrics["f1"]
