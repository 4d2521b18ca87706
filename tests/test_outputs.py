"""An output never overwrites an input or another model, nor lies inside one; one run writes an output at a
time; a run that fails (bad data, a full disk, a save stopped part-way) leaves nothing half-written.
Links and non-files as outputs: test_file_safety.py; --overwrite: test_overwrite.py."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
from pathlib import Path

import pytest

from distill.models import load_model
from tests.conftest import (DEV, SAMPLES, SMALL_LSTM, TRAIN, cli, copy_of, kd_with, nlp_train, run_main, snapshot,
                            student_on, write)


def test_disk_full_leaves_no_partial_file(tmp_path):
    """A write that fails half-way (file size limit, as on a full disk) is one line, exit 2, nothing half-written."""
    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    out = tmp_path / "out"
    process = nlp_train("student", *SMALL_LSTM, "--epochs", "1", "--train", TRAIN, "--dev", DEV, "--output", out,
                        preexec_fn=limit_file_size)
    err = process.communicate(timeout=120)[1].decode()
    assert process.returncode == 2, err
    assert err.startswith("error: ") and "File too large" in err and len(err.strip().splitlines()) == 1
    assert not out.exists(), "a failed run left its output directory behind"


def test_evaluate_of_a_read_only_model_names_its_default_output(tiny_student, tmp_path, capsys, monkeypatch):
    """The error named the model folder as not writable, not the metrics file evaluate writes there by default.
    (os.access stands in for a read-only share: the tests may run as root, for whom a chmod changes nothing.)"""
    import distill.evaluation
    model = copy_of(tiny_student, tmp_path, "shared")
    real_access = os.access
    monkeypatch.setattr(distill.evaluation.os, "access",
                        lambda path, mode: real_access(path, mode) and not (Path(path) == model and mode & os.W_OK))
    status, err = run_main(capsys, "evaluate", model, SAMPLES / "sentiment_test.csv", "--quiet")
    assert status == 2 and f"{model / 'eval_metrics.json'}: not writable: evaluate writes its metrics beside" in err
    assert run_main(capsys, "evaluate", model, SAMPLES / "sentiment_test.csv", "--quiet", "--output",
                    tmp_path / "m.json")[0] == 0


# Each case: (id, build(tmp, teacher, student) -> (argv, protected path), expected fragment). The protected
# file or directory must be byte-identical afterwards.
def _data_loss_cases():
    def kd_into_teacher(t, te, st):
        teacher = copy_of(te, t, "teacher")
        return kd_with(str(teacher), teacher), teacher

    def kd_inside_teacher(t, te, st):
        teacher = copy_of(te, t, "teacher")
        return kd_with(str(teacher), teacher / "student"), teacher

    def evaluate_over_data(t, te, st):
        data = copy_of(SAMPLES / "sentiment_test.csv", t, "test.csv")
        return ["evaluate", st, data, "--output", data], data

    def evaluate_over_model_file(t, te, st):
        student = copy_of(st, t, "student")
        return ["evaluate", student, SAMPLES / "sentiment_test.csv", "--output", student / "model.safetensors"], \
            student

    def pseudo_label_over_input(t, te, st):
        corpus = copy_of(SAMPLES / "unlabeled_movies.txt", t, "movies.txt")
        return ["pseudo-label", "--teacher", te, "--input", corpus, "--output", corpus], corpus

    def pseudo_label_over_input_link(t, te, st):
        corpus = copy_of(SAMPLES / "unlabeled_movies.txt", t, "movies.txt")
        (t / "link.jsonl").symlink_to(corpus)
        return ["pseudo-label", "--teacher", te, "--input", corpus, "--output", t / "link.jsonl"], corpus

    def student_over_its_data_folder(t, te, st):
        folder = t / "data"
        folder.mkdir()
        train = copy_of(TRAIN, folder, "train.csv")
        return ["student", *SMALL_LSTM, "--train", train, "--dev", DEV, "--output", folder], folder

    def teacher_over_a_student(t, te, st):
        student = copy_of(st, t, "student")
        return ["teacher", "--task", "classification", "--encoder", Path(te) / "encoder", "--train", TRAIN, "--dev",
                DEV, "--output", student], student

    def student_over_another_model(t, te, st):
        student = copy_of(st, t, "student")
        return ["student", "--model", "cnn", "--quiet", "--train", TRAIN, "--dev", DEV, "--output", student], student

    def student_over_foreign_files(t, te, st):
        folder = t / "notes"
        folder.mkdir()
        (folder / "config.json").write_text('{"mine": true}')
        return ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", folder], folder

    def pseudo_label_over_a_csv(t, te, st):
        data = copy_of(TRAIN, t, "train.csv")
        return ["pseudo-label", "--teacher", te, "--input", SAMPLES / "unlabeled_movies.txt", "--output", data], data

    def evaluate_into_the_encoder_folder(t, te, st):
        teacher = copy_of(te, t, "teacher")
        return ["evaluate", teacher, SAMPLES / "sentiment_test.csv", "--output", teacher / "encoder" / "m.json"], \
            teacher

    def pseudo_label_into_a_pipe(t, te, st):
        os.mkfifo(t / "pipe")
        return ["pseudo-label", "--teacher", te, "--input", SAMPLES / "unlabeled_movies.txt", "--output",
                t / "pipe"], t / "pipe"

    def pseudo_label_into_another_models_encoder(t, te, st):
        other = copy_of(te, t, "other-teacher")
        return ["pseudo-label", "--teacher", te, "--input", SAMPLES / "unlabeled_movies.txt", "--output",
                other / "encoder" / "p.jsonl"], other

    def student_inside_another_model(t, te, st):
        other = copy_of(st, t, "other-student")
        return ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", other / "sub"], other

    def evaluate_over_another_models_weights(t, te, st):
        other = copy_of(st, t, "other-student")
        return ["evaluate", st, SAMPLES / "sentiment_test.csv", "--output", other / "model.safetensors"], other

    def evaluate_over_other_json(t, te, st):
        other = write(t / "settings.json", '{"keep": "me"}')
        return ["evaluate", st, SAMPLES / "sentiment_test.csv", "--output", other], other

    def evaluate_over_another_models_result(t, te, st):
        other = copy_of(st, t, "other-student")
        cli("evaluate", other, SAMPLES / "sentiment_test.csv", "--quiet")
        return ["evaluate", st, SAMPLES / "sentiment_test.csv", "--output", other / "eval_metrics.json"], other

    def evaluate_into_another_models_folder(t, te, st):
        """Was written there under the other model's own result name: taken for its score, kept as its result."""
        other = copy_of(st, t, "other-student")
        return ["evaluate", te, SAMPLES / "sentiment_test.csv", "--output", other / "eval_metrics.json"], other

    def evaluate_over_its_result_on_other_data(t, te, st):
        """The model's dev result replaced by its test result, without --overwrite."""
        model = copy_of(st, t, "student")
        cli("evaluate", model, SAMPLES / "sentiment_dev.csv", "--output", t / "results" / "r.json", "--quiet")
        return ["evaluate", model, SAMPLES / "sentiment_test.csv", "--output", t / "results" / "r.json"], \
            t / "results"

    def evaluate_over_a_training_record(t, te, st):
        other = copy_of(st, t, "other-student")
        return ["evaluate", st, SAMPLES / "sentiment_test.csv", "--output", other / "train_summary.json",
                "--overwrite"], other

    def pseudo_label_over_a_training_log(t, te, st):
        other = copy_of(st, t, "other-student")
        return ["pseudo-label", "--teacher", te, "--input", SAMPLES / "unlabeled_movies.txt", "--output",
                other / "metrics.jsonl", "--overwrite"], other

    def student_overwrite_through_a_link(t, te, st):
        student = copy_of(st, t, "v1")
        (t / "latest").symlink_to("v1")  # the usual latest -> v1 layout: --overwrite would replace the link
        return ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", t / "latest", "--overwrite"], \
            student

    def pseudo_label_into_a_dangling_link(t, te, st):
        (t / "gone.jsonl").symlink_to(t / "nowhere" / "p.jsonl")
        return ["pseudo-label", "--teacher", te, "--input", SAMPLES / "unlabeled_movies.txt", "--output",
                t / "gone.jsonl"], t / "gone.jsonl"

    def evaluate_into_a_name_the_loader_reads(t, te, st):  # a teacher folder holds no config.json
        teacher = copy_of(te, t, "teacher")
        return ["evaluate", teacher, SAMPLES / "sentiment_test.csv", "--output", teacher / "config.json"], teacher

    def pseudo_label_into_a_name_the_loader_reads(t, te, st):  # a classifier student holds no CRF
        student = copy_of(st, t, "student")
        return ["pseudo-label", "--teacher", te, "--input", SAMPLES / "unlabeled_movies.txt", "--output",
                student / "crf.safetensors"], student

    def student_overwrite_of_a_folder_of_models_and_a_log(t, te, st):  # the user's metrics.jsonl, not a run's
        folder = t / "experiments"
        folder.mkdir()
        copy_of(st, folder, "student")
        write(folder / "metrics.jsonl", '{"step": 1, "loss": 0.5}\n')
        return ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", folder, "--overwrite"], folder

    def student_overwrite_of_a_model_beside_notes(t, te, st):
        student = copy_of(st, t, "student")
        write(student / "notes.txt", "what I tried")
        write(student / "labels.json", '["positive", "negative"]')  # JSON, but no evaluate result
        return ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--output", student, "--overwrite"], student

    def kd_cache_inside_its_output(t, te, st):
        return kd_with(te, t / "kd", "--cache-dir", t / "kd" / "cache"), t

    def kd_cache_is_its_output(t, te, st):
        return kd_with(te, t / "kd", "--cache-dir", t / "kd"), t

    def kd_cache_is_the_model_it_replaces(t, te, st):  # --overwrite moves the old model there, then deletes it
        return kd_with(te, copy_of(st, t, "kd"), "--cache-dir", t / ".kd.replaced" / "logits", "--overwrite"), t

    def kd_cache_is_its_lock(t, te, st):
        return kd_with(te, t / "kd", "--cache-dir", t / ".kd.lock"), t

    return [
        ("student-overwrite-through-a-link", student_overwrite_through_a_link, "is a symbolic link (to v1)"),
        ("pseudo-label-output-is-a-dangling-link", pseudo_label_into_a_dangling_link, "which does not exist"),
        ("kd-cache-inside-its-output", kd_cache_inside_its_output, "the model this run writes"),
        ("kd-cache-is-its-output", kd_cache_is_its_output, "the model this run writes"),
        ("kd-cache-is-the-model-it-replaces", kd_cache_is_the_model_it_replaces, "uses the name .kd.replaced"),
        ("kd-cache-is-its-lock", kd_cache_is_its_lock, "uses the name .kd.lock"),
        ("kd-output-is-the-teacher", kd_into_teacher, "is an input of this command"),
        ("kd-output-inside-the-teacher", kd_inside_teacher, "lies inside"),
        ("evaluate-output-is-the-data", evaluate_over_data, "is an input of this command"),
        ("evaluate-output-is-a-model-file", evaluate_over_model_file, "is a file of the model"),
        ("pseudo-label-output-is-the-input", pseudo_label_over_input, "is an input of this command"),
        ("pseudo-label-output-links-to-the-input", pseudo_label_over_input_link, "is a symbolic link"),
        ("student-output-holds-its-data", student_over_its_data_folder, "holds"),
        ("teacher-output-holds-a-student", teacher_over_a_student, "already holds a student model"),
        ("student-output-holds-another-model", student_over_another_model, "pass --overwrite to replace it"),
        ("student-output-holds-foreign-files", student_over_foreign_files, "holds no distill model"),
        ("pseudo-label-output-is-a-csv", pseudo_label_over_a_csv, "exists and is not pseudo-label output"),
        ("evaluate-output-is-another-json", evaluate_over_other_json, "exists and is not an evaluate result"),
        ("evaluate-output-in-the-encoder-folder", evaluate_into_the_encoder_folder, "lies in a folder of the model"),
        ("pseudo-label-output-is-a-pipe", pseudo_label_into_a_pipe, "is not a regular file"),
        ("pseudo-label-output-in-another-models-encoder", pseudo_label_into_another_models_encoder,
         "lies in a folder of the model"),
        ("student-output-inside-another-model", student_inside_another_model, "lies inside the model directory"),
        ("evaluate-output-is-another-models-weights", evaluate_over_another_models_weights, "is a file of the model"),
        ("evaluate-output-is-another-models-result", evaluate_over_another_models_result,
         "which holds that model and its own evaluate results"),
        ("evaluate-output-in-another-models-folder", evaluate_into_another_models_folder,
         "which holds that model and its own evaluate results"),
        ("evaluate-output-is-its-result-on-other-data", evaluate_over_its_result_on_other_data,
         "exists and is not an evaluate result of"),
        ("evaluate-overwrite-of-a-training-record", evaluate_over_a_training_record, "is a file of the model"),
        ("student-overwrite-of-a-folder-of-models-and-a-log", student_overwrite_of_a_folder_of_models_and_a_log,
         "is not empty and holds no distill model"),
        ("student-overwrite-of-a-model-beside-notes", student_overwrite_of_a_model_beside_notes,
         "holds labels.json, which is none of the model's files"),
        ("evaluate-output-named-as-a-loaded-file", evaluate_into_a_name_the_loader_reads,
         "is a name the model's loader reads"),
        ("pseudo-label-output-named-as-a-loaded-file", pseudo_label_into_a_name_the_loader_reads,
         "is a name the model's loader reads"),
        ("pseudo-label-overwrite-of-a-training-log", pseudo_label_over_a_training_log, "is a file of the model"),
    ]


