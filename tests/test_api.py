"""The Python API: the same models as the CLI, the registry, from_pretrained, light imports."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from distill import (DistillError, Distiller, LabelModel, LSTMClassifier, Output, Runtime, Teacher, TeacherConfig,
                     TeacherStudentDistill, TrainSettings, student_config, train_student)
from distill.io import load_tensors
from distill.labels import LabelHierarchy
from distill.models.students import build_student
from distill.trainers import new_student
from tests.conftest import ROOT, SAMPLES, cli, config_for

QUIET = Runtime(device="cpu", threads=1, progress=False)
TINY = {"embedding_dim": 16, "hidden_dim": 16, "dropout": 0.0}


def rows(path) -> tuple[list[str], list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        records = list(csv.DictReader(handle))
    return [r["text"] for r in records], [r["label"] for r in records]


def assert_same_weights(directory_a, directory_b) -> None:
    a, b = load_tensors(directory_a / "model.safetensors"), load_tensors(directory_b / "model.safetensors")
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_cli_and_api_give_identical_models(tiny_classifier_teacher, tmp_path):
    """kd and student from the CLI on files, and from Python on examples in memory: the same weights."""
    files = ["--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv"]
    sizes = ["--embedding-dim", "16", "--hidden-dim", "16", "--dropout", "0", "--epochs", "2", "--seed", "7"]
    cli("--threads", "1", "kd", "--teacher", tiny_classifier_teacher, "--model", "lstm", *files, "--unlabeled",
        SAMPLES / "unlabeled_movies.txt", "--temperature", "3", "--cache-dir", tmp_path / "cache", *sizes, "--quiet",
        "--output", tmp_path / "cli-kd")
    cli("--threads", "1", "student", "--model", "lstm", *files, *sizes, "--quiet", "--output", tmp_path / "cli-student")
    train, dev = rows(SAMPLES / "sentiment_train.csv"), rows(SAMPLES / "sentiment_dev.csv")
    unlabeled = (SAMPLES / "unlabeled_movies.txt").read_text(encoding="utf-8").splitlines()
    config, settings = student_config("lstm", **TINY), TrainSettings(epochs=2, seed=7)
    distiller = Distiller(Teacher.from_pretrained(tiny_classifier_teacher), config,
                          TeacherStudentDistill(temperature=3.0), settings, cache_dir=tmp_path / "cache", env=QUIET)
    distiller.fit(train, dev, unlabeled).model.save_pretrained(tmp_path / "api-kd")
    train_student(config, train, dev, settings, env=QUIET).model.save_pretrained(tmp_path / "api-student")
    assert_same_weights(tmp_path / "cli-kd", tmp_path / "api-kd")
    assert_same_weights(tmp_path / "cli-student", tmp_path / "api-student")


def test_kd_inverse_class_weights_come_from_its_own_training_data(tiny_classifier_teacher):
    """The kd student was built on the teacher's label set as it stood, counts included: `inverse` weighted by
    the teacher's training counts (uniform here), not by the data kd trains on (three positives per negative)."""
    from collections import Counter
    texts, labels = rows(SAMPLES / "sentiment_train.csv")
    positives = [(text, label) for text, label in zip(texts, labels) if label == "positive"]
    texts, labels = texts + [t for t, _ in positives] * 2, labels + [label for _, label in positives] * 2
    distiller = Distiller(Teacher.from_pretrained(tiny_classifier_teacher), student_config("lstm", **TINY),
                          settings=TrainSettings(epochs=1), class_weights="inverse", teacher_embeddings=False,
                          env=QUIET)
    model = distiller.fit((texts, labels), rows(SAMPLES / "sentiment_dev.csv")).model
    assert model.hierarchy.counts == Counter(labels)
    weights = distiller.loss_for(model).class_weights.tolist()
    assert distiller.loss.class_weights is None  # the run's loss is a copy: the one given keeps its own
    counts = Counter(labels)
    assert weights == pytest.approx([2 / (1 + counts["negative"] / counts["positive"]),
                                     2 / (1 + counts["positive"] / counts["negative"])])


