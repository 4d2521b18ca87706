"""Run configs (`--config FILE`, `run_config.yaml`): a run replays from the config it wrote with identical
weights, flags override the file, and a bad file is one line naming what is wrong (docs/configs.md)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from distill.errors import DistillError
from tests.conftest import SAMPLES, cli

TRAIN, DEV = SAMPLES / "sentiment_train.csv", SAMPLES / "sentiment_dev.csv"
TINY_STUDENT = ["--model", "lstm", "--embedding-dim", "16", "--hidden-dim", "16", "--dropout", "0", "--epochs", "2",
                "--quiet"]


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTILL_CACHE", str(tmp_path / "cache"))


def run_cli(*args) -> tuple[int, str]:
    """nlp-train in-process: its exit status and what it wrote to stderr."""
    from procedures.cli import main
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    return exit_info.value.code, stderr.getvalue()


def recorded(folder: Path) -> dict:
    return yaml.safe_load((folder / "run_config.yaml").read_text(encoding="utf-8"))


def assert_same_weights(first: Path, second: Path) -> None:
    from distill.models.base import LabelModel
    a, b = LabelModel.from_pretrained(first).state_dict(), LabelModel.from_pretrained(second).state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[name], b[name]) for name in a)


def test_a_kd_run_replays_from_its_run_config_with_identical_weights(tiny_classifier_teacher, tmp_path, monkeypatch):
    """Started with relative paths, replayed from another folder: the config holds them absolute. --kd-loss mse
    with the temperature's default in the file: a default the file repeats is not 'given' (it would be refused)."""
    (tmp_path / "first").mkdir()
    shutil.copy(TRAIN, tmp_path / "first" / "train.csv")
    monkeypatch.chdir(tmp_path / "first")
    cli("kd", "--teacher", tiny_classifier_teacher, "--train", "train.csv", "--dev", DEV, "--output", "runs/x",
        "--kd-loss", "mse", "--seed", "7", *TINY_STUDENT)
    config = recorded(tmp_path / "first" / "runs" / "x")
    assert config["train"] == str(tmp_path / "first" / "train.csv") and config["teacher"] == tiny_classifier_teacher
    assert config["kd-loss"] == "mse" and config["temperature"] == 2.0 and config["seed"] == 7  # defaults too
    assert not {"output", "resume", "overwrite"} & set(config)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    cli("kd", "--config", tmp_path / "first" / "runs" / "x" / "run_config.yaml", "--output", "runs/y")
    assert_same_weights(tmp_path / "first" / "runs" / "x", tmp_path / "elsewhere" / "runs" / "y")
    assert recorded(tmp_path / "elsewhere" / "runs" / "y") == config


def test_a_teacher_run_replays(tiny_encoder_dir, tmp_path):
    cli("teacher", "--task", "classification", "--encoder", tiny_encoder_dir, "--epochs", "1", "--encoder-lr", "1e-3",
        "--train", TRAIN, "--dev", DEV, "--output", tmp_path / "t1", "--quiet", "--max-length", "32")
    cli("teacher", "--config", tmp_path / "t1" / "run_config.yaml", "--output", tmp_path / "t2")
    assert_same_weights(tmp_path / "t1", tmp_path / "t2")
    assert recorded(tmp_path / "t2") == recorded(tmp_path / "t1")


def test_flags_override_the_file_and_a_replay_may_replace_its_own_folder(tmp_path):
    config = tmp_path / "student.yaml"
    config.write_text(f"train: {TRAIN}\ndev: {DEV}\nmodel: lstm\nembedding_dim: 16\nhidden-dim: 16\nepochs: 1\n"
                      "quiet: true\n", encoding="utf-8")
    cli("student", "--config", config, "--epochs", "2", "--output", tmp_path / "s")
    assert len(json.loads((tmp_path / "s" / "train_summary.json").read_text())["history"]) == 2
    assert recorded(tmp_path / "s")["epochs"] == 2 and recorded(tmp_path / "s")["embedding-dim"] == 16
    shutil.copytree(tmp_path / "s", tmp_path / "before")
    # the folder's run_config.yaml is a file of the run: --overwrite replaces it with the rest
    cli("student", "--config", tmp_path / "s" / "run_config.yaml", "--output", tmp_path / "s", "--overwrite")
    assert_same_weights(tmp_path / "before", tmp_path / "s")