DATA_LOSS = _data_loss_cases()


@pytest.mark.parametrize("build, fragment", [c[1:] for c in DATA_LOSS], ids=[c[0] for c in DATA_LOSS])
def test_outputs_never_clobber_inputs_or_models(build, fragment, tmp_path, tiny_classifier_teacher, tiny_student,
                                                capsys):
    argv, protected = build(tmp_path, tiny_classifier_teacher, tiny_student)
    before, files = snapshot(protected), set(tmp_path.rglob("*"))
    status, err = run_main(capsys, *argv)
    assert status == 2, err
    assert fragment in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert snapshot(protected) == before, "the protected file changed"
    assert set(tmp_path.rglob("*")) == files, "the refused command wrote something"


@pytest.mark.parametrize("command, where, fragment", [
    ("kd", "teacher/encoder", "lies inside the model directory"), ("kd", "kd", "the model this run writes"),
    ("kd", ".kd.lock", "uses the name .kd.lock"), ("pseudo-label", "teacher/encoder", "lies inside the model directory"),
    ("pseudo-label", "kd.jsonl", "uses the name kd.jsonl")])
def test_the_default_cache_is_checked_as_a_cache_dir_is(command, where, fragment, tmp_path, tiny_classifier_teacher,
                                                        capsys, monkeypatch):
    """$DISTILL_CACHE moves the default logit cache; pointed into a model (or the run's own output, or a name
    beside it) it wrote shards there, and the teacher was refused from then on, as a --cache-dir there is."""
    teacher = copy_of(tiny_classifier_teacher, tmp_path, "teacher")
    monkeypatch.setenv("DISTILL_CACHE", str(tmp_path / where))
    output = tmp_path / ("kd" if command == "kd" else "kd.jsonl")
    argv = kd_with(teacher, output) if command == "kd" else \
        ["pseudo-label", "--teacher", teacher, "--input", SAMPLES / "unlabeled_movies.txt", "--output", output]
    before, files = snapshot(teacher), set(tmp_path.rglob("*"))
    status, err = run_main(capsys, *argv)
    assert status == 2 and fragment in err and "$DISTILL_CACHE/teacher-logits" in err, err
    assert len(err.strip().splitlines()) == 1 and snapshot(teacher) == before and set(tmp_path.rglob("*")) == files


