"""`nlp-train` commands that use a trained model: `evaluate`, `predict` and `compare`.

Light to import: each command imports the library when it runs, so that `predict` and `evaluate`
of a word student (BiLSTM, CNN, n-gram, tagger) never import transformers.
"""

from __future__ import annotations

import json
import sys

import click

from procedures.options import (POSITIVE_INT, column_options, command, device_option, llm_teacher_options,
                                overwrite_option, quiet_option, report)


@command()
@click.argument("model_dir", type=click.Path())
@click.argument("data_file")
@click.option("--output", type=click.Path(dir_okay=False),
              help="Metrics JSON path (default: MODEL_DIR/eval_metrics.json for a model distill wrote; for a "
                   "transformers folder or hub:NAME, an input only, the metrics are printed and written nowhere "
                   "else).")
@click.option("--batch-size", default=64, show_default=True, type=POSITIVE_INT)
@overwrite_option
@quiet_option
@click.option("--head", help="The head of a multi-task teacher to score (required for one).")
@column_options
@device_option
@llm_teacher_options("model_dir", labels_from="data_file")
def evaluate(model_dir, data_file, output, batch_size, overwrite, quiet, head, data, device):
    """Score a teacher or student directory on labelled DATA_FILE; prints and writes metrics JSON."""
    from distill.evaluation import evaluate_model
    result = evaluate_model(model_dir, data_file, data, output, batch_size, progress=not quiet, device=device,
                            overwrite=overwrite, head=head)
    report(json.dumps(result, indent=2))


@command()
@click.argument("model_dir", type=click.Path())
@click.argument("input_file", required=False)
@click.option("--batch-size", default=64, show_default=True, type=POSITIVE_INT)
@click.option("--logits", "with_logits", is_flag=True, help="Include raw logits in each record.")
@click.option("--head", help="A multi-task teacher's head to predict with (default: every head, from one encoder "
                             "pass, each under `heads` in the record).")
@device_option
@llm_teacher_options("model_dir")
def predict(model_dir, input_file, batch_size, with_logits, head, device):
    """Predict labels for INPUT_FILE (or stdin): one example per line, or JSONL; writes JSONL to stdout.

    Tagging input is space-separated tokens per line (or JSONL with a tokens list).
    """
    from distill.evaluation import predict_file
    predict_file(model_dir, input_file, sys.stdout, batch_size, with_logits, device, head)


@command()
@click.argument("model_dirs", nargs=-1, required=True, type=click.Path())
@click.option("--data", "data_file", required=True, help="Labelled data all models are scored on.")
@click.option("--batch-size", default=32, show_default=True, type=POSITIVE_INT, help="Batch size for throughput.")
@click.option("--limit", type=POSITIVE_INT, help="Use only the first N examples.")
@click.option("--rounds", default=3, show_default=True, type=POSITIVE_INT,
              help="Timing rounds, the models timed one after another in each; the best round is shown (a served "
                   "model is timed by its one scoring pass).")
@click.option("--head", help="The head a multi-task teacher among the models is compared by (required for one; "
                             "the other models are compared as they are).")
@column_options
@llm_teacher_options("model_dirs", labels_from="data_file")
def compare(model_dirs, data_file, batch_size, limit, rounds, head, data):
    """Compare models (the first is the reference, e.g. the teacher): score, size, CPU throughput."""
    from distill.compare import compare_models, format_table
    click.echo(format_table(compare_models(list(model_dirs), data_file, data, batch_size, limit, rounds, head)))
