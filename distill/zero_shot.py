"""`nlp-train teacher --zero-shot`: a teacher folder from label names and descriptions, with no training data.

The label descriptions (``--labels "negative=a negative review,positive=a positive review|a rave"``) are
embedded by a sentence encoder and each text is classified by its cosine similarity to them over a
temperature (`distill.models.zero_shot`). Labelled dev data, where given, fits the temperature (the NLL of
its gold labels, minimised) and is scored; nothing else is learnt. The folder is a teacher like any other:
kd, pseudo-label, evaluate, compare, predict, the logit cache, ensembles and export take it.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch

from distill.data import DataOptions, labelled_examples
from distill.encoders import load_encoder
from distill.errors import DistillError, option, require_number
from distill.label_names import LabelNames, parse_labels
from distill.labels import LabelHierarchy, check_labels_known
from distill.metrics import task_metrics
from distill.models.base import pick_device
from distill.models.zero_shot import (DEFAULT_TEMPERATURE, TEMPERATURE_RANGE, ZeroShotConfig, ZeroShotTeacher,
                                      fit_temperature)
from distill.trainers import Output, Runtime, TrainResult, _check_arguments
from distill.settings import named
from distill.training import runtime
from distill.truncation import warn_if_truncated


def zero_shot_teacher(labels: str | LabelNames | list[str], encoder: str = "minilm-l6", dev: Any = None,
                      temperature: float | None = None, max_length: int = 128, pooling: str = "mean",
                      long_inputs: str = "truncate", window_overlap: int = 32, max_windows: int = 8,
                      batch_size: int = 64, data: DataOptions = DataOptions(), output: Output = Output(),
                      env: Runtime = Runtime()) -> TrainResult:
    """A zero-shot teacher from `labels` (``"negative=a negative review,positive=..."``, a `LabelNames`, or a
    list of such items) and the sentence `encoder`, its token states mean-pooled as sentence-transformers pools
    them (`pooling`: the teacher's choices): logits = cosine similarity / temperature. The temperature
    is `temperature` when given, else fitted on labelled `dev` (its NLL minimised) when given, else
    `DEFAULT_TEMPERATURE`; dev is then scored as a trained teacher's dev set is. With `output.directory` the
    teacher folder is written there (`Output`'s rules; there is nothing to resume)."""
    _check_arguments(data=data, output=output, env=env)
    names = labels if isinstance(labels, LabelNames) else parse_labels(labels)
    require_number("temperature", temperature, *TEMPERATURE_RANGE, optional=True)
    if temperature is not None and dev is not None:
        raise DistillError(f"{option('--temperature', 'temperature')} fixes the temperature that "
                           f"{option('--dev', 'dev')} would fit: give one of them")
    if output.resume:
        raise DistillError(f"a zero-shot teacher trains nothing, so there is no run to resume: drop "
                           f"{named(Output, 'resume', 'resume=True')}")
    config = ZeroShotConfig(encoder=encoder, max_length=max_length, pooling=pooling, long_inputs=long_inputs,
                            window_overlap=window_overlap, max_windows=max_windows,
                            descriptions={name: list(texts) for name, texts in zip(names.names, names.descriptions)},
                            temperature=temperature or DEFAULT_TEMPERATURE,
                            temperature_from="given" if temperature is not None else "dev" if dev is not None
                            else "default")
    hierarchy = LabelHierarchy(list(names.names), None)
    dev_set = None
    if dev is not None:
        dev_set = labelled_examples(dev, "classification", data, "dev")
        names.require_named(dev_set.where, dev_set.labels, option("--labels", "labels"))  # not "seen in training"
        check_labels_known(dev_set.where, hierarchy, "classification", dev_set.labels)
    started = time.perf_counter()
    with runtime(env.precision, env.threads, env.progress):
        model = _built(config, hierarchy, batch_size).to(pick_device(env.device))
        summary: dict = {"kind": "teacher", "model": "zero-shot", "labels": hierarchy.labels,
                         "descriptions": config.descriptions, "encoder": encoder}
        if dev_set is not None:
            warn_if_truncated(model, dev_set.inputs, dev_set.where)
            label_embeddings = model.classifier.weight.detach().float() * model.config.temperature  # rows: e / T
            similarities = model.embed(dev_set.inputs, batch_size) @ label_embeddings.T
            gold = torch.tensor([hierarchy.index[label] for label in dev_set.labels])
            fitted = fit_temperature(similarities.cpu(), gold, dev_set.where)
            model.config.temperature = fitted
            model.set_labels(label_embeddings, fitted)
            predicted = [hierarchy.labels[index] for index in similarities.argmax(-1).tolist()]  # as its logits rank
            summary["best"] = {"epoch": 0, "dev": task_metrics("classification", hierarchy, dev_set.labels,
                                                              predicted)}
        summary.update(temperature=model.config.temperature, temperature_from=model.config.temperature_from,
                       parameters=model.parameter_count(), seconds=round(time.perf_counter() - started, 2))
        if output.directory is not None:
            _write(model, output, dev, summary)
    return TrainResult(model, summary)


@torch.no_grad()
def _built(config: ZeroShotConfig, hierarchy: LabelHierarchy, batch_size: int) -> ZeroShotTeacher:
    """The teacher with its head set: each label's descriptions embedded, averaged and normalised."""
    encoder, tokenizer = load_encoder(config.encoder)
    from distill.models.teacher import check_reading
    check_reading(config, encoder, tokenizer)
    model = ZeroShotTeacher(config, hierarchy, encoder, tokenizer)
    model.eval()
    rows = []
    for name in hierarchy.labels:
        mean = model.embed(config.descriptions[name], batch_size).mean(0)
        rows.append(torch.nn.functional.normalize(mean, dim=0))
    _refuse_alike(config, hierarchy, torch.stack(rows))
    model.set_labels(torch.stack(rows), config.temperature)
    return model


def _refuse_alike(config: ZeroShotConfig, hierarchy: LabelHierarchy, rows: torch.Tensor) -> None:
    """Two labels of one embedding (`rows`: each label's, normalised) would score alike for every text: words
    `LabelNames` tells apart that the encoder's tokenizer does not ('café' and 'cafe' once accents are stripped,
    'Film' and 'film' once lower-cased) are refused in one line, before a teacher is written."""
    same = (rows @ rows.T).triu(1) > 1 - 1e-6
    if same.any():
        first, second = (hierarchy.labels[int(i)] for i in same.nonzero()[0])
        raise DistillError(f"{option('--labels', 'labels')}: the encoder {config.encoder} reads the descriptions of "
                           f"{first} and {second} alike (its tokenizer makes them the same sub-tokens), so they would "
                           "score alike for every text: give each label words of its own")


def _write(model: ZeroShotTeacher, output: Output, dev: Any, summary: dict) -> None:
    """The teacher folder, under `nlp-train`'s output rules (never over an input, a model only with
    `overwrite`), with its run config and summary beside the model's files."""
    from distill.config import RUN_CONFIG, write_run_config
    from distill.io import write_json
    from distill.models.card import rewrite_readme
    from distill.models.readme import about_run
    from distill.outputs import SUMMARY_FILE, model_output
    inputs = [dev if isinstance(dev, (str, os.PathLike)) else None,
              model.config.encoder if os.path.isdir(model.config.encoder) else None]
    with model_output(output.directory, inputs, output.overwrite) as directory:
        if output.config is not None:
            write_run_config(directory / RUN_CONFIG, output.config, "teacher")
        model.write_model(directory)
        summary["sources"] = {"dev": str(dev)} if isinstance(dev, (str, os.PathLike)) else {}
        rewrite_readme(directory, {**model.card_about(), **about_run(summary)})
        write_json(directory / SUMMARY_FILE, summary)
