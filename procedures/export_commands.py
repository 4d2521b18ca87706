"""`nlp-train export`: a trained model for deployment (ONNX, int8, a slim safetensors copy, or transformers).

A module of its own because its choices come from `distill.export`, which imports every kind of model.
"""

from __future__ import annotations

import click

from distill.export import FORMATS, QUANTIZATIONS
from procedures.options import column_options, command, overwrite_option, report


@command()
@click.argument("model_dir", type=click.Path())
@click.option("--output", required=True, type=click.Path(file_okay=False), help="Directory for the exported model.")
@click.option("--format", "export_format", type=click.Choice(FORMATS), default="onnx",
              show_default=True, help="onnx: the forward pass as an ONNX graph for ONNX Runtime (text "
              "preprocessing and CRF decoding stay in Python); safetensors: a slim copy without optimizer state; "
              "transformers: a stock transformers classifier (the teacher, transformer students; a multi-task "
              "teacher: a folder per head) that AutoModelFor...Classification and pipeline load.")
@click.option("--quantize", type=click.Choice(QUANTIZATIONS), help="ONNX only: dynamic int8 quantization "
              "(ONNX Runtime); needs --check-data.")
@click.option("--check-data", help="Held-back labelled data: the card records how the export agrees with the "
              "PyTorch model there (largest logit difference, labels changed, score lost).")
@overwrite_option
@column_options
def export(model_dir, output, export_format, quantize, check_data, overwrite, data):
    """Export MODEL_DIR for deployment: ONNX (fp32 or int8), a slim safetensors copy, or a transformers model.

    `predict`, `evaluate` and `compare` run an ONNX export through ONNX Runtime, so compare shows
    PyTorch, ONNX fp32 and ONNX int8 side by side (docs/export.md).
    """
    from distill.export import export_model
    card = export_model(model_dir, output, export_format, quantize, check_data, data, overwrite)
    settings = card["export"]
    what = settings["format"] + (f" {settings['quantize']}" if settings["quantize"] else "")
    agreed = card["agreement"]
    checked = "" if agreed is None else (
        f"; on {agreed['data']}: max logit difference {agreed['max_abs_logit_diff']:.2g}, "
        f"{agreed['labels_changed']:,} of {agreed['labels_compared']:,} labels changed, "
        f"{agreed['metric']} {agreed['reference_score']:.4f} -> {agreed['score']:.4f}")
    report(f"export: {model_dir} as {what} in {output}{checked}")
