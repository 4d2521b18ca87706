"""`nlp-train` commands that train: `teacher`, `student`, `kd` and `pseudo-label`.

Importing this module reads the student registry (the `--model` choices and their architecture
options come from the students' config classes), so `procedures.cli` imports it only when one of
these commands runs or its help is shown.
"""

from __future__ import annotations

import dataclasses
import functools
import json

import click

from distill.distiller import DistillSettings
from distill.errors import DistillError
from distill.loss_settings import LossSettings
from distill.metrics import SELECTABLE
from distill.models.multitask import TaskSampling
from distill.models.teacher import TeacherConfig, TeacherTraining
from distill.pseudo_label import PseudoLabelSettings
from distill.runtime import Output, Runtime
from distill.settings import field_of
from procedures.config import config_option, recorded_beside, resolved_config
from procedures.options import (LEARNING_RATE, FiniteFloatRange, command, data_options, given, labels_option_value,
                                llm_teacher_options, overwrite_option, report, resume_option)
from procedures.settings_cli import field_option, settings_options


class StudentModelType(click.ParamType):
    """A registered student name, or a class given as module:Class (see `distill.models.registry`)."""

    name = "model"

    def convert(self, value, param, ctx):
        from distill.models.registry import StudentEntry, student_entry
        if isinstance(value, StudentEntry):
            return value
        try:
            return student_entry(value)
        except DistillError as err:
            self.fail(str(err), param, ctx)


def architecture_fields() -> dict[str, tuple[dataclasses.Field, dict[str, object]]]:
    """Every architecture setting of the registered students: its field and its default per model."""
    from distill.models.registry import students
    found: dict[str, tuple[dataclasses.Field, dict[str, object]]] = {}
    for name, entry in students().items():
        config = entry.cls.config_class()
        for spec in dataclasses.fields(config):
            if spec.name != "model" and spec.metadata.get("help"):
                found.setdefault(spec.name, (spec, {}))[1][name] = getattr(config, spec.name)
    return found


def parse_int_list(value: str | None, minimum: int) -> list[int] | None:
    if value is None:
        return None
    try:
        numbers = [int(v) for v in value.split(",")]
    except ValueError:
        raise click.BadParameter("use comma-separated whole numbers, e.g. 3,4,5") from None
    if min(numbers) < minimum:
        raise click.BadParameter(f"each value must be >= {minimum}")
    return numbers


def architecture_option(spec: dataclasses.Field, defaults: dict[str, object]):
    """A click option for a config field, its help naming the students that read it and their defaults."""
    meta = spec.metadata
    models_of: dict[str, list[str]] = {}  # each default value, with the students that have it
    for model, value in defaults.items():
        models_of.setdefault(",".join(map(str, value)) if isinstance(value, list) else str(value), []).append(model)
    default_text = next(iter(models_of)) if len(models_of) == 1 else \
        "; ".join(f"{value} ({', '.join(models)})" for value, models in models_of.items())
    text = f"{meta['help']} [{', '.join(defaults)}; default: {default_text}]"
    declaration = meta.get("flag") or "--" + spec.name.replace("_", "-")
    sample = next(iter(defaults.values()))
    if "flag" in meta:
        return click.option(declaration, spec.name, default=sample, is_flag=True, help=text)
    if "choices" in meta:
        kind = click.Choice(meta["choices"])
    elif isinstance(sample, list):
        minimum = meta.get("min", 1)
        return click.option(declaration, spec.name, callback=lambda c, p, v: parse_int_list(v, minimum),
                            metavar="N,N,...", help=text)
    elif isinstance(sample, str):
        return click.option(declaration, spec.name, type=click.STRING, default=None, metavar=meta.get("metavar"),
                            help=text)
    elif isinstance(sample, int):
        kind = click.IntRange(min=meta.get("min"), max=meta.get("max"))
    else:
        kind = FiniteFloatRange(min=meta.get("min"), max=meta.get("max"), max_open=meta.get("max_open", False))
    return click.option(declaration, spec.name, type=kind, default=None, help=text)


