"""`nlp-train export`: a trained model for deployment (ONNX, int8, a slim safetensors copy, or transformers).

A module of its own because its choices come from `distill.export`, which imports every kind of model.
"""

from __future__ import annotations

import functools

import click

from distill.export import FORMATS, QUANTIZATIONS
from procedures.options import column_options, command, given, overwrite_option, report


def columns_need_check_data(func):
    """--text-column, --label-column and --tag-column say where --check-data holds its texts and labels:
    without --check-data they would be accepted and read nothing (refused before column_options checks them)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        context = click.get_current_context()
        named = [f"--{name.replace('_', '-')}" for name in ("text_column", "label_column", "tag_column")
                 if given(context, name)]
        if named and kwargs["check_data"] is None:
            raise click.BadParameter(f"{', '.join(named)} say{'s' if len(named) == 1 else ''} where --check-data "
                                     "holds its texts and labels, and no --check-data was given: give it, or drop "
                                     f"{'it' if len(named) == 1 else 'them'}", param_hint=f"'{named[0]}'")
        return func(*args, **kwargs)
    return wrapper


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
@columns_need_check_data
@column_options
def export(model_dir, output, export_format, quantize, check_data, overwrite, data):
    """Export MODEL_DIR for deployment: ONNX (fp32 or int8), a slim safetensors copy, or a transformers model.

    MODEL_DIR is a model distill wrote, or a transformers classifier's folder (or hub:NAME), which exports
    to ONNX only (docs/hub-teachers.md).

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
    speed = card.get("speed")
    timed = "" if not speed else (
        f"; {speed['ratio']:.2f}x PyTorch's speed here ({speed['export_examples_per_second']:,} against "
        f"{speed['pytorch_examples_per_second']:,} ex/s, batch {speed['batch_size']}, {speed['threads']} "
        f"thread{'s' if speed['threads'] != 1 else ''})")
    report(f"export: {model_dir} as {what} in {output}{checked}{timed}")