def test_rerunning_a_command_replaces_only_its_own_earlier_file(tiny_student, tmp_path):
    out = tmp_path / "metrics.json"
    for _ in range(2):  # an earlier evaluate result may be replaced without --overwrite
        cli("evaluate", tiny_student, SAMPLES / "sentiment_test.csv", "--output", out, "--quiet")
    assert json.loads(out.read_text())["examples"] == 60


@pytest.mark.parametrize("command", ["student", "pseudo-label", "evaluate"])
def test_a_second_run_on_a_locked_output_is_refused(command, tiny_classifier_teacher, tiny_student, tmp_path,
                                                    capsys):
    """While one run writes an output, another run on the same output is refused, not interleaved."""
    import fcntl
    if command == "student":
        target = tmp_path / "out"
        target.mkdir()
        (target / "resume.pt").write_bytes(b"")  # what the other run has written so far
        lock_path, argv = target, student_on(TRAIN, target)
    elif command == "pseudo-label":
        target = tmp_path / "p.jsonl"
        lock_path = tmp_path / ".p.jsonl.lock"
        argv = ["pseudo-label", "--teacher", tiny_classifier_teacher, "--input", SAMPLES / "unlabeled_movies.txt",
                "--output", target, "--quiet"]
    else:
        target = tmp_path / "m.json"
        lock_path = tmp_path / ".m.json.lock"
        argv = ["evaluate", tiny_student, SAMPLES / "sentiment_test.csv", "--output", target, "--quiet"]
    fd = os.open(lock_path, os.O_RDONLY if lock_path.is_dir() else os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the "other run"
        status, err = run_main(capsys, *argv)
    finally:
        os.close(fd)
    assert status == 2 and "another nlp-train run is writing it right now" in err, err
    assert not target.exists() or sorted(p.name for p in target.iterdir()) == ["resume.pt"]


@pytest.mark.parametrize("command", ["teacher", "student", "kd", "pseudo-label", "evaluate"])
def test_failed_runs_leave_no_output_behind(command, tiny_classifier_teacher, tiny_encoder_dir, tmp_path, capsys):
    """A run that fails after its output was set up (here: on a bad line in its data) removes it all,
    folders it made included."""
    bad_dev = write(tmp_path / "dev.csv", "text,label\nfine,positive\n\x00,positive\n")
    out = tmp_path / "deep" / "er" / "out"
    argv = {
        "teacher": ["teacher", "--task", "classification", "--encoder", tiny_encoder_dir, "--train", TRAIN,
                    "--dev", bad_dev, "--output", out, "--quiet"],
        "student": ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", bad_dev, "--output", out],
        "kd": ["kd", "--teacher", tiny_classifier_teacher, *SMALL_LSTM, "--train", TRAIN, "--dev", bad_dev,
               "--output", out],
        "pseudo-label": ["pseudo-label", "--teacher", tiny_classifier_teacher, "--input",
                         write(tmp_path / "in.txt", "good\n\x00\n"), "--output", out, "--quiet"],
        "evaluate": ["evaluate", tiny_classifier_teacher, bad_dev, "--output", out, "--quiet"],
    }[command]
    status, err = run_main(capsys, *argv)
    assert status == 2 and "binary data" in err, err
    assert not (tmp_path / "deep").exists(), "a failed run left folders or files behind"


@pytest.mark.parametrize("command", ["teacher", "kd", "pseudo-label", "evaluate"])
def test_a_full_disk_names_the_file_and_leaves_nothing(command, tiny_classifier_teacher, tiny_encoder_dir, tmp_path):
    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200) if command == "evaluate" else (20_000, 20_000))

    out = tmp_path / "out"
    argv = {
        "teacher": ["teacher", "--task", "classification", "--encoder", tiny_encoder_dir, "--epochs", "1",
                    "--train", TRAIN, "--dev", DEV, "--output", out, "--quiet"],
        "kd": kd_with(tiny_classifier_teacher, out, "--epochs", "1", "--cache-dir", tmp_path / "cache"),
        "pseudo-label": ["pseudo-label", "--teacher", tiny_classifier_teacher, "--input",
                         SAMPLES / "unlabeled_movies.txt", "--output", out, "--quiet"],
        "evaluate": ["evaluate", tiny_classifier_teacher, SAMPLES / "sentiment_test.csv", "--output", out, "--quiet"],
    }[command]
    process = nlp_train(*argv, preexec_fn=limit_file_size)
    err = process.communicate(timeout=120)[1].decode()
    assert process.returncode == 2, err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert "cannot write (File too large)" in err and str(tmp_path) in err, err
    assert ".tmp" not in err, "the message names a temporary file instead of the output"
    if command != "pseudo-label":  # pseudo-label keeps its complete records for --resume
        assert not out.exists()


