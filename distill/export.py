"""Export a trained model for deployment, and measure what the export changed.

* ONNX (`--format onnx`): the forward pass of any teacher or student as an ONNX graph with dynamic
  batch and length axes (the TorchScript exporter, which writes the students' packed BiLSTMs as
  ONNX LSTM nodes with per-sequence lengths). What surrounds it stays in Python and is shared with
  the PyTorch model (see `distill.models.onnx`): the export directory keeps the model's
  description (config, vocabularies or tokenizer, labels) and a CRF's transitions.
* int8 (`--quantize int8`): ONNX Runtime's dynamic quantization of that graph: int8 weights,
  activations quantized on the fly per batch.
* A slim copy (`--format safetensors`): a teacher without its optimizer state (`distill.models.slim`);
  a student directory is already slim and is copied as it is.

`agreement` compares an exported model with the PyTorch one on labelled data: logits, labels and score.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Iterator, Sequence

import torch

from distill import precision
from distill.data import DataOptions, read_split
from distill.errors import DistillError, import_extra, option
from distill.export_speed import speed_record as measure_speed
from distill.inference import decode_labels, predict_logits
from distill.io import file_sha256, save_tensors
from distill.labels import check_labels_known
from distill.metrics import classification_metrics, default_metric, tagging_metrics
from distill.models import MODEL_CARD, load_model, model_from_card, read_model_card
from distill.models.base import LabelModel
from distill.models.card import EXPORT_FORMATS, EXPORT_QUANTIZATIONS, write_model_card
from distill.models.hub_files import local_folder
from distill.models.kinds import kind_of, require_kind
from distill.models.onnx import CRF_WEIGHTS, EXPORT_EXTRA, ONNX_FILE
from distill.outputs import model_output
from distill.provenance import learnt_record, warn_if_learnt_from

FORMATS, QUANTIZATIONS = EXPORT_FORMATS, EXPORT_QUANTIZATIONS  # the card's record of an export names one of each
OPSET = 17
# Tracing inputs: two examples of different lengths, so padding and per-example lengths are in the graph.
TRACE_EXAMPLES = {"classification": ["a first example to trace , longer than the other", "a second"],
                  "tagging": [["A", "first", "example", "to", "trace", "."], ["Second", "one"]]}
# Dynamic axes of every input (and of the logits) any model kind has.
AXES = {"input_ids": {0: "windows", 1: "tokens"}, "attention_mask": {0: "windows", 1: "tokens"},
        "word_positions": {0: "windows", 1: "words"}, "word_ids": {0: "batch", 1: "words"},
        "lengths": {0: "batch"}, "char_ids": {0: "distinct_words", 1: "chars"},
        "word_rows": {0: "batch", 1: "words"}, "window_weights": {0: "batch", 1: "windows"}}
# What int8 quantizes: the weights of matrix products, attention, LSTMs and convolutions. Not the
# embedding tables (Gather): on 300 RT dev sentences, quantizing the teacher's too changed 9 labels
# against fp32 instead of 3; per-tensor scales instead of per-channel ones changed 16.
INT8_OPS = ("MatMul", "Attention", "LSTM", "Conv")
INT8_ONNXRUNTIME = "1.31"  # 1.30's quantizer stopped at a weight that several Conv nodes share (the ID-CNN's block)
GRID_INPUTS = ("word_slots", "grid_shape")  # the teacher tagger's grid placement stays outside the graph

__all__ = ["FORMATS", "QUANTIZATIONS", "agreement", "copy_description", "export_onnx", "finished_export",
           "quantize_int8", "save_onnx_files", "save_slim_files", "save_transformers_files"]


def onnx_module():
    """The onnx package, or one line naming the `export` extra (`import_extra`); onnxruntime, which checks, times
    and quantizes every export, is asked for at the same time."""
    onnx = import_extra("onnx", "ONNX export", EXPORT_EXTRA)
    import_extra("onnxruntime", "ONNX export", EXPORT_EXTRA)
    return onnx


@contextlib.contextmanager
def native_output_silenced() -> Iterator[None]:
    """Drop what native code writes to the stdout and stderr descriptors meanwhile: the TorchScript exporter
    prints notes on the packed LSTM's shape inference to stderr (ONNX Runtime infers those shapes itself),
    and the whole TorchScript graph to stdout when it fails, which would read as problems or drown the one
    error line. Python errors still propagate as exceptions."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    try:
        with open(os.devnull, "w") as devnull:
            for fd in saved:
                os.dup2(devnull.fileno(), fd)
            yield
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)