def student_defaults(name: str) -> str:
    """Each registered student's default `name` (lr, epochs, patience), as the options' help names them."""
    from distill.models.registry import students
    from distill.models.students import student_default
    values: dict[float, list[str]] = {}
    for student, entry in students().items():
        values.setdefault(student_default(entry.cls, name), []).append(student)
    return "; ".join(f"{value:g} ({', '.join(names)})" for value, names in values.items())


def report_options(func):
    """--report-to and --logging-dir, built into the run's callbacks (`distill.callbacks.reporters`)."""
    @click.option("--report-to", "report_to", multiple=True, metavar="tensorboard|mlflow|none",
                  help="Report each step's loss terms and learning rate and each epoch's dev metrics to TensorBoard "
                       "(events in OUTPUT/runs) or MLflow (MLFLOW_TRACKING_URI, else MLflow's default store); "
                       "repeated or comma-separated; needs pip install 'distill[tracking]' (docs/tracking.md).")
    @click.option("--logging-dir", type=click.Path(file_okay=False),
                  help="Where --report-to tensorboard writes its events [default: OUTPUT/runs].")
    @functools.wraps(func)
    def wrapper(*args, report_to, logging_dir, **kwargs):
        from distill.callbacks import ReportTarget, reporter_names, reporters
        if logging_dir is not None and "tensorboard" not in reporter_names(report_to):
            raise click.BadParameter("--logging-dir is where --report-to tensorboard writes: give that too",
                                     param_hint="'--logging-dir'")
        callbacks = reporters(report_to, ReportTarget(kwargs["output"], logging_dir))
        return func(*args, callbacks=callbacks, **kwargs)
    return wrapper


def student_options(func):
    """--model, the registered students' architecture options (derived from their config classes) and
    `TrainSettings`' options, packed into the model's config and a TrainSettings."""
    from distill.models.registry import students
    from distill.training import TrainSettings
    fields = architecture_fields()

    @functools.wraps(func)
    def wrapper(*args, model_entry, **kwargs):
        context = click.get_current_context()
        config_class = model_entry.cls.config_class
        own = {spec.name for spec in dataclasses.fields(config_class)}
        chosen = {}
        for name in fields:
            value = kwargs.pop(name)
            if value is None or not given(context, name):
                continue
            if name not in own:
                option = fields[name][0].metadata.get("flag", "--" + name.replace("_", "-")).split("/")[0]
                readers = ", ".join(fields[name][1])
                raise click.BadParameter(f"{model_entry.name} has no such setting; {option} is for {readers}",
                                         param_hint=f"'{option}'")
            chosen[name] = value
        return func(*args, student_config=config_class(model=model_entry.name, **chosen), **kwargs)

    for name, (spec, model_defaults) in reversed(list(fields.items())):
        wrapper = architecture_option(spec, model_defaults)(wrapper)
    choices = ", ".join(f"{name} ({entry.task})" for name, entry in students().items())
    wrapper = click.option("--model", "model_entry", type=StudentModelType(), required=True,
                           help=f"The student: {choices}; or a registered class of your own as module:Class.")(wrapper)
    return settings_options(TrainSettings, "train_settings",
                            default_texts={name: student_defaults(name) for name in ("lr", "epochs", "patience")})(wrapper)


def parse_class_weights(value: str):
    """None (as the API spells no weights), "inverse", or one weight per label (`distill.labels`)."""
    from distill.labels import parse_class_weights as parse
    try:
        return parse(value)
    except DistillError as err:
        raise click.BadParameter(str(err)) from None


TASK_SPEC_SETTINGS = {  # setting: (what it takes, its parser, which raises KeyError or BadParameter on bad text)
    "pre_classifier": ("true or false", {"true": True, "false": False}.__getitem__),
    "pooling": ("auto, first or mean", {p: p for p in ("auto", "first", "mean")}.__getitem__),
    "class_weights": ("none, inverse or numbers joined by ,", parse_class_weights),
    "select_metric": (", ".join(SELECTABLE), {m: m for m in SELECTABLE}.__getitem__),
    "encoder_lr": ("a learning rate in (0, 1]", lambda text: LEARNING_RATE.convert(text, None, None)),
}