def test_kd_follows_the_label_order_of_a_teacher_saved_before_todays_order(tiny_tagging_teacher):
    """A lower-case tag set now puts `o` first; a teacher saved before keeps its order, and kd refused it
    ("label sets differ", the same sets). The student takes the teacher's order, which its logits follow;
    class weights given as numbers stay in the documented order (sorted, O first) and follow their labels."""
    from distill.labels import LabelHierarchy
    teacher = Teacher.from_pretrained(tiny_tagging_teacher)
    documented = list(teacher.hierarchy.labels)  # as a build orders them today: 'O' first
    old = [*documented[1:], documented[0]]  # 'O' last, as no build makes it today
    teacher.hierarchy = LabelHierarchy(old, None, teacher.hierarchy.counts, teacher.hierarchy.scheme)
    tagger = student_config("lstm-tagger", embedding_dim=8, hidden_dim=8)
    train, dev = str(SAMPLES / "ner_train.conll"), str(SAMPLES / "ner_dev.conll")
    losses = []

    class Recording(Distiller):  # keeps the loss the run asks for, and trains with
        def loss_for(self, *args):
            losses.append(super().loss_for(*args))
            return losses[-1]
    weights = [float(i + 1) for i in range(len(documented))]  # one number per label, in the documented order
    model = Recording(teacher, tagger, settings=TrainSettings(epochs=1), teacher_embeddings=False, env=QUIET,
                      class_weights=weights).fit(train, dev).model
    assert model.hierarchy.labels == old
    assert losses[0].class_weights.tolist() == [documented.index(label) + 1.0 for label in old]
    ordered = train_student(tagger, train, dev, TrainSettings(epochs=1), env=QUIET).model  # 'O' first
    with pytest.raises(DistillError, match="are in another order than the teacher's"):
        Distiller(teacher, ordered, settings=TrainSettings(epochs=1), env=QUIET).fit(train, dev)


def test_api_run_with_output_writes_what_the_cli_writes(tmp_path):
    from distill.trainers import Output
    result = train_student("cnn", SAMPLES / "sentiment_train.csv", SAMPLES / "sentiment_dev.csv",
                           TrainSettings(epochs=1), output=Output(tmp_path / "run"), env=QUIET)
    assert {"distill.json", "metrics.jsonl", "train_summary.json", "model.safetensors"} <= set(os.listdir(tmp_path / "run"))
    assert result.best["epoch"] == 1 and json.loads((tmp_path / "run" / "train_summary.json").read_text())["model"] == "cnn"
    with pytest.raises(DistillError, match="already holds a student model"):
        train_student("cnn", SAMPLES / "sentiment_train.csv", SAMPLES / "sentiment_dev.csv", TrainSettings(epochs=1),
                      output=Output(tmp_path / "run"), env=QUIET)


def test_a_run_never_replaces_the_directory_of_a_model_given_in_memory(tiny_classifier_teacher, tmp_path,
                                                                       monkeypatch):
    """The CLI refuses an --output that is its --teacher even with --overwrite; the API, given the teacher
    (or the student to train on) loaded in memory, replaced that model's directory with the new student."""
    import shutil
    from tests.conftest import snapshot
    train, dev = SAMPLES / "sentiment_train.csv", SAMPLES / "sentiment_dev.csv"
    teacher_dir = shutil.copytree(tiny_classifier_teacher, tmp_path / "teacher")
    train_student(student_config("lstm", **TINY), train, dev, TrainSettings(epochs=1), env=QUIET,
                  output=Output(tmp_path / "student"))
    before = snapshot(tmp_path)
    monkeypatch.chdir(tmp_path)  # loaded by a relative path, then the working folder changes
    teacher, student = Teacher.from_pretrained("teacher"), LabelModel.from_pretrained("student")
    monkeypatch.chdir(ROOT)
    for model, target in ((teacher, teacher_dir), (student, tmp_path / "student")):
        with pytest.raises(DistillError, match="is an input of this command"):
            Distiller(teacher, model if model is student else student_config("lstm", **TINY), env=QUIET,
                      settings=TrainSettings(epochs=1), teacher_embeddings=False).fit(
                train, dev, output=Output(target, overwrite=True))
        with pytest.raises(DistillError, match="lies inside"):
            train_student(student, train, dev, TrainSettings(epochs=1), teacher_embeddings=teacher, env=QUIET,
                          output=Output(target / "sub"))
    assert snapshot(tmp_path) == before


def test_datasets_with_class_label_and_bad_examples():
    from datasets import ClassLabel, Dataset, Features, Value
    from distill.data import labelled_examples
    features = Features({"text": Value("string"), "label": ClassLabel(names=["neg", "pos"])})
    data = labelled_examples(Dataset.from_dict({"text": ["good", "bad"], "label": [1, 0]}, features=features),
                             "classification")
    assert data.labels == ["pos", "neg"] and data.source.startswith("memory:")
    with pytest.raises(DistillError, match="2 examples but 1 labels"):
        labelled_examples((["a", "b"], ["x"]), "classification")
    with pytest.raises(DistillError, match="one tag per token"):
        labelled_examples(([["a", "b"]], [["O"]]), "tagging")
    with pytest.raises(DistillError, match="not a non-empty text"):
        labelled_examples(([""], ["x"]), "classification")


def test_a_dataframe_and_a_list_of_dicts_train_what_a_pair_of_lists_trains():
    """Classification from a pandas DataFrame and a list of dicts, read from the columns DataOptions names:
    the same student, weight for weight, as from (texts, labels)."""
    import pandas as pd
    from distill import DataOptions
    (texts, labels), dev = rows(SAMPLES / "sentiment_train.csv"), rows(SAMPLES / "sentiment_dev.csv")
    frame = pd.DataFrame({"review": texts, "sentiment": labels, "stars": range(len(texts))})
    records = [{"review": text, "sentiment": label} for text, label in zip(*dev)]
    columns = DataOptions(text_column="review", label_column="sentiment")
    config, settings = student_config("lstm", **TINY), TrainSettings(epochs=1, seed=3)
    tables = train_student(config, frame, records, settings, data=columns, env=QUIET).model
    pairs = train_student(config, (texts, labels), dev, settings, env=QUIET).model
    assert all(torch.equal(a, b) for a, b in zip(tables.state_dict().values(), pairs.state_dict().values()))