def test_an_interrupted_run_finishes_from_its_own_config(tmp_path, monkeypatch):
    """The config is written before the first epoch: --resume with it continues the run, its paths now absolute."""
    from tests.conftest import interrupt_evaluation
    shutil.copy(TRAIN, tmp_path / "train.csv")
    monkeypatch.chdir(tmp_path)
    interrupt_evaluation(monkeypatch)
    status, _ = run_cli("student", "--train", "train.csv", "--dev", DEV, "--output", "runs/s", *TINY_STUDENT)
    assert status == 130 and (tmp_path / "runs" / "s" / "resume.pt").exists()
    cli("student", "--config", tmp_path / "runs" / "s" / "run_config.yaml", "--output", "runs/s", "--resume")
    assert len(json.loads((tmp_path / "runs" / "s" / "train_summary.json").read_text())["history"]) == 2


def test_json_and_yaml_configs_give_the_same_run(tmp_path):
    options = {"train": str(TRAIN), "dev": str(DEV), "model": "lstm", "embedding-dim": 16, "hidden-dim": 16,
               "epochs": 1, "quiet": True, "class-weights": [1, 2], "precision": "fp32"}
    (tmp_path / "c.json").write_text(json.dumps(options), encoding="utf-8")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(options), encoding="utf-8")
    cli("student", "--config", tmp_path / "c.json", "--output", tmp_path / "from-json")
    cli("student", "--config", tmp_path / "c.yaml", "--output", tmp_path / "from-yaml")
    assert_same_weights(tmp_path / "from-json", tmp_path / "from-yaml")
    assert recorded(tmp_path / "from-json")["class-weights"] == "1,2"  # a list for comma-separated values


def test_the_config_file_is_an_input_no_output_replaces(tiny_classifier_teacher, tmp_path):
    """--config names a file the command reads, as its data: no output may be it (not even with --overwrite)
    or hold it; only a run's own record, replayed into its own output, is written again."""
    config = tmp_path / "labels.yaml"
    config.write_text(f"teacher: {tiny_classifier_teacher}\ninput: {SAMPLES / 'unlabeled_movies.txt'}\n"
                      "quiet: true\n", encoding="utf-8")
    before = config.read_bytes()
    status, error = run_cli("pseudo-label", "--config", config, "--output", config, "--overwrite")
    assert status == 2 and f"{config}: is an input of this command" in error
    assert config.read_bytes() == before
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "student.yaml").write_text(f"train: {TRAIN}\ndev: {DEV}\n", encoding="utf-8")
    status, error = run_cli("student", "--config", folder / "student.yaml", "--output", folder, *TINY_STUDENT)
    assert status == 2 and "an input of this command" in error and (folder / "student.yaml").read_bytes()
    cli("pseudo-label", "--config", config, "--output", tmp_path / "labels.jsonl")
    cli("pseudo-label", "--config", tmp_path / "labels.jsonl.config.yaml", "--output", tmp_path / "labels.jsonl",
        "--overwrite")  # its own record, read and written again


def test_pseudo_label_records_its_options_beside_its_output(tiny_classifier_teacher, tmp_path):
    first = tmp_path / "labels.jsonl"
    cli("pseudo-label", "--teacher", tiny_classifier_teacher, "--input", SAMPLES / "unlabeled_movies.txt",
        "--output", first, "--min-confidence", "0.5", "--quiet")
    beside = tmp_path / "labels.jsonl.config.yaml"
    config = yaml.safe_load(beside.read_text(encoding="utf-8"))
    assert config["min-confidence"] == 0.5 and "output" not in config
    cli("pseudo-label", "--config", beside, "--output", tmp_path / "again.jsonl")
    assert (tmp_path / "again.jsonl").read_text() == first.read_text()
    (tmp_path / "mine.jsonl.config.yaml").write_text("my notes\n")
    status, error = run_cli("pseudo-label", "--config", beside, "--output", tmp_path / "mine.jsonl")
    assert status == 2 and "mine.jsonl.config.yaml: exists and is not the options of an earlier pseudo-label" in error
    assert not (tmp_path / "mine.jsonl").exists()