def parse_task_spec(value: str):
    """NAME:TASK:TRAIN:DEV[:SETTING=VALUE...] as a `TaskData` (one head of a multi-task teacher)."""
    from distill.trainers import TaskData
    parts = value.split(":")
    settings = [p for p in parts[2:] if "=" in p]
    paths = [p for p in parts[2:] if "=" not in p]
    if len(parts) < 4 or len(paths) != 2 or parts[1] not in ("classification", "tagging"):
        raise click.BadParameter(f"{value!r}: use NAME:classification|tagging:TRAIN:DEV[:SETTING=VALUE...] "
                                 "(files whose names hold no ':')", param_hint="'--task-spec'")
    spec = TaskData(parts[0], parts[1], *paths)
    keys = [setting.partition("=")[0] for setting in settings]
    for setting in settings:
        key, _, text = setting.partition("=")
        if key not in TASK_SPEC_SETTINGS:
            raise click.BadParameter(f"{value!r}: unknown setting {key!r}; a task takes "
                                     f"{', '.join(TASK_SPEC_SETTINGS)}", param_hint="'--task-spec'")
        if keys.count(key) > 1:
            raise click.BadParameter(f"{value!r}: {key} is given {keys.count(key)} times; give it once",
                                     param_hint="'--task-spec'")
        takes, parse = TASK_SPEC_SETTINGS[key]
        try:
            setattr(spec, key, parse(text))
        except (KeyError, click.BadParameter):
            raise click.BadParameter(f"{value!r}: {key} is {takes}", param_hint="'--task-spec'") from None
    return spec


@command()
@config_option
@click.option("--task", type=click.Choice(["classification", "tagging"]),
              help="Sentence classification or word tagging (e.g. NER).")
@click.option("--train", "train_path", help="Training data file.")
@click.option("--dev", "dev_path", help="Dev data file: picks the best epoch and early stopping.")
@click.option("--task-spec", "task_specs", multiple=True, metavar="NAME:TASK:TRAIN:DEV[:SETTING=VALUE...]",
              callback=lambda c, p, v: [parse_task_spec(spec) for spec in v],
              help="Instead of --task/--train/--dev, repeated: a multi-task teacher with one head per task "
                   "(TASK: classification or tagging; SETTING: pre_classifier, pooling, class_weights, "
                   "select_metric, encoder_lr, overriding the shared option for that head). See docs/multitask.md.")
@click.option("--zero-shot", "zero_shot", is_flag=True,
              help="Train nothing: a teacher from --labels' descriptions, embedded by the sentence --encoder; logits "
                   "= cosine similarity / --temperature (fitted on --dev when given); mean pooling unless --pooling "
                   "says otherwise. See "
                   "docs/teachers-without-labels.md.")
@click.option("--labels", "label_names", metavar="NAME[=DESCRIPTION|...],...", multiple=True,
              callback=labels_option_value,
              help="--zero-shot: the labels, comma-separated, each with descriptions (several joined by '|', their "
                   "embeddings averaged) or standing for itself, e.g. \"negative=a negative review,positive=a "
                   "positive review\"; a name alone after NAME=DESCRIPTION is refused (write NAME=NAME). Repeat "
                   "--labels, one label each, for descriptions with commas.")
@click.option("--temperature", type=FiniteFloatRange(min=0.001, max=10.0),
              help="--zero-shot: divide the cosine similarities by this [default: fitted on --dev (NLL), else "
                   "0.05].")