def _format(name: str) -> str:
    """An export format as the caller chooses it: ``--format onnx``, or ``format='onnx'``."""
    return option(f"--format {name}", f"format={name!r}")


def export_onnx(model: LabelModel, path: Path, where: str | None = None) -> None:
    """Write `model`'s forward pass (window logits for the teacher tagger) as an ONNX graph. A forward the
    exporter cannot translate (a plugin student's operator) is one error naming the model (`where`, else its
    class) and the exporter's reason."""
    onnx_module()
    inputs, _ = model.prepare(TRACE_EXAMPLES[model.task])
    inputs = {name: tensor.cpu() for name, tensor in inputs.items() if name not in GRID_INPUTS}
    rows = "windows" if "input_ids" in inputs and "window_weights" not in inputs else "batch"
    output_axes = {0: rows, 1: "words"} if model.task == "tagging" else {0: rows}
    model = model.cpu().eval()
    try:
        with warnings.catch_warnings(), torch.no_grad(), native_output_silenced():
            warnings.simplefilter("ignore")  # the legacy exporter's deprecation and shape-inference notes
            torch.onnx.export(model, (), str(path), kwargs=inputs, input_names=list(inputs), output_names=["logits"],
                              dynamic_axes={**{name: AXES[name] for name in inputs}, "logits": output_axes},
                              opset_version=OPSET, dynamo=False)
    except RuntimeError as err:  # torch.onnx's own errors (an unsupported operator) are RuntimeErrors too
        reason = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise DistillError(f"{where or type(model).__name__}: this {model.kind or 'model'} cannot be exported to "
                           f"ONNX ({reason}); export it with {_format('safetensors')} instead") from None