def test_a_logit_cache_inside_a_model_is_refused(tmp_path, capsys, tiny_classifier_teacher):
    """Shards written into a teacher's folder would make every later command refuse the teacher."""
    import shutil
    teacher = tmp_path / "teacher"
    shutil.copytree(tiny_classifier_teacher, teacher)
    for cache in (teacher / "encoder", teacher, teacher / "encoder" / "new"):
        status, err = run_main(capsys, "pseudo-label", "--teacher", teacher, "--input", SAMPLES / "unlabeled_movies.txt",
                               "--output", tmp_path / "p.jsonl", "--cache-dir", cache, "--quiet")
        assert status == 2 and "lies inside the model directory" in err, err
        status, err = run_main(capsys, "kd", "--teacher", teacher, *SMALL_LSTM, "--epochs", "1", "--train", TRAIN,
                               "--dev", DEV, "--output", tmp_path / "kd", "--cache-dir", cache)
        assert status == 2 and "lies inside the model directory" in err, err
    assert not (teacher / "encoder" / "new").exists() and not (tmp_path / "kd").exists()
    status, err = run_main(capsys, "predict", teacher, SAMPLES / "unlabeled_movies.txt")
    assert status == 0, err  # still whole


def test_a_model_is_never_written_into_the_encoder_folder_it_reads(tmp_path, capsys, tiny_encoder_dir):
    """A local --encoder folder is an input: an output inside it, or one holding it, is refused (the
    latter used to move the encoder aside with --overwrite and then fail to load it)."""
    encoder = tmp_path / "enc"
    shutil.copytree(tiny_encoder_dir, encoder)
    before = sorted(p.name for p in encoder.iterdir())
    common = ["teacher", "--task", "classification", "--encoder", encoder, "--epochs", "1", "--train", TRAIN,
              "--dev", DEV, "--quiet"]
    status, err = run_main(capsys, *common, "--output", encoder / "t")
    assert status == 2 and "lies inside" in err and "an input of this command" in err
    status, err = run_main(capsys, *common, "--output", tmp_path, "--overwrite")
    assert status == 2 and "holds" in err and "an input of this command" in err
    assert sorted(p.name for p in encoder.iterdir()) == before