@click.option("--output", required=True, type=click.Path(file_okay=False), help="Directory for the teacher.")
@settings_options(TaskSampling, "sampling")
@settings_options(TeacherConfig, "config", exclude=("task",))
@settings_options(TeacherTraining, "training")
@report_options
@resume_option
@overwrite_option
@data_options
@settings_options(Runtime, "env")
@click.pass_context
def teacher(context, task, train_path, dev_path, task_specs, zero_shot, label_names, temperature, output, sampling,
            config, training, callbacks, resume, overwrite, data, env):
    """Fine-tune a DistilBERT (or other encoder) + Linear teacher, or one encoder with a head per
    task (--task-spec, repeated), or build a zero-shot teacher from label descriptions (--zero-shot)."""
    from distill.trainers import train_multitask_teacher, train_teacher
    for name in ("window_overlap", "max_windows"):
        if config.long_inputs == "truncate" and given(context, name):
            option = "--" + name.replace("_", "-")
            raise click.BadParameter(f"{option} applies to --long-inputs windows", param_hint=f"'{option}'")
    if zero_shot or label_names or temperature is not None:
        return zero_shot_command(context, data)
    single = [name for name, value in (("--task", task), ("--train", train_path), ("--dev", dev_path)) if value]
    multi = [name for name in ("task_sampling", "task_temperature", "select_task") if given(context, name)]
    if task_specs and single:
        raise click.BadParameter(f"{single[0]} is for a single-task teacher; with --task-spec each task names its "
                                 "own data", param_hint=f"'{single[0]}'")
    if not task_specs and len(single) < 3:
        missing = next(name for name in ("--task", "--train", "--dev") if name not in single)
        raise click.BadParameter(f"{missing} is required (or give --task-spec per task)", param_hint=f"'{missing}'")
    if not task_specs and multi:
        option = "--" + multi[0].replace("_", "-")
        raise click.BadParameter(f"{option} is for a multi-task teacher (--task-spec)", param_hint=f"'{option}'")
    config = dataclasses.replace(config, task=task or "classification")
    run = Output(output, overwrite, resume, resolved_config()), env
    if task_specs:
        summary = train_multitask_teacher(task_specs, config, training, sampling, data, *run, callbacks).summary
        best = summary["best"]
        scores = "; ".join(f"{name} {json.dumps(headline_of(best['dev'][name]))}" for name in summary["heads"])
        report(f"teacher: {summary['parameters']:,} parameters, heads {', '.join(summary['heads'])}; best epoch "
               f"{best['epoch']} (dev mean {best['dev']['mean']:.4f}); dev {scores}; saved to {output}")
        return
    summary = train_teacher(train_path, dev_path, config, training, data, *run, callbacks).summary
    best = summary["best"]
    report(f"teacher: {summary['parameters']:,} parameters; best epoch {best['epoch']}; "
           f"dev {json.dumps(headline_of(best['dev']))}; saved to {output}")


ZERO_SHOT_OPTIONS = ("zero_shot", "label_names", "temperature", "dev_path", "output", "encoder", "batch_size",
                     "max_length", "long_inputs", "window_overlap", "max_windows", "pooling", "task", "overwrite",
                     "quiet", "text_column", "label_column", "label_separator", "device", "config")


