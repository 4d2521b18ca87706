"""Batched inference shared by evaluation, prediction, pseudo-labelling and the teacher cache.

Every model (teacher or student) offers ``prepare(examples) -> (inputs, mask)``,
``forward(**inputs) -> logits`` and ``decode(logits, mask) -> label indices``; this module
only batches by length, runs the model without gradients and puts results back in input order;
under a launcher, evaluation and the teacher cache split the examples across ranks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

import torch

from distill import distributed
from distill.crf import ConditionalRandomField
from distill.data import TASKS, DataOptions, checked_examples, is_table, labelled_examples, unlabeled_examples
from distill.errors import DistillError, require_whole
from distill.io import tensors_sha256
from distill.labels import check_labels_known
from distill.metrics import task_metrics
from distill.progress import progress_bar


def example_positions(indices: Sequence[int], count: int, where: str) -> torch.Tensor:
    """`indices` as positions in a list of `count` examples (`where` says which list), or one `DistillError`: a
    loop of one's own (transformers' `Trainer`, docs/trainer.md) passes them by hand, and one past the end is
    torch's IndexError, a negative one another example, silently."""
    positions = torch.as_tensor(list(indices)) if len(indices) else torch.zeros(0, dtype=torch.long)
    if positions.is_floating_point() or positions.dtype == torch.bool or positions.dim() != 1:
        raise DistillError(f"examples are looked up by their positions (a list of whole numbers), got "
                           f"{list(indices)!r:.80}")
    if len(positions) and (positions.min() < 0 or positions.max() >= count):
        wrong = int(positions.min() if positions.min() < 0 else positions.max())
        raise DistillError(f"position {wrong} is none of the {count:,} examples {where}: give positions from 0 "
                           "in that list")
    return positions