def test_tagging_tables_read_tokens_and_tags():
    import numpy as np
    import pandas as pd
    from distill.data import labelled_examples, read_tagging, unlabeled_examples
    read = read_tagging(str(SAMPLES / "ner_dev.conll"))
    tokens, tags = list(read["tokens"]), list(read["tags"])
    pair = labelled_examples((tokens, tags), "tagging")
    records = [{"tokens": t, "tags": g, "id": i} for i, (t, g) in enumerate(zip(tokens, tags))]
    frame = pd.DataFrame({"tokens": [np.array(t) for t in tokens], "tags": tags})  # arrays, as parquet gives
    for table in (records, frame):
        assert labelled_examples(table, "tagging").labels == pair.labels
        assert labelled_examples(table, "tagging").inputs == unlabeled_examples(table, "tagging").inputs == tokens
    train = read_tagging(str(SAMPLES / "ner_train.conll"))
    train = [{"tokens": t, "tags": g} for t, g in zip(train["tokens"], train["tags"])]
    tagger = student_config("lstm-tagger", embedding_dim=8, hidden_dim=8)
    result = train_student(tagger, train, frame, TrainSettings(epochs=1), env=QUIET)
    assert result.summary["train_examples"] == len(train)


@pytest.mark.parametrize("table, task, message", [
    ([{"text": "good", "label": "pos"}, {"review": "bad", "label": "neg"}], "classification",
     r"train: example 1 has no key 'text' \(keys: review, label\); name them with DataOptions"),
    ([{"tokens": ["Mina"], "ner": ["B-PER"]}], "tagging",
     r"train: example 0 has no key 'tags' \(keys: tokens, ner\); a tagging table has a 'tokens' and a 'tags' column"),
    ([{"text": "good", "label": "pos"}, "bad"], "classification", "example 1 is a str, not a dict as the first one"),
])
def test_a_list_of_dicts_missing_a_column_is_named(table, task, message):
    from distill.data import labelled_examples
    with pytest.raises(DistillError, match=message):
        labelled_examples(table, task, name="train")


def test_a_dataframe_missing_a_column_is_named():
    import pandas as pd
    from distill.data import labelled_examples
    with pytest.raises(DistillError, match=r"dev: no column 'label' \(columns: text, stars\)"):
        labelled_examples(pd.DataFrame({"text": ["good"], "stars": [5]}), "classification", name="dev")


def test_predict_and_evaluate_take_what_fit_takes(tiny_classifier_teacher):
    import pandas as pd
    from datasets import Dataset
    from distill import DataOptions, evaluate
    teacher = Teacher.from_pretrained(tiny_classifier_teacher)
    texts, labels = rows(SAMPLES / "sentiment_dev.csv")
    frame = pd.DataFrame({"review": texts, "sentiment": labels})
    columns = DataOptions(text_column="review", label_column="sentiment")
    predicted = teacher.predict(texts)
    for table in (frame, frame.to_dict("records"), Dataset.from_pandas(frame)):
        assert teacher.predict(table, data=columns) == predicted
        assert evaluate(teacher, table, data=columns) == evaluate(teacher, texts, labels)
    assert evaluate(teacher, str(SAMPLES / "sentiment_dev.csv")) == evaluate(teacher, (texts, labels))
    with pytest.raises(DistillError, match="examples: no column 'text' \\(columns: review, sentiment\\)"):
        teacher.predict(frame)


def test_old_spellings_work_for_one_release_with_a_deprecation_warning(tiny_classifier_teacher):
    """The API speaks the CLI's words: unlabeled (--unlabeled, unlabeled_ratio), and settings= for every
    entry point's training settings."""
    from distill import TaskData, TeacherTraining, train_multitask_teacher, train_teacher
    train, dev = rows(SAMPLES / "sentiment_train.csv"), rows(SAMPLES / "sentiment_dev.csv")
    movies = (SAMPLES / "unlabeled_movies.txt").read_text(encoding="utf-8").splitlines()[:20]
    distiller = Distiller(Teacher.from_pretrained(tiny_classifier_teacher), student_config("lstm", **TINY),
                          settings=TrainSettings(epochs=1), teacher_embeddings=False, env=QUIET)
    with pytest.warns(DeprecationWarning, match="Distiller.fit: unlabelled= is deprecated, use unlabeled="):  # renamed
        result = distiller.fit(train, dev, unlabelled=movies)  # renamed
    assert result.summary["unlabeled_examples"] == 20
    with pytest.warns(DeprecationWarning, match=r"\['unlabelled_examples'\] is deprecated, use \['unlabeled_"):  # renamed
        assert result.summary["unlabelled_examples"] == 20  # renamed
    with pytest.raises(DistillError, match="unlabelled= is the old name of unlabeled=: give unlabeled= alone"):  # renamed
        distiller.fit(train, dev, movies, unlabelled=movies)  # renamed
    # a teacher's settings: settings= too (checked, and refused here, before anything trains)
    for call in (lambda **kw: train_teacher(train, dev, **kw),
                 lambda **kw: train_multitask_teacher([TaskData("sentiment", "classification", train, dev)], **kw)):
        with pytest.warns(DeprecationWarning, match="training= is deprecated, use settings="), \
                pytest.raises(DistillError, match="settings must be of type TeacherTraining"):
            call(training=TrainSettings())
        with pytest.raises(DistillError, match="give settings= alone"):
            call(training=TeacherTraining(), settings=TeacherTraining())