def zero_shot_command(context: click.Context, data) -> None:
    """`teacher --zero-shot`: the options that build a zero-shot teacher, every other one refused by name."""
    from distill.trainers import Output, Runtime
    from distill.zero_shot import zero_shot_teacher
    params = context.params
    if not params["zero_shot"]:
        named = "--labels" if params["label_names"] else "--temperature"
        raise click.BadParameter(f"{named} is for --zero-shot (a teacher from label descriptions): give --zero-shot, "
                                 f"or drop {named}", param_hint=f"'{named}'")
    if not params["label_names"] or not given(context, "encoder"):
        missing = "--encoder" if params["label_names"] else "--labels"
        raise click.BadParameter(f"--zero-shot needs {missing}: the labels with their descriptions, and a sentence "
                                 "encoder (minilm-l6, mpnet-base or a sentence-transformers folder)",
                                 param_hint=f"'{missing}'")
    other = next((name for name in params if name not in ZERO_SHOT_OPTIONS and given(context, name)), None)
    if other is not None or params["task"] == "tagging":
        flag = "--task tagging" if other is None else "--" + {"train_path": "train", "task_specs": "task-spec"}.get(
            other, other.replace("_", "-"))
        raise click.BadParameter(f"{flag} does not apply to --zero-shot, which trains nothing and classifies texts: "
                                 "drop it", param_hint=f"'{flag.split()[0]}'")
    pooling = params["pooling"] if given(context, "pooling") else "mean"  # a zero-shot teacher's default
    if pooling == "auto":  # as the teacher reads it (`TeacherConfig.resolved`): the run config records the pooling
        from distill.encoders import native_pooling  # used, which its replay, "auto" being the option's default,
        pooling = native_pooling(params["encoder"])  # would otherwise read as not given (mean)
    result = zero_shot_teacher(params["label_names"], params["encoder"], params["dev_path"], params["temperature"],
                               params["max_length"], pooling, params["long_inputs"],
                               params["window_overlap"], params["max_windows"], params["batch_size"], data,
                               Output(params["output"], params["overwrite"], False,
                                      {**resolved_config(), "pooling": pooling}),
                               Runtime(params["device"], progress=not params["quiet"]))
    summary = result.summary
    dev = f"; dev {json.dumps(headline_of(summary['best']['dev']))}" if "best" in summary else ""
    report(f"teacher (zero-shot): labels {', '.join(summary['labels'])}; temperature {summary['temperature']:.4g} "
           f"({summary['temperature_from']}){dev}; saved to {params['output']}")


@command()
@config_option
@click.option("--train", "train_path", required=True, help="Training data file.")
@click.option("--dev", "dev_path", required=True, help="Dev data file: picks the best epoch and early stopping.")
@click.option("--output", required=True, type=click.Path(file_okay=False), help="Directory for the student.")
@click.option("--embeddings-from-teacher", "teacher_embeddings", type=click.Path(),
              help="Teacher directory: start word embeddings from its sub-word embeddings (PCA-reduced).")
@field_option(field_of(DistillSettings, "class_weights"))
@resume_option
@overwrite_option
@student_options
@report_options
@data_options
@settings_options(Runtime, "env")
def student(train_path, dev_path, output, teacher_embeddings, class_weights, resume, overwrite, student_config,
            train_settings, callbacks, data, env):
    """Train a small student on gold labels alone (the baseline for `kd`)."""
    from distill.models.prompt import prompt_settings
    from distill.trainers import train_student
    with prompt_settings(labels_from=train_path, data=data):  # a language model's labels, as kd takes them: --train's
        summary = train_student(student_config, train_path, dev_path, train_settings, class_weights,
                                teacher_embeddings, data, Output(output, overwrite, resume, resolved_config()), env,
                                callbacks).summary
    report_student(summary, output)


def teachers_option(ensemble: str, required: bool = True):
    """--teacher, repeatable: one teacher, or an ensemble doing `ensemble`."""
    return click.option(
        "--teacher", "teacher_dirs", required=required, multiple=True, type=click.Path(),
        help="Teacher directory, or a trained student's (the next stage of a teacher-assistant chain), or an ONNX "
             "export of either (fp32 or int8; docs/export.md), or a language model asked a prompt: a causal LM's "
             "folder, openai:MODEL or systemone:MODEL (--labels, --base-url; docs/llm-teachers.md). Repeated: an "
             f"ensemble of teachers with one label set, "
             f"{ensemble} the weighted mean of their distributions (docs/distillation.md).")


@command()
@config_option
@teachers_option("the student learning", required=False)
@click.option("--soft-labels", "soft_labels", type=click.Path(dir_okay=False),
              help="Instead of --teacher: a JSONL file of the teacher's distributions, {\"text\": ..., \"probs\": "
                   "{\"negative\": 0.2, \"positive\": 0.8}} or {\"text\": ..., \"label\": \"positive\", \"confidence\": "
                   "0.8} per line (an LLM's or an annotation tool's labels); its texts not in --train are the "
                   "unlabeled text. See docs/teachers-without-labels.md.")
