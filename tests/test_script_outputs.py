"""The scripts in scripts/ other than the benchmark's driver: what they reuse from an earlier run is what this run
would make, their outputs never replace an input, and a wrong number or a missing extra is one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import DEV, ROOT, SAMPLES, TRAIN

sys.path.insert(0, str(ROOT / "scripts"))


def saved_student(folder: Path, seed: int) -> Path:
    """A tiny untrained BiLSTM sentiment student saved in `folder` (another `seed`, other weights)."""
    from distill.data import read_classification
    from distill.labels import LabelHierarchy
    from distill.models.registry import student_config
    from distill.models.students import build_student
    data = read_classification(str(TRAIN))
    torch.manual_seed(seed)
    shutil.rmtree(folder, ignore_errors=True)
    build_student(student_config("lstm", embedding_dim=8, hidden_dim=8),
                  LabelHierarchy.from_labels(list(data["label"]), None), list(data["text"])).save_pretrained(folder)
    return folder


def run_script(script: str, *argv: str, blocked: str | None = None) -> subprocess.CompletedProcess:
    """scripts/SCRIPT run as a user runs it; `blocked`: a module made unimportable first, as where not installed."""
    path = str(ROOT / "scripts" / script)
    block = f"sys.modules[{blocked!r}] = None; " if blocked else ""
    code = f"import runpy, sys; {block}sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    return subprocess.run([sys.executable, "-c", code, path, *map(str, argv)], capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, cwd=ROOT, timeout=300)


def test_bench_export_reuses_an_export_only_of_the_model_as_it_is_now_on_the_same_data(tmp_path, monkeypatch):
    """A rerun keeps a finished export of the same model checked on the same data; a model retrained (or another
    one at its path) or other check data is exported again (each was reported by its predecessor's export), and
    so is an export with a file missing."""
    import bench_export
    import distill.export
    from distill.models import read_model_card
    from distill.io import file_sha256
    model, out = saved_student(tmp_path / "lstm", 0), tmp_path / "exports"
    exported = []
    real_export = distill.export.export_model

    def counted(model_dir, output, *args, **kwargs):
        exported.append(Path(output).name)
        return real_export(model_dir, output, *args, **kwargs)

    monkeypatch.setattr(distill.export, "export_model", counted)

    def source_of(variant: str) -> str:
        return read_model_card(out / variant)["export"]["source_card_sha256"]

    bench_export.export_all(model, out, DEV)
    assert exported == ["onnx-fp32", "onnx-int8"]
    bench_export.export_all(model, out, DEV)  # the same model on the same data: kept
    assert exported == ["onnx-fp32", "onnx-int8"]
    saved_student(model, 1)  # retrained: other weights at the same path
    bench_export.export_all(model, out, DEV)
    assert exported[2:] == ["onnx-fp32", "onnx-int8"]
    assert source_of("onnx-fp32") == source_of("onnx-int8") == file_sha256(model / "distill.json")
    bench_export.export_all(model, out, SAMPLES / "sentiment_test.csv")  # checked on other data
    assert exported[4:] == ["onnx-fp32", "onnx-int8"]
    assert read_model_card(out / "onnx-int8")["agreement"]["data"] == str(SAMPLES / "sentiment_test.csv")
    (out / "onnx-fp32" / "model.onnx").unlink()
    bench_export.export_all(model, out, SAMPLES / "sentiment_test.csv")
    assert exported[6:] == ["onnx-fp32"]


@pytest.mark.parametrize("script, argv", [
    ("bench_export.py", ["{model}", "--data", "{tmp}", "--out", "{tmp}/out"]),
    ("bench_onnx_teacher.py", ["{model}", "--input", str(SAMPLES / "unlabeled_movies.txt"), "--check-data", str(DEV),
                               "--out", "{tmp}/out"]),
])
def test_an_export_script_without_onnxruntime_names_the_extra_in_one_line(script, argv, tmp_path):
    """Without the export extra's onnxruntime the script says which extra to install (it was an import's
    traceback), before anything is written."""
    model = saved_student(tmp_path / "lstm", 0)
    done = run_script(script, *(arg.format(model=model, tmp=tmp_path) for arg in argv), blocked="onnxruntime")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "needs the onnxruntime package: pip install 'distill[export]'" in done.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "out").exists()


def test_bench_onnx_teacher_refuses_an_out_in_the_teacher_or_holding_an_input(tmp_path):
    """OUT is checked before it is made: in the teacher (it was made there, then the export refused), holding the
    --input it would cut to --lines as OUT/corpus-N.txt, or the --check-data that pseudo-label replaced; nothing is
    written."""
    import bench_onnx_teacher
    from distill.errors import DistillError
    from tests.conftest import snapshot
    teacher = saved_student(tmp_path / "teacher", 0)
    (tmp_path / "out").mkdir()
    corpus = shutil.copy(SAMPLES / "unlabeled_movies.txt", tmp_path / "out" / "corpus-5.txt")
    check = shutil.copy(DEV, tmp_path / "out" / "pseudo-pytorch.jsonl")
    before = snapshot(tmp_path)
    for out, given, message in ((teacher / "bench", {}, "lies inside"),
                                (tmp_path / "out", {"input": corpus}, "holds"),
                                (tmp_path / "out", {"check-data": check}, "holds")):
        options = {"input": SAMPLES / "unlabeled_movies.txt", "check-data": DEV, **given}
        with pytest.raises(DistillError, match=message):
            bench_onnx_teacher.main([str(teacher), "--lines", "5", "--rounds", "1", "--no-pipeline", "--out", str(out),
                                     *(f"--{key}={value}" for key, value in options.items())])
        assert snapshot(tmp_path) == before and not (teacher / "bench").exists()


@pytest.mark.parametrize("script, argv, message", [
    ("bench_multitask.py", ["--threads", "0"], "--threads must be at least 1, got 0"),  # torch's traceback
    ("bench_multitask.py", ["--limit", "-5"], "--limit must be at least 1, got -5"),  # all but the last 5 examples
    ("bench_multitask.py", ["--limit", "0"], "--limit must be at least 1, got 0"),  # an empty file, then its error
    ("bench_multitask.py", ["--repeats", "0"], "--repeats must be at least 1, got 0"),  # a ratio of inf / inf
    ("bench_multitask.py", ["--unlabeled", "-1"], "--unlabeled must be at least 1, got -1"),
    ("bench_startup.py", ["--repeats", "0"], "--repeats must be at least 1, got 0"),  # a median of nothing, timed
])
def test_a_script_given_a_number_it_cannot_use_says_so_in_one_line(script, argv, message, tmp_path):
    """Refused at its option, before anything is written."""
    where = ["--data", tmp_path, "--out", tmp_path / "out"] if script != "bench_startup.py" else []
    done = run_script(script, *where, *argv)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert message in done.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "out").exists()


def test_bench_startup_refuses_a_json_record_over_its_data_before_timing(tmp_path):
    """--json at the --data it reads is refused before the student is trained or timed (the data was replaced by
    the timings at the end), and so is one among a model's files."""
    from tests.conftest import snapshot
    data = Path(shutil.copy(DEV, tmp_path / "dev.csv"))
    student = saved_student(tmp_path / "lstm", 0)
    before = snapshot(tmp_path)
    for record, message in ((data, "is an input of this command"), (student / "timings.json", "lies in the model")):
        done = run_script("bench_startup.py", "--student", student, "--data", data, "--repeats", "1", "--json", record)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert message in done.stderr.strip().splitlines()[-1]
        assert snapshot(tmp_path) == before