@dataclass
class ExampleLogits:
    """Logits for a list of examples, in input order.

    Classification: ``logits`` is (examples, labels). Tagging: ``logits`` is (words, labels)
    over all words of all examples, ``offsets`` marks where each example starts, and ``scored``
    says which words the model could score (a word with no sub-token is not scored).
    """

    logits: torch.Tensor
    offsets: torch.Tensor | None = None
    scored: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.logits) if self.offsets is None else len(self.offsets) - 1

    def example(self, index: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.offsets is None:
            return self.logits[index], None
        start, end = int(self.offsets[index]), int(self.offsets[index + 1])
        return self.logits[start:end], self.scored[start:end]

    def batch(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Padded (batch, words, labels) logits and (batch, words) scored mask for `indices`, positions in the
        examples the logits were computed for (a loop of one's own, e.g. transformers' `Trainer`, passes them
        by hand: one past the end, or a negative one, which would give another example's logits, is refused)."""
        positions = example_positions(indices, len(self), "the logits were computed for")
        if self.offsets is None:
            return self.logits[positions], None
        return padded_words([self.example(int(i)) for i in positions])

    @property
    def digest(self) -> str:
        """A checksum of the logits (and a tagger's offsets and scored words), which a resumed run compares."""
        parts = {"logits": self.logits.float(), "offsets": self.offsets, "scored": self.scored}
        return tensors_sha256({name: value for name, value in parts.items() if value is not None})

    def to_dict(self) -> dict[str, torch.Tensor]:
        tensors = {"logits": self.logits}
        if self.offsets is not None:
            tensors.update(offsets=self.offsets, scored=self.scored)
        return tensors

    @classmethod
    def from_dict(cls, tensors: dict[str, torch.Tensor]) -> "ExampleLogits":
        return cls(tensors["logits"], tensors.get("offsets"), tensors.get("scored"))

    @classmethod
    def from_examples(cls, per_example: Sequence[tuple[torch.Tensor, torch.Tensor | None]]) -> "ExampleLogits":
        """Pack (logits, scored) pairs, one per example in input order."""
        if not per_example or per_example[0][1] is None:
            return cls(torch.stack([p[0] for p in per_example]))
        lengths = torch.tensor([0] + [len(p[0]) for p in per_example])
        return cls(torch.cat([p[0] for p in per_example]), torch.cumsum(lengths, 0),
                   torch.cat([p[1] for p in per_example]))


def padded_words(rows: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Taggers' per-example (words, labels) logits and (words,) scored masks as one padded (batch, words, labels)
    tensor and (batch, words) mask, padding not scored."""
    width = max(len(values) for values, _ in rows)
    first = rows[0][0]
    logits = first.new_zeros((len(rows), width, first.size(-1)))
    scored = torch.zeros((len(rows), width), dtype=torch.bool)
    for row, (values, mask) in enumerate(rows):
        logits[row, : len(values)] = values
        scored[row, : len(values)] = mask
    return logits, scored


def example_length(example) -> int:
    return len(example) if isinstance(example, (list, tuple)) else len(example.split())


def length_sorted_batches(examples: Sequence, batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar length, so little compute goes to padding. Every scoring path
    batches here, so a `batch_size` of 0, -1 or 1.5 is refused here by name, not by `range` or slicing."""
    require_whole("batch_size", batch_size)
    order = sorted(range(len(examples)), key=lambda i: example_length(examples[i]))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def example_row(logits: torch.Tensor, mask: torch.Tensor | None, row: int, example
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One example's (logits, scored words) of a batch: a row of labels, or of its words for tagging."""
    if logits.dim() == 2:
        return logits[row], None
    length = example_length(example)
    return logits[row, :length], mask[row, :length]


@torch.inference_mode()
def score_examples(model: torch.nn.Module, examples: Sequence, batch_size: int = 64, progress: bool = False,
                   description: str = "predict") -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """(logits, scored words) per example (a model with several heads: by head name), in input order,
    from length-sorted batches (each one `batch_logits`, the model's own).

    What a call costs beyond the model is kept small, since `predict` of one text comes here: the modes
    are switched only for a model in training mode, and a bar is made only when one is shown."""
    was_training = model.training
    if was_training:
        model.eval()
    per_example: list = [None] * len(examples)
    bar = progress_bar(total=len(examples), desc=description, unit="ex", leave=False) if progress else None
    for indices in length_sorted_batches(examples, batch_size):
        outputs, mask = model.batch_logits([examples[i] for i in indices])
        # a multi-task teacher gives every head's logits by name: each example gets them by name too
        heads = {name: logits.float().cpu() for name, logits in
                 (outputs.items() if isinstance(outputs, dict) else [(None, outputs)])}
        mask = None if mask is None else mask.cpu()
        for row, index in enumerate(indices):
            rows = {name: example_row(logits, mask, row, examples[index]) for name, logits in heads.items()}
            per_example[index] = rows if isinstance(outputs, dict) else rows[None]
        if bar is not None:
            bar.update(len(indices))
    if bar is not None:
        bar.close()
    if was_training:
        model.train()
    return per_example


def readable_examples(model: torch.nn.Module, examples: Sequence, data: DataOptions = DataOptions()) -> list:
    """`examples` as a list `model` can read, checked as in-memory training data is
    (`distill.data.checked_examples`): a number fails deep in a tokenizer, and an empty token list
    in a teacher's reshape. A table (`datasets.Dataset`, DataFrame, list of dicts) gives the column `data`
    names, as `fit` reads it. A string alone would be read as one example per character, and a mapping
    (a `datasets` slice or row: a dict of columns) as its column names: both refused."""
    if isinstance(examples, (str, bytes)):
        raise DistillError("give a list of examples, not one string: predict([text]) for a single one")
    if isinstance(examples, Mapping):
        raise DistillError(f"give a list of examples, not a mapping of {', '.join(map(str, examples))[:80]} (a "
                           "dataset slice or row is a dict of columns): pass one column, e.g. dataset['text']")
    task = getattr(model, "task", None)
    if is_table(examples) and task in TASKS:
        return unlabeled_examples(examples, task, data, "examples").inputs
    examples = list(examples)
    if not examples or task not in TASKS:  # no examples: nothing to predict; a model of several heads: theirs
        return examples
    return checked_examples("examples", task, examples)


def examples_to_score(model: torch.nn.Module, examples: Sequence) -> list:
    """`readable_examples`, at least one: every way into a teacher's logits (`predict_logits`, the logit cache's
    `teacher_logits`) reads what it is given alike."""
    examples = readable_examples(model, examples)
    if not examples:
        raise DistillError("no examples to score")
    return examples


def one_head(model: torch.nn.Module) -> None:
    """Refuse a multi-task teacher where one head's logits or labels are meant, naming the way to a head."""
    if getattr(model, "kind", None) == "multitask-teacher":
        raise DistillError(f"a multi-task teacher has a head per task: score one with model.head(NAME) (its heads: "
                           f"{', '.join(model.names)}), or predict with every head through model.predict")


def predict_logits(model: torch.nn.Module, examples: Sequence, batch_size: int = 64,
                   progress: bool = False, description: str = "predict") -> ExampleLogits:
    """Run `model` over `examples` in this process; results come back in input order."""
    require_whole("batch_size", batch_size)  # before the examples are read and checked
    one_head(model)
    examples = examples_to_score(model, examples)
    if hasattr(model, "announce"):  # a served teacher: its requests said before they are sent
        model.announce(*model.cost(examples))
    return ExampleLogits.from_examples(score_examples(model, examples, batch_size, progress, description))


def predict_logits_across_ranks(model: torch.nn.Module, examples: Sequence, batch_size: int = 64,
                                progress: bool = False, description: str = "predict") -> ExampleLogits:
    """Like `predict_logits`, but under a launcher each rank scores its shard and every rank gets
    the whole result; a single process simply scores everything."""
    if distributed.world_size() == 1:
        return predict_logits(model, examples, batch_size, progress, description)
    mine = score_examples(model, distributed.shard(examples), batch_size, progress and distributed.is_main(),
                          description)
    return ExampleLogits.from_examples(distributed.unshard(distributed.all_gather_objects(mine)))


def decode_indices(model: torch.nn.Module, results: ExampleLogits) -> list:
    """Label indices per example (classification) or per word (tagging), as `model.decode` gives them."""
    if results.offsets is None:
        return model.decode(results.logits, None)
    paths = []
    for index in range(len(results)):
        logits, scored = results.example(index)
        paths.append(model.decode(logits.unsqueeze(0), scored.unsqueeze(0))[0])
    return paths


def decode_labels(model: torch.nn.Module, results: ExampleLogits) -> list:
    """Label strings per example (classification) or per word (tagging)."""
    return index_labels(model, decode_indices(model, results), results.offsets is None)


def index_labels(model: torch.nn.Module, decoded: list, classification: bool) -> list:
    """`decode_indices`' output as label strings."""
    labels = model.hierarchy.labels
    if classification:
        return [labels[i] for i in decoded]
    return [[labels[i] for i in path] for path in decoded]


def model_crf(model: torch.nn.Module) -> ConditionalRandomField | None:
    """The CRF a tagger decodes with (an exported ONNX model: its source model's), or None."""
    for owner in (model, getattr(model, "source", None)):
        crf = getattr(owner, "crf", None)
        if isinstance(crf, ConditionalRandomField):
            return crf
    return None


def crf_path_confidences(crf: ConditionalRandomField, results: ExampleLogits, paths: list,
                         batch_size: int = 64) -> list[torch.Tensor]:
    """Per example, each word's CRF marginal probability p(tag_t = path_t | sentence) of the tag on
    its decoded `paths` (0 for a word past the path, which the CRF does not score), batched by length."""
    device = crf.transitions.device
    order = sorted(range(len(results)), key=lambda i: int(results.offsets[i + 1] - results.offsets[i]))
    confidences: list = [None] * len(results)
    for start in range(0, len(order), batch_size):
        indices = order[start:start + batch_size]
        logits, scored = results.batch(indices)
        marginals = crf.marginals(logits.to(device), scored.to(device)).cpu()
        for row, index in enumerate(indices):
            words, path = int(results.offsets[index + 1] - results.offsets[index]), paths[index]
            confidence = marginals.new_zeros(words)
            if path:
                confidence[:len(path)] = marginals[row, :len(path)].gather(1, torch.tensor(path).unsqueeze(1))[:, 0]
            confidences[index] = confidence
    return confidences


def evaluate(model: torch.nn.Module, examples: Any, gold: Sequence | None = None, batch_size: int = 64,
             progress: bool = False, data: DataOptions = DataOptions()) -> dict:
    """Metrics of `model` on labelled examples: the examples and their `gold` labels (label strings, or
    tag-string lists; any iterable, a generator is read once, here), or without `gold` labelled data as
    `fit` takes it (a file, a table with the columns `data` names, an (examples, labels) pair)."""
    require_whole("batch_size", batch_size)  # before the gold labels are read and checked
    one_head(model)
    if gold is None:  # read flat, as a file to score is (no hierarchy is built)
        labelled = labelled_examples(examples, model.task, replace(data, separator=None), "data")
        examples, gold = labelled.inputs, labelled.labels
    examples = readable_examples(model, examples, data)
    if isinstance(gold, Mapping):
        raise DistillError("give the gold labels as a list, not a mapping (a dataset slice is a dict of columns): "
                           "pass one column, e.g. dataset['label']")
    gold = gold if isinstance(gold, (str, bytes)) else list(gold)
    if isinstance(gold, (str, bytes)) or len(examples) != len(gold):
        raise DistillError(f"{len(examples)} examples but {1 if isinstance(gold, (str, bytes)) else len(gold)} "
                           "gold labels")
    if examples:  # read as training labels are: 1 is the label "1", None or a list is refused; flat, as a file
        # read to score is (no hierarchy is built: a label the model lacks, 'a/' too, is named as unseen below)
        gold = labelled_examples((examples, gold), model.task, DataOptions(separator=None),
                                 name="the gold labels").labels
    check_labels_known("the gold labels", model.hierarchy, model.task, gold)  # else scored as plain misses
    predicted = decode_labels(model, predict_logits_across_ranks(model, examples, batch_size, progress, "evaluate"))
    return task_metrics(model.task, model.hierarchy, gold, predicted)


def rounded(record: dict) -> dict:
    """A prediction record's confidences to 6 decimals, as written: a threshold compares the exact ones first."""
    shown = {**record, "confidence": round(record["confidence"], 6)}
    if "confidences" in record:
        shown["confidences"] = [None if c is None else round(c, 6) for c in record["confidences"]]
    if "heads" in record:  # a multi-task teacher's record: each head's own
        shown["heads"] = {name: rounded(head) for name, head in record["heads"].items()}
    return shown


def prediction_records(model: torch.nn.Module, examples: list, batch_size: int = 64, progress: bool = False,
                       with_logits: bool = False, results: ExampleLogits | None = None,
                       exact: bool = False) -> Iterable[dict]:
    """One JSON-able record per example: label(s) as the model decodes them, confidence and optionally
    logits (from `results` when the model's logits for `examples` are at hand). A word's confidence is
    its largest softmax probability, or for a CRF tagger the CRF's marginal probability of its output
    tag; a tagging record's `confidence` is the lowest over its scored words. Confidences are rounded
    to 6 decimals (`rounded`) unless `exact`: a filter on them must compare the unrounded values."""
    require_whole("batch_size", batch_size)  # a CRF tagger's confidences are batched too
    if results is None:  # else `examples` only label the records (a multi-task teacher's heads share them)
        one_head(model)
        examples = readable_examples(model, examples)
        if not examples:
            return
        results = predict_logits(model, examples, batch_size, progress)
    decoded = decode_indices(model, results)
    labels = index_labels(model, decoded, results.offsets is None)
    # a CRF tagger outputs its Viterbi path: a word's confidence is the CRF's marginal of its tag there
    crf = model_crf(model) if results.offsets is not None else None
    crf_confidences = crf_path_confidences(crf, results, decoded, batch_size) if crf is not None else None
    for index, example in enumerate(examples):
        logits, scored = results.example(index)
        probs = torch.sigmoid(logits) if logits.size(-1) == 1 else torch.softmax(logits, -1)
        if model.task == "classification":
            confidence = float(probs.max()) if logits.size(-1) > 1 else float(torch.maximum(probs, 1 - probs))
            record = {"text": example, "label": labels[index], "confidence": confidence}
        else:
            word_conf = probs.max(-1).values if crf_confidences is None else crf_confidences[index]
            record = {"tokens": list(example), "tags": labels[index],
                      # a word the teacher read no sub-token of has no score: null, not the uniform 1/labels
                      "confidences": [float(c) if seen else None for c, seen in zip(word_conf, scored)],
                      "confidence": float(word_conf[scored].min()) if scored.any() else 0.0}
        if with_logits:
            record["logits"] = [round(v, 5) for v in logits.tolist()] if logits.dim() == 1 else \
                [[round(v, 5) for v in row] for row in logits.tolist()]
        yield record if exact else rounded(record)


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of the weights a deployment needs (a teacher checkpoint also holds optimizer state)."""
    if hasattr(model, "weight_bytes"):  # an exported ONNX model: its file
        return model.weight_bytes()
    return sum(t.numel() * t.element_size() for t in model.state_dict().values())


def throughput(model: torch.nn.Module, examples: list, batch_size: int, repeats: int = 1) -> float:
    """Examples per second of inference at `batch_size` over `examples` (after one warm-up batch)."""
    predict_logits(model, examples[:batch_size], batch_size)
    started = time.perf_counter()
    for _ in range(repeats):
        predict_logits(model, examples, batch_size)
    return len(examples) * repeats / (time.perf_counter() - started)