@click.option("--train", "train_path", help="Labelled training data (required with --teacher).")
@click.option("--dev", "dev_path", required=True, help="Dev data: picks the best epoch and early stopping.")
@click.option("--output", required=True, type=click.Path(file_okay=False), help="Directory for the student.")
@click.option("--unlabeled", "unlabeled_path", help="Unlabeled text (one per line, or JSONL such as "
              "`pseudo-label` output): hard target = teacher argmax, plus the distill term.")
@settings_options(LossSettings, "loss_settings")
@settings_options(DistillSettings, "distill")
@resume_option
@overwrite_option
@student_options
@report_options
@data_options
@settings_options(Runtime, "env")
@click.pass_context
@llm_teacher_options("teacher_dirs", labels_from="train_path", shots_from="train_path", labels_to="label_names")
def kd(context, teacher_dirs, soft_labels, label_names, train_path, dev_path, output, unlabeled_path,
       loss_settings, distill, resume, overwrite, student_config, train_settings, callbacks, data, env):
    """Distill a teacher (or an ensemble: --teacher repeated) into a student: loss = w_s * NLL + w_d * distill(student,
    teacher)."""
    from distill.distiller import Distiller
    if loss_settings.student_weight == 0 and loss_settings.distill_weight == 0:
        raise click.BadParameter("--student-weight and --distill-weight are both 0: nothing to train on",
                                 param_hint="'--distill-weight'")
    if loss_settings.kd_loss == "mse" and given(context, "temperature"):
        raise click.BadParameter("--kd-loss mse compares raw logits; a temperature has no effect there",
                                 param_hint="'--temperature'")
    teacher = kd_teacher(context, teacher_dirs, soft_labels, label_names, train_path)
    distiller = Distiller(teacher, student_config, loss_settings.loss(), train_settings, distill=distill, env=env)
    summary = distiller.fit(train_path, dev_path, unlabeled_path, data,
                            Output(output, overwrite, resume, resolved_config()), callbacks).summary
    report_student(summary, output)
    if summary["teacher_dev"] is not None:  # soft labels that lack dev texts have no teacher's scores
        report_teacher(summary)




def kd_teacher(context: click.Context, teacher_dirs: tuple[str, ...], soft_labels: str | None,
               label_names: str | list[str] | None, train_path: str | None):
    """What kd learns from: --teacher (one, or an ensemble), or --soft-labels; with the options each needs."""
    if bool(teacher_dirs) == bool(soft_labels):
        raise click.BadParameter("give --teacher (a teacher model, repeated for an ensemble) or --soft-labels (a file "
                                 "of the teacher's distributions)" + (", not both" if soft_labels else ""),
                                 param_hint="'--teacher'")
    if teacher_dirs:
        if not train_path:
            raise click.BadParameter("--train is required with --teacher", param_hint="'--train'")
        return list(teacher_dirs) if len(teacher_dirs) > 1 else teacher_dirs[0]
    if given(context, "embeddings_from_teacher") and context.params["embeddings_from_teacher"]:
        raise click.BadParameter("soft labels come with no teacher model whose embeddings a student could start "
                                 "from: drop --embeddings-from-teacher", param_hint="'--embeddings-from-teacher'")
    from distill.soft_labels import SoftLabels
    return SoftLabels(soft_labels, label_names)


@command("pseudo-label")
@config_option
@teachers_option("labelling by")
@click.option("--input", "input_path", required=True,
              help="Unlabeled text: one example per line (tagging: space-separated tokens) or JSONL.")
@click.option("--output", required=True, type=click.Path(dir_okay=False), help="JSONL output file.")
@click.option("--resume", is_flag=True, help="Continue an interrupted run from OUTPUT.part "
              "(under torchrun, each process from its own OUTPUT.rankR-of-W.part); refused if the teacher, "
              "the input's content or an option changed.")