@pytest.mark.parametrize("name, text, expected", [
    ("typo.yaml", "tempreature: 3\n", "typo.yaml: unknown option 'tempreature' for kd; did you mean 'temperature'?"),
    # was: "did you mean 'encoder'?", an option of kd that means another thing
    ("teacher.yaml", "encoder-lr: 0.001\n", "teacher.yaml: unknown option 'encoder-lr' for kd: it is an option of "
                                           "teacher ("),
    ("type.yaml", "epochs: many\n", "type.yaml: epochs: 'many' is not a valid integer range"),
    ("bad.yaml", "epochs: [3\n", "bad.yaml: not valid YAML (line 2, column 1: expected ',' or ']'"),
    ("bad.json", '{"epochs": 3,}', "bad.json: not valid JSON (line 1, column 14: Expecting property name"),
    ("twice.yaml", "kd-loss: kl\nkd_loss: mse\n", "twice.yaml: kd-loss is given twice; give it once"),
    ("list.yaml", "- epochs\n", "list.yaml: holds a list, not option names with their values"),
    # was: an empty file (a copy cut short) or a comment alone ran every default as a success
    ("empty.yaml", "", "empty.yaml: sets no option (the file is empty, or comments alone)"),
    ("comment.yaml", "# epochs: 3\n", "comment.yaml: sets no option"), ("empty.json", "{}", "empty.json: sets no option"),
    ("int.yaml", "3\n", "int.yaml: holds an int, not option names"),
    ("nested.yaml", "epochs: {a: 1}\n", "nested.yaml: epochs takes one value; got {'a': 1}"),
    # a YAML number or true/false is judged as the flag's text would be: never cut, cast or crashed on
    ("float.yaml", "epochs: 1.5\n", "float.yaml: epochs: '1.5' is not a valid integer range"),
    ("true.yaml", "lr: true\n", "true.yaml: lr: takes a number, not true"),
    ("path.yaml", "teacher: true\n", "path.yaml: teacher: takes a path, not true"),
    ("flag.yaml", "quiet: 5\n", "flag.yaml: quiet: '5' is not a valid boolean"),
    ("one.yaml", "lr: [0.1]\n", "one.yaml: lr takes one value; got the list [0.1]"),
    ("comma.yaml", "teacher-weights: [1, true]\n", "comma.yaml: teacher-weights: takes W,W,..., not true"),
    # YAML's dates and tagged values were handed to click's types and the student registry: int()'s traceback
    ("date.yaml", "seed: 2024-01-01\n", "date.yaml: seed: '2024-01-01' is not a valid integer range"),
    ("model.yaml", "model: 2024-01-01\n", "model.yaml: model: unknown student model '2024-01-01'"),
    ("dates.yaml", "class-weights: [2024-01-01, 1]\n", "dates.yaml: class-weights: class weights: use none"),
    ("binary.yaml", "seed: !!binary aGVsbG8=\n", "binary.yaml: seed: takes a whole number, not the bytes b'hello'"),
    ("tagged.yaml", "lr: !!timestamp 2024-01-01\n", "tagged.yaml: lr: takes a number, not the date "),
    # a refusal of options judged together names the keys the file set, and the file
    ("given.yaml", "kd-loss: mse\ntemperature: 3\n", "--kd-loss mse compares raw logits; a temperature has no effect "
     "there (kd-loss, temperature: set in "),
    ("weights.yaml", "student-weight: 0\ndistill-weight: 0\n", "both 0: nothing to train on (student-weight, "
     "distill-weight: set in "),
    ("llm.yaml", "labels: a,b\n", "--labels is an option of a language-model teacher (a causal LM folder, openai:MODEL, "
     "systemone:MODEL), and no model of this command is one (labels: set in "),
])
def test_a_bad_config_is_one_line_naming_the_problem(tmp_path, tiny_classifier_teacher, name, text, expected):
    (tmp_path / name).write_text(text, encoding="utf-8")
    status, error = run_cli("kd", "--config", tmp_path / name, "--teacher", tiny_classifier_teacher, "--train", TRAIN,
                            "--dev", DEV, "--output", tmp_path / "out", *TINY_STUDENT)
    assert status == 2 and expected in error and error.count("\n") == 1, error
    assert not (tmp_path / "out").exists()