def test_a_save_that_fails_part_way_leaves_the_model_already_there_whole(tiny_student, tmp_path, monkeypatch):
    """A run's best epoch so far stays a whole model while the next best is written (in a staging
    folder beside it): a save stopped part-way (here an error after the weights; a SIGKILL alike)
    leaves the directory as it was, so `--resume` still finds that epoch's model."""
    import distill.models.students as students
    from distill.models.base import STAGING_PREFIX
    out = copy_of(tiny_student, tmp_path, "run")
    before = snapshot(out)
    model = load_model(out)

    def card_fails(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(students, "write_model_card", card_fails)
    with pytest.raises(OSError):
        model.write_model(out)
    assert snapshot(out) == before and not list(out.glob(f"{STAGING_PREFIX}*"))
    load_model(out)


KILLED_AT = {"export": ("distill.export", "export_onnx"), "export-int8": ("distill.export", "quantize_int8"),
             "student": ("distill.training", "evaluate")}


@pytest.mark.parametrize("command", list(KILLED_AT))
def test_what_a_run_killed_before_its_model_leaves_is_cleared_by_the_next(command, tiny_student, tmp_path, capsys,
                                                                          caplog):
    """A run killed outright (SIGKILL, the kernel out of memory) before it had a model or resume state left its
    first files (an export's config.json and graph, int8's hidden fp32 graph, a run's run_config.yaml): every
    later run, --overwrite and --resume too, refused the folder as holding no distill model, and it had to be
    removed by hand."""
    import subprocess
    import sys
    out = tmp_path / "out"
    argv = {"export": ["export", tiny_student, "--output", out],
            "export-int8": ["export", tiny_student, "--output", out, "--quantize", "int8", "--check-data",
                            SAMPLES / "sentiment_test.csv"],
            "student": student_on(TRAIN, out)}[command]
    module, function = KILLED_AT[command]
    killer = (f"import os, signal, sys, {module} as m\n"
              f"m.{function} = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
              "from procedures.cli import main\nmain(sys.argv[1:])\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    killed = subprocess.run([sys.executable, "-c", killer, *map(str, argv)], env=env, capture_output=True)
    assert killed.returncode == -signal.SIGKILL and any(out.iterdir()), killed.stderr.decode()[-2000:]
    status, err = run_main(capsys, *argv, *(["--epochs", "1"] if command == "student" else []))
    assert status == 0 and "removed the partial output of a run that was killed" in caplog.text, err
    assert load_model(out) is not None and not [p.name for p in out.iterdir() if p.name.startswith(".")]