@overwrite_option
@settings_options(PseudoLabelSettings, "settings")
@settings_options(Runtime, "env")
@llm_teacher_options("teacher_dirs")
def pseudo_label_command(teacher_dirs, input_path, output, resume, overwrite, settings, env):
    """Label unlabeled text with the teacher's argmax (JSONL: line, text/tokens, label(s), confidence)."""
    from distill.pseudo_label import pseudo_label
    with recorded_beside(output):  # its options, in OUTPUT.config.yaml
        teacher = list(teacher_dirs) if len(teacher_dirs) > 1 else teacher_dirs[0]
        stats = pseudo_label(teacher, input_path, output, resume=resume, progress=env.progress, device=env.device,
                             overwrite=overwrite, **dataclasses.asdict(settings))
    resumed = f"{stats['resumed']:,} of them labelled before the resume; " if stats.get("resumed") else ""
    report(f"pseudo-label: {stats['written']:,} of {stats['read']:,} examples written to {output} "
               f"({resumed}{stats['examples_per_second']} ex/s)")


def report_student(summary: dict, output: str) -> None:
    from distill.metrics import size_text
    best = summary["best"]
    report(f"{summary['model']}: {summary['parameters']:,} parameters, {size_text(summary['size_bytes'])}; "
               f"best epoch {best['epoch']}; dev {json.dumps(headline_of(best['dev']))}; saved to {output}")


def report_teacher(summary: dict) -> None:
    """kd's last line: the teacher's dev score beside the student's, by the metric that picked the student's
    epoch, and the classes whose dev F1 the student has above the teacher's."""
    metric, teacher = summary["settings"]["select_metric"], summary["teacher_dev"]
    kind = "entity types" if "f1" in teacher else "tags" if "per_tag_f1" in teacher else "labels"
    above, total = summary["classes_above_teacher"], len(summary["dev_class_f1"])
    which = f"{len(above)} of {total} {kind}: {json.dumps(above, ensure_ascii=False)}" if above else \
        f"none of its {total} {kind}"  # as a JSON list: labels may hold commas (POS tags are "," and ":")
    name = "ensemble" if summary.get("teachers") else "teacher"  # an ensemble: its mixture's scores
    report(f"{name}: dev {metric} {teacher[metric]:.4f} (the student's {summary['best']['dev'][metric]:.4f}); the "
           f"student's dev F1 is above the {name}'s on {which}")
    hint = weak_teacher_hint(summary)
    if hint:
        report(hint)


def weak_teacher_hint(summary: dict) -> str | None:
    """What to try when the student has overtaken its teacher on dev with the settings that copy the teacher most
    (the teacher's mistakes kept, or a temperature above 1): docs/distillation.md#when-the-teacher-is-wrong."""
    metric, kd = summary["settings"]["select_metric"], summary["kd"]
    if summary["best"]["dev"][metric] <= summary["teacher_dev"][metric]:
        return None
    settings = []
    if kd.get("teacher_mistakes", "keep") == "keep":
        settings.append("--teacher-mistakes shift")
    if kd.get("kd_loss") != "mse" and kd.get("temperature", 1.0) > 1.0:
        settings.append("--temperature 1")
    if not settings:
        return None
    teacher_f1 = summary["teacher_dev"].get("class_f1", {})
    unlearnt = [name for name, f1 in summary.get("dev_class_f1", {}).items() if f1 > 0 and not teacher_f1.get(name)]
    never = f", and away from the classes it never gets right ({', '.join(unlearnt[:5])}" \
            f"{', ...' if len(unlearnt) > 5 else ''})" if unlearnt else ""
    return (f"the student is above its teacher on dev: kd pulls it towards the teacher's mistakes{never}; try "
            f"{' '.join(settings)}, or compare with nlp-train student (docs/distillation.md, When the teacher is "
            "wrong)")


def headline_of(metrics: dict) -> dict:
    keys = ("accuracy", "macro_f1", "f1", "precision", "recall", "token_accuracy")
    return {k: round(metrics[k], 4) for k in keys if k in metrics}