def test_a_missing_config_file_is_one_line(tmp_path):
    status, error = run_cli("teacher", "--config", tmp_path / "nowhere.yaml")
    assert status == 2 and error == f"error: {tmp_path / 'nowhere.yaml'}: config file not found\n"


def test_the_commands_help_shows_config():
    from click.testing import CliRunner

    from procedures.cli import cli as group
    for command in ("teacher", "student", "kd", "pseudo-label"):
        shown = CliRunner().invoke(group, [command, "--help"])
        assert shown.exit_code == 0 and "--config FILE" in shown.output


def test_task_specs_are_recorded_with_absolute_paths(monkeypatch):
    from procedures.cli import cli as group
    from procedures.config import resolved_config
    monkeypatch.chdir(SAMPLES.parent)
    root = group.make_context("nlp-train", ["teacher"])
    teacher = group.get_command(root, "teacher")
    spec = "ner:tagging:samples/ner_train.conll:samples/ner_dev.conll:pooling=first"
    with teacher.make_context("teacher", ["--task-spec", spec, "--output", "runs/mt"], parent=root) as ctx:
        config = resolved_config(ctx)
    train, dev = SAMPLES / "ner_train.conll", SAMPLES / "ner_dev.conll"
    assert config["task-spec"] == [f"ner:tagging:{train}:{dev}:pooling=first"]
    assert config["train"] is None and config["encoder"] == "distilbert-base-uncased"  # a hub name stays one


@pytest.mark.parametrize("command", ["pseudo-label", "kd"])
def test_a_prompts_shots_file_is_recorded_absolute(command, monkeypatch):
    """Was: --shots-from samples/sentiment_train.csv recorded as typed, so the replay that the config's header
    offers, from another folder, found no such file (or another folder's file of that name)."""
    from procedures.cli import cli as group
    from procedures.config import resolved_config
    monkeypatch.chdir(SAMPLES.parent)
    root = group.make_context("nlp-train", [command])
    found = group.get_command(root, command)
    args = ["--teacher", "openai:model", "--shots", "1", "--shots-from", "samples/sentiment_train.csv", "--output",
            "out.jsonl" if command == "pseudo-label" else "out"]
    args += ["--input", "samples/unlabeled_movies.txt"] if command == "pseudo-label" else \
        ["--model", "lstm", "--train", "hub:rotten_tomatoes:train", "--dev", "samples/sentiment_dev.csv"]
    with found.make_context(command, args, parent=root) as ctx:
        config = resolved_config(ctx)
    assert config["shots-from"] == str(TRAIN)
    assert config.get("train") in (None, "hub:rotten_tomatoes:train")  # a hub dataset stays one


def test_the_api_reads_a_run_config(tmp_path):
    from distill.config import load_run_config, settings_from
    from distill.trainers import Output
    from distill.training import TrainSettings
    path = tmp_path / "kd.yaml"
    path.write_text("lr: 0.01\nbatch-size: 8\nepochs: 3\nkd_loss: mse\npatience: null\n", encoding="utf-8")
    config = load_run_config(path)
    assert config["kd_loss"] == "mse" and config["batch_size"] == 8
    assert settings_from(TrainSettings, path) == TrainSettings(lr=0.01, batch_size=8, epochs=3)
    assert settings_from(TrainSettings, config, seed=1).seed == 1
    with pytest.raises(DistillError, match="config must be a dict"):
        Output(tmp_path / "out", config="kd.yaml")


