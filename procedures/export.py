"""Export a model directory for deployment (`nlp-train export`): ONNX, int8 ONNX or a slim copy,
checked against the PyTorch model on held-back labelled data when the user names some."""

from __future__ import annotations

from pathlib import Path

import torch

from distill import precision
from distill.errors import DistillError
from distill.export import FORMATS, QUANTIZATIONS, agreement, save_onnx_files, save_slim_files
from distill.io import file_sha256
from distill.models import MODEL_CARD, load_model, model_from_card, read_model_card
from distill.models.card import write_model_card
from distill.outputs import model_output
from procedures.common import DataOptions, check_labels_known, read_split


def export_settings(format: str, quantize: str | None) -> dict:
    """What the card records about how the export was made (versions included: they change the graph)."""
    settings = {"format": format, "quantize": quantize, "torch": torch.__version__}
    if format == "onnx":
        import onnx
        import onnxruntime
        from distill.export import OPSET
        settings.update(opset=OPSET, onnx=onnx.__version__, onnxruntime=onnxruntime.__version__)
    return settings


def export_model(model_dir: str, output: str, format: str = "onnx", quantize: str | None = None,
                 check_data: str | None = None, data: DataOptions = DataOptions(), overwrite: bool = False,
                 batch_size: int = 64) -> dict:
    """Export `model_dir` to `output` and return the export's model card.

    With `check_data` (labelled, held back from training) the card records how the export agrees
    with the PyTorch model there: largest logit difference, labels changed, score lost. int8 needs
    it: quantization is lossy, and its cost should be measured, not assumed.
    """
    if format not in FORMATS:
        raise DistillError(f"unknown export format {format!r}: choose one of {', '.join(FORMATS)}")
    if quantize is not None and (quantize not in QUANTIZATIONS or format != "onnx"):
        raise DistillError(f"--quantize {quantize}: only int8, and only with --format onnx")
    if quantize is not None and check_data is None:
        raise DistillError("--quantize int8 needs --check-data: held-back labelled data on which the int8 model's "
                           "labels and score are compared with the fp32 model's")
    card = read_model_card(model_dir)
    if card.get("format") == "onnx":
        raise DistillError(f"{model_dir}: is already an ONNX export; export from the PyTorch model directory "
                           "it came from")
    source = Path(model_dir)
    with model_output(output, [model_dir, check_data], overwrite) as directory:
        model = load_model(model_dir, device="cpu")
        if check_data is not None:
            examples, gold = read_split(check_data, model.task, data)
            check_labels_known(check_data, model.hierarchy, model.task, gold)
        if format == "onnx":
            files = save_onnx_files(model, card["kind"], source, directory, quantize)
        else:
            files = save_slim_files(model, card["kind"], source, directory)
        exported = {"kind": card["kind"], "model": card["model"], "task": card["task"], "labels": card["labels"],
                    "format": format,
                    "export": {"source": str(model_dir), "source_card_sha256": file_sha256(source / MODEL_CARD),
                               "parameters": model.parameter_count(), **export_settings(format, quantize)},
                    "agreement": None}
        if check_data is not None:
            exported["agreement"] = {"data": check_data, "reference": f"pytorch {precision.current()}",
                                     **agreement(model, model_from_card(directory, exported), examples, gold,
                                                 batch_size)}
        write_model_card(directory, exported, files)  # last: a directory with a card is complete
        return {**exported, "sha256": read_model_card(directory)["sha256"]}