def quantize_int8(source: Path, target: Path) -> None:
    """ONNX Runtime's dynamic int8 quantization: int8 weights with a scale per output channel, activations
    scaled per batch at run time, after its recommended pre-processing (shape inference and graph
    optimisation) into a file beside `source`. Embedding tables stay fp32 (see `INT8_OPS`)."""
    from distill.models.onnx import onnxruntime_module
    onnxruntime = onnxruntime_module()
    onnxruntime.set_default_logger_severity(3)  # its graph optimiser's warnings are noise to a user
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process
    prepared = source.with_name(f"prepared-{source.name}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
        try:
            quantize_dynamic(str(prepared), str(target), weight_type=QuantType.QInt8, per_channel=True,
                             op_types_to_quantize=list(INT8_OPS))
        except (ValueError, KeyError, AssertionError) as err:  # the quantizer's own checks of the graph
            raise DistillError(f"onnxruntime {onnxruntime.__version__} could not quantize this model to int8 "
                               f"({str(err).strip()[:200]}); 1.31 or later quantizes every model of distill: pip "
                               f"install -U 'onnxruntime>={INT8_ONNXRUNTIME}'") from None


def copy_description(model: LabelModel, source_dir: Path, directory: Path) -> list[str]:
    """Write what the weightless model needs besides weights: the teacher's encoder folder (tokenizer,
    architecture, copied), a student's config and vocabularies (as the loaded model holds them, in
    the current format), a transformers classifier's config and tokenizer files. Returns the files' names."""
    from distill.models.teacher import ENCODER_DIR, Teacher
    if isinstance(model, Teacher):
        from distill.models.card import folder_files
        shutil.copytree(source_dir / ENCODER_DIR, directory / ENCODER_DIR)
        return folder_files(directory, ENCODER_DIR)
    return model.write_description(directory)


def save_onnx_files(model: LabelModel, source_dir: Path, directory: Path, quantize: str | None) -> list[str]:
    """The files of an ONNX export directory (the card aside); returns their names."""
    from distill.models.teacher import Teacher
    files = copy_description(model, source_dir, directory)
    if isinstance(model, Teacher):  # its config and labels (a transformers classifier's are in its config.json)
        from distill.models.slim import write_slim_meta
        files.append(write_slim_meta(directory, model.checkpoint()))
    crf = getattr(model, "crf", None)
    if crf is not None:
        save_tensors(directory / CRF_WEIGHTS, crf.state_dict())
        files.append(CRF_WEIGHTS)
    with contextlib.ExitStack() as stack:
        if quantize is None:
            graph = directory / ONNX_FILE
        else:
            fp32 = tempfile.TemporaryDirectory(prefix=".fp32-", suffix=".tmp", dir=directory)  # a killed run's: ours
            graph = Path(stack.enter_context(fp32)) / ONNX_FILE
        export_onnx(model, graph, str(source_dir))
        if quantize == "int8":
            quantize_int8(graph, directory / ONNX_FILE)
    return [*files, ONNX_FILE]


def save_slim_files(model: LabelModel, kind: str, source_dir: Path, directory: Path) -> list[str]:
    """A slim inference copy: a teacher without optimizer state, a student as it is. Returns the files' names."""
    if kind == "student":
        model.write_files(directory)  # it writes its own card; the export's card replaces it
        return list(read_model_card(directory)["sha256"])
    from distill.models.slim import save_slim_checkpoint
    return [*copy_description(model, source_dir, directory), *save_slim_checkpoint(directory, model.checkpoint())]


def transformers_network(model: LabelModel, where: str):
    """The teacher module a transformers export holds: the teacher itself, or a transformer student's (the
    teacher's code with fewer layers). A word student never comes here: the teacher-kind table refuses it."""
    from distill.models.teacher import Teacher
    network = model if isinstance(model, Teacher) else model.network
    if not network.exports_to_transformers:
        raise DistillError(f"{where}: a {type(network).__name__} normalises its features before its head, which no "
                           f"stock transformers classifier does; export it with {_format('onnx')} or "
                           f"{_format('safetensors')}")
    return network


def save_transformers_files(network, directory: Path, where: str) -> list[str]:
    """A transformers model (`distill.hf_model.stock_transformers`) and its tokenizer, as their
    `save_pretrained` writes them, with the model class's file where it is distill's own; returns the
    files' names (hidden files in the folder are no model's: `distill.outputs` marks an output being written
    so, and --overwrite keeps a model repository's .gitattributes)."""
    from distill.hf_model import needs_remote_code, stock_transformers
    from distill.models import modeling_distill
    from transformers.utils import logging as transformers_logging
    model, tokenizer = stock_transformers(network, where)
    if needs_remote_code(model):
        shutil.copyfile(modeling_distill.__file__, directory / modeling_distill.MODULE_FILE)
    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.save_pretrained(directory)
            tokenizer.save_pretrained(directory)
    finally:
        transformers_logging.set_verbosity(verbosity)
    return sorted(path.name for path in directory.iterdir()  # not hidden ones: a repository's .gitattributes, ours
                  if path.is_file() and path.name != MODEL_CARD and not path.name.startswith("."))


def export_transformers(model: LabelModel, card: dict, source: Path, directory: Path, exported: dict) -> list[str]:
    """The files of a transformers export; a multi-task teacher's heads each in a folder of their own
    (``DIR/HEAD``, a transformers model and a card each), all of them listed in the top card."""
    from distill.models.multitask import MultiTaskTeacher
    if not isinstance(model, MultiTaskTeacher):
        return save_transformers_files(transformers_network(model, str(source)), directory, str(source))
    files = []
    for name in model.names:
        head = model.head(name)
        folder = directory / name
        folder.mkdir()
        head_files = save_transformers_files(head, folder, f"{source} head {name}")
        head_card = {**exported, "kind": "teacher", "model": type(head).__name__, "task": head.task,
                     "labels": head.hierarchy.labels, "head": name}
        head_card.pop("heads", None)
        write_model_card(folder, head_card, head_files, {"parameters": head.parameter_count(),
                                                         "base_model": head.config.encoder})
        files += [f"{name}/{file}" for file in [*read_model_card(folder)["sha256"], MODEL_CARD]]
    return files


def agreement(reference: LabelModel, exported, examples: Sequence, gold: Sequence, batch_size: int = 64) -> dict:
    """How far `exported` is from `reference` on labelled examples: the largest logit difference,
    the share of labels (words, for tagging) that stay the same, and each model's score in the metric
    `evaluate` and `compare` report (token accuracy for plain tags, which have no entity F1)."""
    ours, theirs = predict_logits(reference, examples, batch_size), predict_logits(exported, examples, batch_size)
    reference_labels, labels = decode_labels(reference, ours), decode_labels(exported, theirs)
    classification = reference.task == "classification"
    scheme = None if classification else reference.hierarchy.tag_scheme
    metric = default_metric(reference.task, scheme)
    if classification:
        pairs = list(zip(reference_labels, labels))
        reference_score, score = (classification_metrics(gold, each)[metric] for each in (reference_labels, labels))
    else:
        pairs = [(a, b) for ref, exp in zip(reference_labels, labels) for a, b in zip(ref, exp)]
        reference_score, score = (tagging_metrics(gold, each, scheme)[metric] for each in (reference_labels, labels))
    same = sum(a == b for a, b in pairs)
    return {"examples": len(examples), "max_abs_logit_diff": float((ours.logits - theirs.logits).abs().max()),
            "labels_compared": len(pairs), "labels_changed": len(pairs) - same, "identical_labels": same / len(pairs),
            "metric": metric, "reference_score": reference_score, "score": score,
            "points_lost": 100 * (reference_score - score)}


def about_export(model: LabelModel, source: Path) -> dict:
    """What the export's README card says beyond its card: the source model's base model, and what its run
    read and scored (its ``train_summary.json``)."""
    from distill.models.readme import about_run
    from distill.outputs import read_summary
    about = model.card_about()
    summary = read_summary(source)
    if summary is not None:
        about.update(about_run(summary))
    return about


def export_settings(format: str, quantize: str | None) -> dict:
    """What the card records about how the export was made (versions included: they change the graph)."""
    settings = {"format": format, "quantize": quantize, "torch": torch.__version__}
    if format == "onnx":
        import onnx
        import onnxruntime
        settings.update(opset=OPSET, onnx=onnx.__version__, onnxruntime=onnxruntime.__version__)
    return settings


def _where(model_dir: str | os.PathLike) -> str:
    """The source as the card records it: a local folder by its absolute path, so an export used from another
    working directory still finds it (the online teacher, a transformer student's layers); hub:NAME as given."""
    return str(model_dir) if str(model_dir).startswith("hub:") else os.path.abspath(model_dir)


def finished_export(directory: str | os.PathLike, model_dir: str | os.PathLike, format: str = "onnx",
                    quantize: str | None = None, check_data: str | None = None) -> bool:
    """Whether `directory` holds a whole export (every file as its card records it) of `model_dir` as that model is
    now (`made_from`), in `format` and `quantize`, checked on `check_data` (None: unchecked): one a script rerun to
    resume may keep. A card alone said so, and a benchmark reported a retrained model, or another one at that
    path, by its predecessor's export."""
    from distill.models.card import verify_model_files
    from distill.models.onnx import made_from
    directory = Path(directory)
    if not (directory / MODEL_CARD).is_file():
        return False
    try:
        card = read_model_card(directory)
        verify_model_files(directory, card)
    except DistillError:
        return False
    export, agreed = card.get("export") or {}, card.get("agreement") or {}
    checked_on = agreed.get("data")
    same_data = checked_on is None if check_data is None else \
        checked_on is not None and os.path.abspath(checked_on) == os.path.abspath(check_data)
    return card.get("format") == format and export.get("quantize") == quantize and same_data \
        and made_from(export, model_dir)


def export_model(model_dir: str, output: str, format: str = "onnx", quantize: str | None = None,
                 check_data: str | None = None, data: DataOptions = DataOptions(), overwrite: bool = False,
                 batch_size: int = 64) -> dict:
    """Export `model_dir` to `output` and return the export's model card.

    With `check_data` (labelled, held back from training) the card records how the export agrees
    with the PyTorch model there: largest logit difference, labels changed, score lost. int8 needs
    it: quantization is lossy, and its cost should be measured, not assumed. An ONNX export's card
    then records its speed against the PyTorch model's on this machine too (``speed``:
    `distill.export_speed.speed_record`), by which `pseudo_label(..., use_export=...)` chooses.
    """
    if format not in FORMATS:
        raise DistillError(f"unknown export format {format!r}: choose one of {', '.join(FORMATS)}")
    quantized = option(f"--quantize {quantize}", f"quantize={quantize!r}")
    if quantize is not None and (quantize not in QUANTIZATIONS or format != "onnx"):
        raise DistillError(f"{quantized}: only int8, and only with {_format('onnx')}")
    if quantize is not None and check_data is None:
        raise DistillError(f"{quantized} needs {option('--check-data', 'check_data')}: held-back labelled data on "
                           "which the int8 model's labels and score are compared with the fp32 model's")
    if format == "onnx":
        onnx_module()  # before anything is read or written
    card = require_kind(model_dir, f"export {format}")  # the teacher-kind table says what exports
    if check_data is not None:
        require_kind(model_dir, "export check-data")
    carded = (Path(model_dir) / MODEL_CARD).is_file()  # else a transformers classifier's folder, or hub:NAME
    source = Path(model_dir) if carded else local_folder(model_dir)
    with model_output(output, [model_dir, check_data], overwrite) as directory:
        model = load_model(model_dir, device="cpu")
        if check_data is not None:
            examples, gold = read_split(check_data, model.task, data)
            check_labels_known(check_data, model.hierarchy, model.task, gold)
            learnt_from = warn_if_learnt_from(model_dir, check_data, examples)
        description = {key: card[key] for key in ("kind", "model", "class", "task", "labels", "heads") if key in card}
        if kind_of(card).name == "transformers":  # rebuilt from its config and tokenizer (`weightless_model`)
            description.update(model="transformers", labels=model.hierarchy.labels)
        recorded = {"source_card_sha256": file_sha256(source / MODEL_CARD)} if carded else \
            {"source_card_sha256": None, "source_fingerprint": model.fingerprint()}
        exported = {**description, "format": format,
                    "export": {"source": _where(model_dir), **recorded,
                               "parameters": model.parameter_count(), **export_settings(format, quantize),
                               **({"learnt_from": record} if (record := learnt_record(model_dir)) else {})},
                    "agreement": None}
        if format == "onnx":
            files = save_onnx_files(model, source, directory, quantize)
        elif format == "transformers":
            files = export_transformers(model, card, source, directory, exported)
        else:
            files = save_slim_files(model, card["kind"], source, directory)
        if format == "onnx":
            exported["speed"] = None
        if check_data is not None:
            loaded = model_from_card(directory, exported)
            exported["agreement"] = {"data": check_data, **({"learnt_from": learnt_from} if learnt_from else {}),
                                     "reference": f"pytorch {precision.current()}",
                                     **agreement(model, loaded, examples, gold, batch_size)}
            if format == "onnx":  # which teacher a bulk pass should run on this machine (distill.export_speed)
                exported["speed"] = measure_speed(model, loaded, examples)
        write_model_card(directory, exported, files, about_export(model, source))  # last: a card means complete
        return {**exported, "sha256": read_model_card(directory)["sha256"]}
