"""The model card for people and the Hugging Face Hub: ``README.md`` in every model folder and export.

Its YAML header holds the Hub's metadata (``library_name``, ``base_model``, ``datasets``, ``metrics`` and the
measured scores as a ``model-index``, ``tags``, ``pipeline_tag``); the prose says what the model is, what it
learnt from (by name and sha256), its scores and size, and how to load it. It is rendered from what
the model's card (``distill.json``) and its run know, written with every save (`write_model_card`) and again
when a run finishes (`distill.models.card.rewrite_readme`, with the run's data and scores), and it is one of the files the card
checksums: an edited card README makes the model refused as edited, and `--overwrite` knows it as distill's
own file by that checksum (a README.md whose sha256 the card does not record is the user's).
"""

from __future__ import annotations

import os
from pathlib import Path

from distill.data.checks import HUB_PREFIX
from distill.data.hub import hub_dataset
from distill.io import STAGING_PREFIX, real_path, write_text
from distill.metrics import size_text

README = "README.md"
# The offline encoders by their names on the Hub (distill.encoders.OFFLINE_ENCODERS).
HUB_NAMES = {"minilm-l6": "sentence-transformers/all-MiniLM-L6-v2", "mpnet-base": "sentence-transformers/all-mpnet-base-v2"}
PIPELINES = {"classification": "text-classification", "tagging": "token-classification"}
# The run's inputs that are data (a teacher or an encoder is the base model, not data).
DATA_ROLES = ("train", "dev", "unlabeled")

__all__ = ["README", "about_run", "render_readme", "write_readme"]


def _hub_name(name: str | None) -> str | None:
    return HUB_NAMES.get(name, name) if name else None


def hub_model_id(name: str | None) -> str | None:
    """`name` as the Hub's ``base_model`` takes it: a model id (``hub:NAME`` without its prefix), else None. A local
    folder (``/abs/teacher``, ``runs/teacher``) is no id: the Hub refuses a README whose ``base_model`` is not one
    (``"base_model" ... is not valid``), so the card would not upload; the prose still names the folder."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id
    from distill.data.checks import HUB_PREFIX
    name = _hub_name(name)
    if not name:
        return None
    name = name[len(HUB_PREFIX):] if name.startswith(HUB_PREFIX) else name
    if os.path.exists(name):
        return None
    try:
        validate_repo_id(name)
    except HFValidationError:
        return None
    return name


def about_run(summary: dict) -> dict:
    """What a finished run's summary (``train_summary.json``) tells a card: the data it read (by name and
    sha256), the teacher it learnt from, its best epoch's dev scores, its size."""
    sources, prints = summary.get("sources") or {}, summary.get("inputs") or {}
    data = [{"role": role, "name": str(name), "sha256": prints.get(role)}
            for role, name in sources.items() if role.split(":")[0] in DATA_ROLES and name]
    dev = (summary.get("best") or {}).get("dev") or {}
    # a multi-task run's dev scores are per head (a dict each), beside their mean
    scores = [{"split": f"dev ({head})", "metric": metric, "value": value}
              for head, metrics in dev.items() if isinstance(metrics, dict)
              for metric, value in metrics.items() if isinstance(value, (int, float))]
    scores += [{"split": "dev", "metric": metric, "value": value} for metric, value in dev.items()
               if isinstance(value, (int, float))]
    about = {"data": data, "scores": scores, "parameters": summary.get("parameters")}
    teacher = summary.get("teacher") or sources.get("teacher")
    if teacher:
        about["teacher"] = str(teacher)
    if summary.get("teachers"):  # an ensemble: each teacher with its weight
        about["teachers"] = [f"`{one['teacher'] or '(in memory)'}` (weight {one['weight']:.4g})"
                             for one in summary["teachers"]]
    return about


def _task(card: dict) -> str:
    return card.get("task") or "classification"


def _size(directory: Path, files: list[str]) -> int:
    return sum((directory / name).stat().st_size for name in files if name != README and (directory / name).is_file())


def _model_name(directory: Path) -> str:
    """The model's folder name: a model is written in a hidden staging folder inside its own, then moved in."""
    folder = real_path(directory)
    return folder.parent.name if folder.name.startswith(STAGING_PREFIX) else folder.name