def _captured(monkeypatch, name: str, module: str = "distill.trainers") -> dict:
    """`module.NAME` as the CLI calls it, its dataclass arguments kept by class (then it runs)."""
    import dataclasses
    import importlib

    where = importlib.import_module(module)
    real, seen = getattr(where, name), {}

    def capture(*args, **kwargs):
        for value in (*args, *kwargs.values()):
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                seen[type(value)] = value
        return real(*args, **kwargs)

    monkeypatch.setattr(where, name, capture)
    return seen


def _replays_exactly(seen: dict, run_config: Path) -> None:
    """Every settings object the CLI built equals what `settings_from` makes of the run's run_config.yaml."""
    from distill.config import load_run_config, settings_from
    from distill.precision import current
    from distill.trainers import Output, Runtime
    config = load_run_config(run_config)
    assert seen
    for cls, used in seen.items():
        if cls is Output:  # where it writes: output, resume and overwrite are the replay's own
            continue
        replayed = settings_from(cls, config)
        if cls is Runtime:  # the CLI sets precision and threads for the process; the file records them
            assert replayed.precision == current()
            replayed.precision, replayed.threads = used.precision, used.threads
        assert replayed == used, cls.__name__


CONTROLS = ["--weight-decay", "0.05", "--lr-schedule", "cosine", "--warmup-ratio", "0.37", "--grad-accumulation", "2",
            "--max-grad-norm", "0.5", "--seed", "7", "--batch-size", "16", "--quiet", "--label-separator", "|"]


def test_every_teacher_setting_replays_into_the_api_exactly(tiny_encoder_dir, tmp_path, monkeypatch):
    """A teacher's --warmup-ratio was read back as TeacherTraining's default warm-up (the field is `warmup`)."""
    seen = _captured(monkeypatch, "train_teacher")
    cli("teacher", "--task", "classification", "--encoder", tiny_encoder_dir, "--epochs", "1", "--max-length", "32",
        "--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv", "--encoder-lr", "2e-4",
        "--dropout", "0.2", *CONTROLS, "--output", tmp_path / "teacher")
    _replays_exactly(seen, tmp_path / "teacher" / "run_config.yaml")


def test_every_student_and_kd_setting_replays_into_the_api_exactly(tiny_classifier_teacher, tmp_path, monkeypatch):
    data = ["--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv", "--epochs", "1",
            "--model", "cnn", "--embedding-dim", "24", "--lr", "0.003", *CONTROLS]
    seen = _captured(monkeypatch, "train_student")
    cli("student", *data, "--output", tmp_path / "student")
    _replays_exactly(seen, tmp_path / "student" / "run_config.yaml")
    seen = _captured(monkeypatch, "Distiller", "distill.distiller")
    cli("kd", "--teacher", tiny_classifier_teacher, *data, "--temperature", "3", "--distill-weight", "0.7",
        "--teacher-mistakes", "shift", "--random-embeddings", "--output", tmp_path / "kd")
    _replays_exactly(seen, tmp_path / "kd" / "run_config.yaml")
    # the loss's settings (the Distiller is given the loss they build)
    from distill.config import settings_from
    from distill.loss_settings import LossSettings
    assert settings_from(LossSettings, tmp_path / "kd" / "run_config.yaml") == LossSettings(
        temperature=3.0, distill_weight=0.7, teacher_mistakes="shift")


def test_every_pseudo_label_setting_replays_into_the_api_exactly(tiny_classifier_teacher, tmp_path):
    """pseudo-label's options are spelled otherwise than two of its fields (--logits: with_logits, --no-cache: not
    use_cache): OUTPUT.config.yaml reads back into the settings the command ran with."""
    from distill.config import settings_from
    from distill.pseudo_label import PseudoLabelSettings
    output = tmp_path / "labels.jsonl"
    cli("pseudo-label", "--teacher", tiny_classifier_teacher, "--input", SAMPLES / "unlabeled_movies.txt",
        "--output", output, "--batch-size", "8", "--chunk-size", "16", "--min-confidence", "0.2", "--logits",
        "--no-cache", "--quiet")
    expected = PseudoLabelSettings(batch_size=8, chunk_size=16, min_confidence=0.2, with_logits=True, use_cache=False)
    assert settings_from(PseudoLabelSettings, Path(f"{output}.config.yaml")) == expected