def test_building_a_student_leaves_the_global_random_state_alone():
    state = torch.get_rng_state()
    first = new_student("lstm", LabelHierarchy(["a", "b"]), ["one text", "another"], seed=3)
    assert torch.equal(torch.get_rng_state(), state)
    second = new_student("lstm", LabelHierarchy(["a", "b"]), ["one text", "another"], seed=3)
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values()))


def test_runtime_settings_apply_for_the_run_only():
    from distill import precision
    threads = torch.get_num_threads()
    train_student("cnn", rows(SAMPLES / "sentiment_train.csv"), rows(SAMPLES / "sentiment_dev.csv"),
                  TrainSettings(epochs=1), env=Runtime(device="cpu", threads=1 if threads > 1 else 2,
                                                       precision="fp32", progress=False))
    assert torch.get_num_threads() == threads and precision.current() == "fp32"


def test_from_pretrained_checks_kind_and_config(tiny_classifier_teacher, tmp_path):
    with pytest.raises(DistillError, match="is a teacher directory, expected a student"):
        LSTMClassifier.from_pretrained(tiny_classifier_teacher)
    assert isinstance(LabelModel.from_pretrained(tiny_classifier_teacher), Teacher)
    model = build_student(student_config("cnn", embedding_dim=8), LabelHierarchy(["a", "b"]), ["x y", "z"])
    model.save_pretrained(tmp_path / "cnn")
    with pytest.raises(DistillError, match="holds a CNNClassifier, not a LSTMClassifier"):
        LSTMClassifier.from_pretrained(tmp_path / "cnn")
    config = json.loads((tmp_path / "cnn" / "config.json").read_text())
    config["config"]["hidden_dim"] = 5  # a key this model does not have: an error, never dropped
    (tmp_path / "cnn" / "config.json").write_text(json.dumps(config))
    card = json.loads((tmp_path / "cnn" / "distill.json").read_text())
    from distill.io import file_sha256
    card["sha256"]["config.json"] = file_sha256(tmp_path / "cnn" / "config.json")
    (tmp_path / "cnn" / "distill.json").write_text(json.dumps(card))
    with pytest.raises(DistillError, match="unknown setting.s. hidden_dim for CNNClassifierConfig"):
        LabelModel.from_pretrained(tmp_path / "cnn")
    card["format_version"] = 99
    (tmp_path / "cnn" / "distill.json").write_text(json.dumps(card))
    with pytest.raises(DistillError, match="format version 99 is newer"):
        LabelModel.from_pretrained(tmp_path / "cnn")


def test_student_config_refuses_settings_the_student_lacks():
    with pytest.raises(DistillError, match="has no setting.s. hidden_dim"):
        student_config("cnn", hidden_dim=10)