def test_a_model2vec_model_killed_while_saved_leaves_none_a_rerun_takes_for_whole(tmp_path, monkeypatch):
    """bench_static.py keeps model2vec's models by their folders: one killed while it was saved left a folder that
    the next run loaded as whole; now it is saved beside and moved in. And the record of a pipeline about to be
    replaced (another seed) is gone first: killed, a rerun at the record's seed took the new pipeline for its own."""
    import argparse
    import types
    import bench_static

    class Killed(BaseException):
        pass

    class Static:
        embedding = torch.zeros(3, 2)

        def save_pretrained(self, path: str) -> None:
            Path(path).mkdir()
            (Path(path) / "config.json").write_text("{}")
            raise Killed  # as a kill while the weights are written

    fake = types.ModuleType("model2vec")
    fake.StaticModel = object
    fake.distill = types.SimpleNamespace(distill=lambda *args, **kwargs: Static())
    fake.train = types.SimpleNamespace(StaticModelForClassification=object)
    for name, module in (("model2vec", fake), ("model2vec.distill", fake.distill), ("model2vec.train", fake.train)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(bench_static, "encoder_path", lambda: "encoder")
    args = argparse.Namespace(train=str(TRAIN), dev=str(DEV), test=str(DEV), out=str(tmp_path), threads=1, seed=42)
    with pytest.raises(Killed):
        bench_static.model2vec_train(args)
    assert not (tmp_path / bench_static.M2V_DISTILLED).exists()

    (tmp_path / bench_static.M2V_MODEL).mkdir()
    record = tmp_path / f"{bench_static.M2V_MODEL}-train.json"
    record.write_text('{"seed": 42, "test_accuracy": 0.5, "dev_accuracy": 0.5}')

    def killed_training(python, stage, args):
        raise Killed  # after it replaced the pipeline with seed 43's
    monkeypatch.setattr(bench_static, "run_model2vec", killed_training)
    with pytest.raises(Killed):
        bench_static.trained_model2vec("python", argparse.Namespace(**{**vars(args), "seed": 43}))
    assert not record.exists()


def test_get_data_remakes_a_rotten_tomatoes_split_a_killed_run_left_half_rewritten(tmp_path, monkeypatch):
    """A run of another --rt-split-seed killed after its train.csv left that file of the new split beside dev and
    test of the old one, and the manifest naming the old seed: the next run said 'ok' to the mix (train and test
    then share texts). Now the manifest names no seed until the three files are written, and the split is remade."""
    import pandas as pd
    import get_data

    class Killed(BaseException):
        pass

    frame = pd.DataFrame({"text": [f"text {i}" for i in range(get_data.RT_TOTAL)],
                          "category": ["fresh", "rotten"] * (get_data.RT_TOTAL // 2)})
    manifest = get_data.Manifest(tmp_path / "MANIFEST.json")
    get_data.step_rotten_tomatoes(tmp_path, False, [], {"rt": frame}, manifest, 13)
    written, real_write = [], get_data.write_csv

    def killed_after_one(path, part):
        if written:
            raise Killed
        written.append(path)
        real_write(path, part)

    monkeypatch.setattr(get_data, "write_csv", killed_after_one)
    with pytest.raises(Killed):
        get_data.step_rotten_tomatoes(tmp_path, False, [], {"rt": frame}, manifest, 14)
    monkeypatch.setattr(get_data, "write_csv", real_write)
    get_data.step_rotten_tomatoes(tmp_path, False, [], {"rt": frame}, get_data.Manifest(tmp_path / "MANIFEST.json"), 13)
    splits = {name: set(pd.read_csv(tmp_path / "rotten_tomatoes" / f"{name}.csv")["text"]) for name in
              ("train", "dev", "test")}
    assert not splits["train"] & splits["test"] and not splits["train"] & splits["dev"]


def test_bench_zero_shot_refuses_to_continue_a_run_of_other_settings_or_data(tmp_path, monkeypatch):
    """Every step whose output exists is skipped: a rerun with another --test-size (or other data) reported the first
    run's scores, its models trained on the first run's data. OUT/settings.json says what they were made with."""
    import bench_zero_shot
    from distill.errors import DistillError

    class Started(Exception):
        pass

    def started(out, *args):
        raise Started
    monkeypatch.setattr(bench_zero_shot, "nlp_train", started)
    data = tmp_path / "data"
    for target, sample in (("rotten_tomatoes/train.csv", TRAIN), ("rotten_tomatoes/dev.csv", DEV),
                           ("rotten_tomatoes/test.csv", SAMPLES / "sentiment_test.csv"),
                           ("unlabeled/movies.txt", SAMPLES / "unlabeled_movies.txt")):
        (data / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(sample, data / target)
    argv = ["--dataset", "rt", "--data", str(data), "--out", str(tmp_path / "out"), "--test-size", "20"]
    for _ in range(2):  # the first run, then its continuation
        with pytest.raises(Started):
            bench_zero_shot.main(argv)
    with pytest.raises(DistillError, match=r"holds a run made with different --test-size \(its settings.json\)"):
        bench_zero_shot.main([*argv[:-1], "30"])
    with open(data / "rotten_tomatoes" / "test.csv", "a", encoding="utf-8") as handle:
        handle.write("one more,positive\n")
    with pytest.raises(DistillError, match="holds a run made with different data under --data"):
        bench_zero_shot.main(argv)