def render_readme(directory: str | Path, card: dict, files: list[str], about: dict | None = None) -> str:
    """The README.md text of the model in `directory` that `card` describes (its `files` written)."""
    from huggingface_hub import EvalResult, ModelCardData
    directory, about = Path(directory), about or {}
    kind, task, form = card.get("kind", "model"), _task(card), card.get("format")
    export = card.get("export") or {}
    name = _model_name(directory)
    candidates = [about.get("teacher") if kind == "student" else None, about.get("base_model"), export.get("source")]
    base_model = next((hub for hub in map(hub_model_id, candidates) if hub), None)
    data = about.get("data") or []
    trained = [item["name"] for item in data if item["role"] == "train"] or [item["name"] for item in data]
    # the Hub's `datasets` are dataset ids (hub:NAME[:CONFIG]:SPLIT data); local files are named in the results alone
    hub_ids = sorted({hub_dataset(name) for name in trained if name.startswith(HUB_PREFIX)})
    datasets = hub_ids or sorted({Path(name).parent.name or name for name in trained})
    scores = list(about.get("scores") or [])
    agreement = card.get("agreement") or {}
    if agreement:
        scores.append({"split": Path(agreement["data"]).name, "metric": agreement["metric"],
                       "value": agreement["score"]})
    tags = ["distillation", "distill", kind, task] + ([form] if form else [])
    results = [EvalResult(task_type=PIPELINES[task], dataset_type=datasets[0] if datasets else "data",
                          dataset_name=datasets[0] if datasets else "data", dataset_split=score["split"],
                          metric_type=score["metric"], metric_value=score["value"]) for score in scores]
    metadata = ModelCardData(library_name="transformers" if form == "transformers" else "distill",
                             base_model=base_model, datasets=hub_ids or None,
                             metrics=sorted({score["metric"] for score in scores}) or None, tags=tags,
                             pipeline_tag=PIPELINES[task], model_name=name if results else None,
                             eval_results=results or None)
    remote_code = any(file.startswith("modeling_") and file.endswith(".py") for file in files)  # the head's class
    lines = ["---", metadata.to_yaml().strip(), "---", "", f"# {name}", "", _what(card, about, form, remote_code), ""]
    if about.get("teachers"):
        lines += [f"Distilled from an ensemble of teachers: {', '.join(about['teachers'])}.", ""]
    elif about.get("teacher"):
        lines += [f"Distilled from the teacher `{about['teacher']}`.", ""]
    if export:
        lines += [f"Exported from `{export.get('source')}` (its card's sha256 {export.get('source_card_sha256')}).",
                  ""]
    if data:
        lines += ["## Training data", "", "| role | data | sha256 |", "|---|---|---|"]
        lines += [f"| {item['role']} | `{item['name']}` | {item['sha256'] or 'not recorded'} |" for item in data]
        lines.append("")
    if scores:
        lines += ["## Scores", "", "| data | metric | score |", "|---|---|---|"]
        lines += [f"| {score['split']} | {score['metric']} | {score['value']:.4f} |" for score in scores]
        lines.append("")
    if agreement:
        lines += [f"Against the PyTorch model on `{agreement['data']}`: largest logit difference "
                  f"{agreement['max_abs_logit_diff']:.2g}, {agreement['labels_changed']} of "
                  f"{agreement['labels_compared']} labels changed.", ""]
    parameters = about.get("parameters") or export.get("parameters")
    size = _size(directory, files)
    lines += ["## Size", "", (f"{parameters:,} parameters; " if parameters else "")
              + f"{size_text(size)} of model files (speed: measure it with `nlp-train compare`).", ""]
    lines += ["## How to load it", "", *_loading(card, form, task, remote_code), ""]
    return "\n".join(lines)


def _what(card: dict, about: dict, form: str | None, remote_code: bool = False) -> str:
    kind, task = card.get("kind"), _task(card)
    if kind == "multitask-teacher":
        heads = card.get("heads") or {}
        listed = "; ".join(f"`{head}` ({spec.get('task')}: {', '.join(map(str, spec.get('labels', [])))})"
                           for head, spec in heads.items())
        what = f"A multi-task teacher made with distill: one transformer encoder, a head per task: {listed}."
    else:
        labels = ", ".join(map(str, card.get("labels") or []))
        model = card.get("model", "model")
        doing = "text classification" if task == "classification" else "token tagging"
        what = (f"A distill {kind} ({model}) for {doing}" if kind == "student" else
                f"A distill teacher for {doing}: a transformer encoder"
                + (f" ({about['base_model']})" if about.get("base_model") else "") + " with a Linear head")
        what += f", labels: {labels}."
    if form == "transformers" and remote_code:
        what += (" Exported as a transformers model whose head (mean pooling, which no stock class does) is distill's "
                 "class, in the `modeling_*.py` file beside the weights: load it with `trust_remote_code=True`.")
    elif form == "transformers":
        what += " Exported as a stock transformers model: no custom code."
    elif form:
        what += f" Exported as {form}" + (f" ({card['export']['quantize']})" if card.get("export", {}).get("quantize")
                                         else "") + "."
    return what


def _loading(card: dict, form: str | None, task: str, remote_code: bool = False) -> list[str]:
    """How to load the model: with distill always, and with transformers or ONNX Runtime as its form allows."""
    example = '["a quietly devastating film"]' if task == "classification" else '[["Peter", "lives", "in", "Paris"]]'
    lines = ["With distill (`pip install distill`), which checks every file against `distill.json` first:", "",
             "```python", "from distill.models import load_model", "", 'model = load_model("PATH")',
             f"print(model.predict({example}))", "```", "",
             "or `nlp-train predict PATH`, `nlp-train evaluate PATH DATA`."]
    if form == "transformers" and card.get("kind") == "multitask-teacher":
        lines += ["", "Each head's folder, `PATH/HEAD`, is a transformers model of its own."]
    elif form == "transformers":
        lines += ["", "With transformers alone:", "", "```python", "from transformers import pipeline", "",
                  f'run = pipeline("{PIPELINES[task]}", model="PATH"'
                  + (", trust_remote_code=True)" if remote_code else ")"),
                  'print(run("a quietly devastating film"))' if task == "classification"
                  else 'print(run("Peter lives in Paris", aggregation_strategy="first"))', "```"]
    elif form == "onnx":
        lines += ["", "`model.onnx` runs in ONNX Runtime (`onnxruntime.InferenceSession`); distill's `load_model` "
                  "prepares its inputs (tokenizer or vocabularies) and decodes its logits."]
    return lines


def write_readme(directory: str | Path, card: dict, files: list[str], about: dict | None = None) -> str:
    """Write README.md in `directory`; returns its name for the card's checksums."""
    write_text(Path(directory) / README, render_readme(directory, card, files, about))
    return README