def test_cli_refuses_an_option_the_chosen_student_lacks(tmp_path, capsys):
    from procedures.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main(["student", "--model", "cnn", "--hidden-dim", "10", "--train", str(SAMPLES / "sentiment_train.csv"),
              "--dev", str(SAMPLES / "sentiment_dev.csv"), "--output", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert "cnn has no such setting; --hidden-dim is for lstm, lstm-tagger" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env={**os.environ, **env}, cwd=ROOT, timeout=300)


def test_importing_the_package_and_its_models_is_light():
    done = run_python("""
        import sys
        import distill
        from distill import LSTMClassifier, TeacherStudentDistill, register_student, Distiller
        print(sorted(m for m in ("datasets", "pandas", "click", "procedures", "sklearn", "seqeval")
                     if m in sys.modules))
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_plugin_student_from_an_entry_point_trains_and_loads_through_the_cli(tmp_path):
    """A package announcing a student under `distill.students` gets `--model NAME` and its options."""
    site = tmp_path / "site"
    (site / "tinybag_plugin-0.1.dist-info").mkdir(parents=True)
    (site / "tinybag_plugin-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: tinybag-plugin\n"
                                                                   "Version: 0.1\n")
    (site / "tinybag_plugin-0.1.dist-info" / "entry_points.txt").write_text(
        "[distill.students]\ntinybag = tinybag_plugin\n")
    source = (ROOT / "examples" / "bag_student.py").read_text()
    (site / "tinybag_plugin.py").write_text(source.replace('"bag"', '"tinybag"'))
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "procedures.cli", "--threads", "1"]
    shown = subprocess.run([*command, "student", "--help"], capture_output=True, text=True, env={**os.environ, **env},
                           timeout=300)
    assert "tinybag (classification)" in " ".join(shown.stdout.split()), shown.stderr
    trained = subprocess.run([*command, "student", "--model", "tinybag", "--embedding-dim", "12", "--epochs", "1",
                              "--quiet", "--train", str(SAMPLES / "sentiment_train.csv"), "--dev",
                              str(SAMPLES / "sentiment_dev.csv"), "--output", str(tmp_path / "bag")],
                             capture_output=True, text=True, env={**os.environ, **env}, timeout=300)
    assert trained.returncode == 0, trained.stderr
    card = json.loads((tmp_path / "bag" / "distill.json").read_text())
    assert (card["model"], card["class"]) == ("tinybag", "tinybag_plugin:BagOfEmbeddings")
    predicted = subprocess.run([*command, "predict", str(tmp_path / "bag")], input="a fine film\n",
                               capture_output=True, text=True, env={**os.environ, **env}, timeout=300)
    assert predicted.returncode == 0, predicted.stderr
    assert json.loads(predicted.stdout)["label"] in ("negative", "positive")


def test_save_pretrained_keeps_to_the_output_rules(tmp_path, tiny_classifier_teacher):
    """`save_pretrained` refuses what `nlp-train` refuses: a teacher's encoder folder (inside a model), a
    folder of the user's files, a model without overwrite; with overwrite the old model comes back if
    writing fails."""
    import shutil
    student = build_student(config_for("lstm", embedding_dim=8, hidden_dim=8), LabelHierarchy(["neg", "pos"]),
                            ["good film", "bad film"])
    teacher = tmp_path / "teacher"
    shutil.copytree(tiny_classifier_teacher, teacher)
    encoder_config = (teacher / "encoder" / "config.json").read_bytes()
    with pytest.raises(DistillError, match="lies inside the model directory"):
        student.save_pretrained(teacher / "encoder")
    assert (teacher / "encoder" / "config.json").read_bytes() == encoder_config
    Teacher.from_pretrained(teacher)  # still whole
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text("my settings")
    with pytest.raises(DistillError, match="is not empty and holds no distill model"):
        student.save_pretrained(mine)
    assert (mine / "config.json").read_text() == "my settings"
    saved = student.save_pretrained(tmp_path / "s")
    with pytest.raises(DistillError, match="already holds a student model"):
        student.save_pretrained(saved)
    before = {p.name: p.read_bytes() for p in saved.iterdir()}

    def broken(directory, **extra):
        raise OSError("disk full")
    other = build_student(config_for("lstm", embedding_dim=8, hidden_dim=4), LabelHierarchy(["neg", "pos"]),
                          ["good film"])
    other.write_files = broken
    with pytest.raises(OSError):
        other.save_pretrained(saved, overwrite=True)
    assert {p.name: p.read_bytes() for p in saved.iterdir()} == before
    del other.write_files
    other.save_pretrained(saved, overwrite=True)
    assert LSTMClassifier.from_pretrained(saved).config.hidden_dim == 4


def test_save_pretrained_refuses_a_path_that_names_no_folder(tmp_path, monkeypatch):
    """save_pretrained('') wrote the model into the working folder (refused only when that held other files);
    save_pretrained(None) was os.fspath's TypeError."""
    student = build_student(config_for("lstm", embedding_dim=8, hidden_dim=8), LabelHierarchy(["neg", "pos"]),
                            ["good film", "bad film"])
    monkeypatch.chdir(tmp_path)
    for blank in ("", "  "):
        with pytest.raises(DistillError, match="an empty or blank path names no folder"):
            student.save_pretrained(blank)
    with pytest.raises(DistillError, match="give the model's output directory as a path, not NoneType"):
        student.save_pretrained(None)
    assert list(tmp_path.iterdir()) == []


def test_from_pretrained_refuses_a_path_that_names_no_folder(tiny_student, monkeypatch):
    """from_pretrained('') and load_model('') loaded whatever model the working folder held, where save_pretrained('')
    and nlp-train refuse the blank path."""
    from distill.models import load_model, model_card
    monkeypatch.chdir(tiny_student)
    for blank in ("", "  "):
        for read in (LSTMClassifier.from_pretrained, LabelModel.from_pretrained, load_model, model_card):
            with pytest.raises(DistillError, match=f"^model directory {blank!r}: an empty or blank path names no "
                                                   "folder"):
                read(blank)


def test_predict_and_evaluate_refuse_what_they_cannot_read():
    """A string alone was read as one example per character; numbers failed in the tokenizer; an empty
    list failed in torch.stack; gold labels the model lacks were scored as plain misses."""
    from distill import evaluate
    from distill.inference import prediction_records
    student = build_student(config_for("lstm", embedding_dim=8, hidden_dim=8), LabelHierarchy(["neg", "pos"]),
                            ["good film", "bad film"]).eval()
    with pytest.raises(DistillError, match="not one string"):
        student.predict("a quietly devastating film")
    from datasets import Dataset  # a slice or a row is a dict of columns: its keys were predicted
    rows = Dataset.from_list([{"text": "good film", "label": "pos"}, {"text": "bad film", "label": "neg"}])
    for mapping in (rows[:2], rows[0]):
        for call in (student.predict, lambda examples: list(prediction_records(student, examples)),
                     lambda examples: evaluate(student, examples, ["pos", "neg"])):
            with pytest.raises(DistillError, match=r"not a mapping of text, label .*dataset\['text'\]"):
                call(mapping)
    with pytest.raises(DistillError, match=r"not a mapping .*dataset\['label'\]"):
        evaluate(student, rows["text"], rows[:2])
    assert evaluate(student, rows["text"], rows["label"])["accuracy"] in (0.0, 0.5, 1.0)
    with pytest.raises(DistillError, match=r"examples: example 1 is not a non-empty text: 2"):
        student.predict(["good", 2])
    with pytest.raises(DistillError, match=r"examples: example 0 is not a non-empty text: ' '"):
        student.predict([" "])
    assert student.predict([]) == [] and list(prediction_records(student, [])) == []
    assert len(student.predict(("good", "bad"))) == 2
    with pytest.raises(DistillError, match="2 examples but 1 gold labels"):
        evaluate(student, ["good", "bad"], ["pos"])
    with pytest.raises(DistillError, match="'neutral' is not one of the model's labels"):
        evaluate(student, ["good", "bad"], ["pos", "neutral"])
    tagger = build_student(config_for("lstm-tagger", embedding_dim=8, hidden_dim=8), LabelHierarchy(["O", "B-PER"]),
                           [["Mina", "spoke"]]).eval()
    for example in ("Mina spoke", [], ["Mina", ""]):
        with pytest.raises(DistillError, match="example 0 is not a non-empty list of tokens"):
            tagger.predict([example])


@pytest.mark.parametrize("make, message", [
    (lambda: TrainSettings(epochs=0), "epochs must be a whole number >= 1, got 0"),
    (lambda: TrainSettings(batch_size=-1), "batch_size must be a whole number >= 1, got -1"),
    (lambda: TrainSettings(epochs="1"), "epochs must be a whole number >= 1, got '1'"),
    (lambda: TrainSettings(lr="0.01"), r"lr must be a number in \(0, 1\], got '0.01'"),
    (lambda: TrainSettings(lr=float("nan")), "lr must be a number"),
    (lambda: TrainSettings(max_grad_norm=float("inf")), r"max_grad_norm must be a number in \[0, inf\), got inf"),
    (lambda: TrainSettings(seed=-1), "seed must be a whole number from 0"),
    (lambda: TrainSettings(select_metric="nope"), r"select_metric must be a metric's name \(accuracy, macro_precision"),
    (lambda: TrainSettings(select_metric=["f1"]), "select_metric must be a metric's name"),
    (lambda: Runtime(threads="2"), "threads must be a whole number"),
    (lambda: Runtime(device="tpu"), "unknown device 'tpu'"),
    (lambda: __import__("distill").TeacherTraining(epochs=0), "epochs must be a whole number"),
    (lambda: __import__("distill").TeacherTraining(warmup=1.5), r"warmup must be a number in \[0, 1\]")])
def test_run_settings_refuse_what_the_cli_refuses(make, message):
    """The API's settings were taken as given: epochs=0 returned an untrained model as a success."""
    with pytest.raises(DistillError, match=message):
        make()


@pytest.mark.parametrize("setting", [{"temperature": "2"}, {"temperature": float("nan")}, {"distill_weight": None},
                                     {"min_confidence": float("inf")}])
def test_loss_settings_must_be_finite_numbers(setting):
    with pytest.raises(DistillError, match="must be a finite number"):
        TeacherStudentDistill(**setting)


def test_a_plugin_module_that_fails_as_it_imports_is_a_clear_error(tmp_path, monkeypatch):
    from distill.models.registry import student_entry
    (tmp_path / "boomplug.py").write_text('raise RuntimeError("boom at import")\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(DistillError, match=r"student model 'boomplug:X': cannot import it \(RuntimeError: boom at import\)"):
        student_entry("boomplug:X")


PLUGIN_FORWARDS = {
    "wideplug": ("return self.classifier(self.embedding(word_ids)).repeat(1, 2)",
                 r"student 'wideplug:Plugin' returns logits of shape \(2, 4\) for 2 examples; classification with 2 "
                 r"labels needs \(examples, labels\) = \(2, 2 or 1\)"),
    "nanplug": ("return self.classifier(self.embedding(word_ids)) * float('nan')",
                "student 'nanplug:Plugin' returns nan or infinite logits before any training step"),
    "buggyplug": ("raise KeyError('no such word')",
                  r"student 'buggyplug:Plugin' fails on its first training examples: KeyError: 'no such word'"),
    "emptyplug": ("return torch.zeros(word_ids.size(0), 2)",
                  "student 'emptyplug:Plugin' has no trainable parameters"),
}


@pytest.mark.parametrize("name", PLUGIN_FORWARDS)
def test_a_plugin_student_whose_output_cannot_be_scored_is_refused_before_it_trains(name, tmp_path, monkeypatch):
    """Checked on two training examples first, not found after an epoch inside the dev metrics."""
    body, message = PLUGIN_FORWARDS[name]
    layers = "" if name == "emptyplug" else (
        "self.embedding = nn.EmbeddingBag(len(words), 4, mode='mean', padding_idx=0)\n"
        "        self.classifier = nn.Linear(4, self.outputs)")
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(f"""\
        from dataclasses import dataclass
        import torch
        from torch import nn
        from distill import ClassifierConfig, StudentModel, register_student

        @dataclass
        class Config(ClassifierConfig):
            model: str = "{name}"

        @register_student("{name}", task="classification")
        class Plugin(StudentModel):
            config_class = Config
            def __init__(self, config, hierarchy, words, chars=None):
                super().__init__(config, hierarchy, words)
        """) + f"        {layers}\n" + f"    def forward(self, word_ids, lengths):\n        {body}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from distill.models import registry
    monkeypatch.setattr(registry, "_STUDENTS", registry._STUDENTS.copy())  # the plugin leaves the registry as it was
    with pytest.raises(DistillError, match=message):
        train_student(f"{name}:Plugin", str(SAMPLES / "sentiment_train.csv"), str(SAMPLES / "sentiment_dev.csv"),
                      TrainSettings(epochs=1), env=Runtime(progress=False))


def test_a_built_in_name_is_refused_at_the_plugins_decorator_before_any_listing():
    """Built-in students in modules imported on first listing (ngram, transformer) lost their name to a plugin
    registered before: the error came from the built-in module, and the registry was left without them."""
    script = textwrap.dedent("""\
        from dataclasses import dataclass
        from distill import ClassifierConfig, DistillError, StudentModel, register_student, students

        @dataclass
        class Config(ClassifierConfig):
            model: str = "ngram"

        try:
            @register_student("ngram", task="classification")
            class Mine(StudentModel):
                config_class = Config
        except DistillError as error:
            print("refused:", error)
        print(sorted(students()), students()["ngram"].source)
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: student name 'ngram' is already registered by distill.models.ngram:NgramClassifier" in done.stdout
    assert "'transformer', 'transformer-tagger'" in done.stdout and done.stdout.strip().endswith(
        "distill.models.ngram:NgramClassifier"), done.stdout


@pytest.mark.parametrize("make, message", [
    (lambda: Output("runs/x", overwrite="no"), "overwrite must be True or False, got 'no'"),
    (lambda: Output("runs/x", resume=1), "resume must be True or False, got 1"),
    (lambda: Distiller("runs/t", "lstm", online_teacher="no"), "online_teacher must be True or False, got 'no'"),
    (lambda: Distiller("runs/t", "lstm", teacher_embeddings="no"), "teacher_embeddings must be True or False"),
    (lambda: Distiller("runs/t", "lstm", unlabeled_ratio="1"), r"unlabeled_ratio must be a number in \(0, inf\)"),
    (lambda: Distiller("runs/t", "lstm", loss="kl"), "loss must be of type TeacherStudentDistill"),
    (lambda: Distiller("runs/t", "lstm", env=None), "env must be of type Runtime, e.g. Runtime"),
    (lambda: train_student("lstm", "a.csv", "b.csv", output="runs/x"),
     r'output must be of type Output, e.g. Output\("runs/x"\); got str'),
    (lambda: train_student("lstm", "a.csv", "b.csv", data="text"), "data must be of type DataOptions"),
    (lambda: LabelModel.from_pretrained(None), r"give a model directory \(a path\), not NoneType"),
], ids=["overwrite-string", "resume-int", "online-string", "embeddings-string", "ratio-string", "loss-string",
        "env-none", "output-string", "data-string", "directory-none"])
def test_api_settings_of_the_wrong_kind_are_refused_by_name(make, message):
    """A string flag is truthy (overwrite="no" would replace a model); an object of the wrong class would
    fail deep inside on a missing attribute."""
    with pytest.raises(DistillError, match=message):
        make()


def test_save_pretrained_takes_overwrite_as_a_flag_only(tmp_path):
    student = build_student(config_for("lstm", embedding_dim=8, hidden_dim=8), LabelHierarchy(["neg", "pos"]),
                            ["good film"])
    student.save_pretrained(tmp_path / "m")
    before = (tmp_path / "m" / "distill.json").read_bytes()
    with pytest.raises(DistillError, match="overwrite must be True or False, got 'false'"):
        student.save_pretrained(tmp_path / "m", overwrite="false")
    assert (tmp_path / "m" / "distill.json").read_bytes() == before


@pytest.mark.parametrize("settings, message", [
    ({"pooling": "max"}, "pooling must be one of auto, first, mean, got 'max'"),
    ({"pre_classifier": "false"}, "pre_classifier must be True or False, got 'false'"),
    ({"max_length": 3}, "max_length must be a whole number >= 8, got 3"),
    ({"max_length": "32"}, "max_length must be a whole number >= 8, got '32'"),
    ({"dropout": 1.5}, r"dropout must be a number in \[0.0, 1.0\], got 1.5"),
    ({"dropout": 1.0}, "dropout must be below 1"),
    ({"task": "ner"}, "task must be classification or tagging, got 'ner'"),
    ({"long_inputs": "slide"}, "long_inputs must be one of truncate, windows, got 'slide'"),
    ({"max_windows": 0}, "max_windows must be a whole number >= 1, got 0"),
])
def test_teacher_config_takes_what_the_cli_takes(settings, message):
    """pooling="max" trained with the first token's state and recorded "max"."""
    with pytest.raises(DistillError, match=message):
        TeacherConfig(**settings)


def test_gold_labels_are_read_as_training_labels_are():
    from distill import evaluate
    student = build_student(config_for("lstm", embedding_dim=8, hidden_dim=8), LabelHierarchy(["0", "1"]),
                            ["good film", "bad film"]).eval()
    assert evaluate(student, ["good", "bad"], [1, 0])["accuracy"] == evaluate(student, ["good", "bad"], ["1", "0"])[
        "accuracy"]
    for gold in ([None, "1"], [["1"], "0"]):
        with pytest.raises(DistillError, match="must be a string or a finite number"):
            evaluate(student, ["good", "bad"], gold)


@pytest.mark.parametrize("size", [0, -1, 1.5, True])
def test_inference_batch_sizes_are_checked_where_they_enter(size):
    """A batch size of 0 failed in `range`, -1 on a None slice, 1.5 as a float index: now one message, as
    `TrainSettings` gives, also where there is nothing to predict."""
    from distill import evaluate, predict_logits, prediction_records
    from distill.inference import length_sorted_batches
    student = build_student(config_for("lstm", embedding_dim=8, hidden_dim=8), LabelHierarchy(["neg", "pos"]),
                            ["good film", "bad film"]).eval()
    for call in (lambda: student.predict(["good"], batch_size=size), lambda: student.predict([], batch_size=size),
                 lambda: evaluate(student, ["good"], ["pos"], batch_size=size),
                 lambda: predict_logits(student, ["good"], batch_size=size),
                 lambda: list(prediction_records(student, ["good"], batch_size=size)),
                 lambda: length_sorted_batches(["good"], size)):
        with pytest.raises(DistillError, match=f"^batch_size must be a whole number >= 1, got {size!r}$"):
            call()


def test_evaluate_reads_gold_labels_from_a_generator():
    from distill import evaluate
    student = build_student(config_for("lstm", embedding_dim=8, hidden_dim=8), LabelHierarchy(["neg", "pos"]),
                            ["good film", "bad film"]).eval()
    gold = ["pos", "neg", "pos"]
    assert evaluate(student, ["good", "bad", "fine"], (label for label in gold)) == \
        evaluate(student, ["good", "bad", "fine"], gold)


@pytest.mark.parametrize("saved", [False, True])
def test_the_returned_model_is_the_best_epochs_with_or_without_an_output(monkeypatch, tmp_path, saved):
    """`TrainResult.model` is the model as of its best dev epoch (here the first of three, by a dev score that
    falls), whether the run saves to a folder or not: with a folder it was the last epoch's."""
    import distill.training
    real_evaluate, calls = distill.training.evaluate, []

    def falling(*args, **kwargs):  # epoch 1 scores 0.9, epoch 2 0.5, ...
        calls.append(1)
        return {**real_evaluate(*args, **kwargs), "accuracy": 0.9 - 0.4 * (len(calls) > 1) - 0.1 * len(calls)}

    monkeypatch.setattr(distill.training, "evaluate", falling)
    output = Output(tmp_path / "student") if saved else Output()
    result = train_student(student_config("lstm", **TINY), SAMPLES / "sentiment_train.csv",
                           SAMPLES / "sentiment_dev.csv", TrainSettings(epochs=3, patience=3, lr=0.05), env=QUIET,
                           output=output)
    assert result.best["epoch"] == 1 and len(result.history) == 3
    first = train_student(student_config("lstm", **TINY), SAMPLES / "sentiment_train.csv",
                          SAMPLES / "sentiment_dev.csv", TrainSettings(epochs=1, lr=0.05), env=QUIET).model
    for name, tensor in result.model.state_dict().items():  # the seeded run's first epoch, not its third
        assert torch.equal(tensor, first.state_dict()[name]), name
    if saved:
        on_disk = LabelModel.from_pretrained(tmp_path / "student").state_dict()
        assert all(torch.equal(tensor, on_disk[name]) for name, tensor in result.model.state_dict().items())
