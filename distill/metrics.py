"""Evaluation metrics: classification (with per-level scores for hierarchical labels) and tagging, and
the metric that picks a run's best epoch.

Tagging is scored by its tag scheme (`distill.labels.detect_tag_scheme`): entity tags (IOB1, IOB2,
IOBES, BILOU) by entity precision/recall/F1 (seqeval) and token accuracy; plain tags such as POS,
whose "entities" would mean nothing, by token accuracy and macro/micro P/R/F1 over tags.
scikit-learn and seqeval load when a metric is computed, not when the package is imported.
"""

from __future__ import annotations

from typing import Sequence

from distill.errors import DistillError
from distill.labels import LabelHierarchy, scheme_of_labels, split_tag

AVERAGED = tuple(f"{average}_{measure}" for average in ("macro", "micro") for measure in ("precision", "recall", "f1"))
# The top-level scores each kind of labels gets: what --select-metric may name.
METRICS = {"classification": ("accuracy", *AVERAGED),
           "entities": ("f1", "precision", "recall", "token_accuracy"),
           "plain": ("token_accuracy", *AVERAGED)}
SELECTABLE = tuple(dict.fromkeys(name for names in METRICS.values() for name in names))


def _scores(gold: Sequence[str], pred: Sequence[str], accuracy: str = "accuracy") -> dict[str, float]:
    from sklearn.metrics import accuracy_score, precision_recall_fscore_support
    scores = {accuracy: float(accuracy_score(gold, pred))}
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


SEQEVAL_PREFIXES = {"B": "B", "I": "I", "E": "E", "S": "S", "L": "E", "U": "S"}


def _seqeval_tag(tag: str) -> str:
    """A tag as seqeval's conlleval mode reads it: ``O`` and prefixes upper-case, BILOU's L-/U- as IOBES's
    E-/S- (that mode knows O, B, I, E and S; a lower-case or L/U prefix would be an "invalid tag" to it)."""
    prefix, kind = split_tag(tag)
    if prefix is None:
        return "O" if tag == "o" else tag
    return f"{SEQEVAL_PREFIXES[prefix]}-{kind}"


def tagging_metrics(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]], scheme: str | None = None) -> dict:
    """Scores for the tag `scheme` (`LabelHierarchy.tag_scheme`; None: the scheme the gold tags show).

    Entity schemes: entity P/R/F1 in seqeval's default, conlleval-compatible mode (an entity may
    start with I-, so IOB1 and IOB2 read alike and the numbers match the CoNLL literature) and
    token accuracy. Plain tags: token accuracy, macro/micro P/R/F1 over tags and each tag's F1.
    """
    flat_gold = [t for tags in gold for t in tags]
    flat_pred = [t for tags in pred for t in tags]
    if (scheme or scheme_of_labels(set(flat_gold))) == "plain":
        from sklearn.metrics import f1_score
        tags = sorted(set(flat_gold) | set(flat_pred))  # as macro F1 counts them
        per_tag = f1_score(flat_gold, flat_pred, labels=tags, average=None, zero_division=0)
        return {**_scores(flat_gold, flat_pred, "token_accuracy"),
                "per_tag_f1": {tag: float(f1) for tag, f1 in zip(tags, per_tag)}}
    from seqeval.metrics import f1_score, precision_score, recall_score
    gold = [[_seqeval_tag(t) for t in tags] for tags in gold]
    pred = [[_seqeval_tag(t) for t in tags] for tags in pred]
    correct = sum(g == p for g, p in zip(flat_gold, flat_pred))
    return {
        "f1": float(f1_score(gold, pred, zero_division=0)),
        "precision": float(precision_score(gold, pred, zero_division=0)),
        "recall": float(recall_score(gold, pred, zero_division=0)),
        "token_accuracy": correct / max(len(flat_gold), 1),
    }


def task_metrics(task: str, hierarchy: LabelHierarchy, gold: Sequence, predicted: Sequence) -> dict:
    """A model's scores on labelled data: `classification_metrics` or `tagging_metrics` of its labels."""
    if task == "classification":
        return classification_metrics(gold, predicted, hierarchy)
    return tagging_metrics(gold, predicted, hierarchy.tag_scheme)


def class_f1(task: str, scheme: str | None, gold: Sequence, predicted: Sequence) -> dict[str, float]:
    """Each class's F1, over the classes gold or predicted: the labels of classification, the tags of plain
    tags (as `per_tag_f1`), the entity types of entity tags (seqeval's, as entity F1 counts them)."""
    if task == "classification" or (scheme or scheme_of_labels({t for tags in gold for t in tags})) == "plain":
        from sklearn.metrics import f1_score
        if task == "tagging":
            gold, predicted = [t for tags in gold for t in tags], [t for tags in predicted for t in tags]
        classes = sorted(set(gold) | set(predicted))
        return dict(zip(classes, map(float, f1_score(gold, predicted, labels=classes, average=None,
                                                     zero_division=0))))
    from seqeval.metrics.sequence_labeling import get_entities, precision_recall_fscore_support
    gold = [[_seqeval_tag(t) for t in tags] for tags in gold]
    predicted = [[_seqeval_tag(t) for t in tags] for tags in predicted]
    types = sorted({entity[0] for side in (gold, predicted) for entity in get_entities(side)})
    f1 = precision_recall_fscore_support(gold, predicted, average=None, zero_division=0)[2]
    return dict(zip(types, map(float, f1)))


def classes_beaten(student: dict[str, float], teacher: dict[str, float]) -> list[str]:
    """The classes whose F1 (`class_f1`) the student has above the teacher's (a class the teacher never
    met: 0), in the order of `student`."""
    return [name for name, f1 in student.items() if f1 > teacher.get(name, 0.0)]


def metric_kind(task: str, scheme: str | None) -> str:
    """Which set of scores a task and tag scheme get: a key of METRICS."""
    return "classification" if task == "classification" else "plain" if scheme == "plain" else "entities"


def default_metric(task: str, scheme: str | None) -> str:
    """What picks the best epoch unless told otherwise: accuracy for classification, entity F1 for
    entity tags, token accuracy for plain tags (the measure POS tagging is reported in; macro F1
    over ~45 tags swings with the rarest ones on a small dev set)."""
    return METRICS[metric_kind(task, scheme)][0]


def headline(task: str, metrics: dict) -> float:
    """The default metric's value in `metrics`: accuracy, entity F1, or token accuracy for plain tags
    (whose metrics have no entity F1). What `compare` reports."""
    return metrics[default_metric(task, "plain" if task == "tagging" and "f1" not in metrics else None)]


def select_metric(name: str | None, task: str, scheme: str | None) -> str:
    """The metric that picks the best epoch and drives early stopping: `name`, checked against what
    the task and tag scheme produce, or the default for them."""
    if name is None:
        return default_metric(task, scheme)
    kind = metric_kind(task, scheme)
    if name not in METRICS[kind]:
        what = "classification" if kind == "classification" else f"{scheme} tags"
        raise DistillError(f"select metric {name!r} is not scored for {what}: choose one of "
                           f"{', '.join(METRICS[kind])}")
    return name


def megabytes(size: int) -> str:
    """`size` bytes in MB to one decimal that never reads 0.0 for a model that has a size: <0.1."""
    return "<0.1" if 0 < size < 50_000 else f"{size / 1e6:.1f}"


def size_text(size: int) -> str:
    """`size` bytes for a report: kB below 0.1 MB (a small student's 19.7 kB, not 0.0 MB), else MB."""
    return f"{size / 1e3:.1f} kB" if size < 100_000 else f"{megabytes(size)} MB"
