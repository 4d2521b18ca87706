"""An ONNX export (fp32 or int8) as the teacher of pseudo-label and kd: its labels, its own logit cache keyed by
its files, its agreement record logged and recorded, the resume signature, what it cannot do (an online
teacher, layer terms) and where a student's embeddings come from."""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install -e .[export])")

from distill.errors import DistillError  # noqa: E402
from distill.models import load_model, load_teacher  # noqa: E402
from distill.pseudo_label import pseudo_label  # noqa: E402
from tests.conftest import SAMPLES, cli, run_main  # noqa: E402

DATA = {"classification": (SAMPLES / "sentiment_train.csv", SAMPLES / "sentiment_dev.csv",
                           SAMPLES / "unlabeled_movies.txt", "lstm"),
        "tagging": (SAMPLES / "ner_train.conll", SAMPLES / "ner_dev.conll", SAMPLES / "unlabeled_news.txt",
                    "lstm-tagger")}


@pytest.fixture(scope="module")
def exports(tiny_classifier_teacher, tiny_tagging_teacher, tmp_path_factory) -> dict:
    """task -> {"pytorch": teacher, "fp32": export, "int8": export (checked on the dev data)}."""
    found = {}
    for task, teacher in (("classification", tiny_classifier_teacher), ("tagging", tiny_tagging_teacher)):
        folder = tmp_path_factory.mktemp(f"onnx-{task}")
        cli("export", teacher, "--output", folder / "fp32")
        cli("export", teacher, "--output", folder / "int8", "--quantize", "int8", "--check-data", DATA[task][1])
        found[task] = {"pytorch": teacher, "fp32": str(folder / "fp32"), "int8": str(folder / "int8")}
    return found


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def labels_of(rows: list[dict]) -> list:
    return [row.get("label", row.get("tags")) for row in rows]


@pytest.mark.parametrize("task", ["classification", "tagging"])
def test_pseudo_label_with_an_export_keys_its_own_cache(task, exports, tmp_path, caplog):
    corpus, models = DATA[task][2], exports[task]
    cache, stats, rows = tmp_path / "cache", {}, {}
    for name in ("pytorch", "fp32", "int8"):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="distill"):
            stats[name] = pseudo_label(models[name], str(corpus), str(tmp_path / f"{name}.jsonl"), progress=False,
                                       cache_dir=str(cache))
        notes = [r.getMessage() for r in caplog.records if "ONNX" in r.getMessage()]
        if name == "pytorch":
            assert not notes and "teacher_export" not in stats[name]
        else:  # the export and its agreement, said once
            assert len(notes) == 1 and notes[0].startswith(f"teacher {models[name]}: ONNX {name} export of "), notes
        rows[name] = records(tmp_path / f"{name}.jsonl")
    assert labels_of(rows["fp32"]) == labels_of(rows["pytorch"])  # the same model, float rounding aside
    assert len(rows["int8"]) == len(rows["pytorch"])
    folders = sorted(p.name for p in cache.iterdir())
    fingerprints = {name: load_teacher(models[name]).fingerprint() for name in models}
    assert len(set(fingerprints.values())) == 3 and folders == sorted(fingerprints.values())
    int8 = stats["int8"]["teacher_export"]
    assert int8["quantize"] == "int8" and int8["fingerprint"] == fingerprints["int8"]
    assert int8["agreement"]["labels_compared"] > 0 and int8["source"] == models["pytorch"]
    assert stats["fp32"]["teacher_export"]["quantize"] is None and stats["fp32"]["teacher_export"]["agreement"] is None
    # a second run over the same corpus is served by the export's own cache
    again = pseudo_label(models["int8"], str(corpus), str(tmp_path / "again.jsonl"), progress=False,
                         cache_dir=str(cache))
    assert again["cached"] == again["read"] and records(tmp_path / "again.jsonl") == rows["int8"]


@pytest.mark.parametrize("task", ["classification", "tagging"])
@pytest.mark.parametrize("variant", ["fp32", "int8"])
def test_kd_with_an_export_as_teacher(task, variant, exports, tmp_path):
    train, dev, unlabeled, student = DATA[task]
    cache = tmp_path / "cache"
    cli("kd", "--teacher", exports[task][variant], "--model", student, "--train", train, "--dev", dev,
        "--epochs", "1", "--output", tmp_path / "kd", "--cache-dir", cache, "--quiet",
        *(["--unlabeled", unlabeled] if task == "classification" else []))
    summary = json.loads((tmp_path / "kd" / "train_summary.json").read_text())
    fingerprint = load_teacher(exports[task][variant]).fingerprint()
    assert summary["teacher_export"]["fingerprint"] == fingerprint and Path(summary["cache_dir"]).name == fingerprint
    assert summary["teacher_export"]["quantize"] == (None if variant == "fp32" else "int8")
    assert summary["kd"]["embeddings_from_teacher"]
    from distill.inference import evaluate
    expected = evaluate(load_teacher(exports[task][variant]), dev)  # the export's own dev scores, beside the student's
    assert {name: summary["teacher_dev"][name] for name in expected} == pytest.approx(expected)
    assert load_model(tmp_path / "kd").predict(["EU rejects German call"] if task == "classification"
                                               else [["EU", "rejects", "German", "call"]])


@pytest.mark.parametrize("task", ["classification", "tagging"])
def test_a_students_embeddings_start_from_the_exports_graph(task, exports):
    """--embeddings-from-teacher reads the sub-word table from the graph's initializers (int8 leaves it fp32): the
    student starts exactly as from the PyTorch teacher, with the source model not needed."""
    from distill.data import read_split
    from distill.labels import build_hierarchy
    from distill.models.registry import student_config
    from distill.trainers import new_student
    train, _, _, name = DATA[task]
    examples, labels = read_split(str(train), task)
    hierarchy = build_hierarchy(task, labels, None, str(train))
    start = {variant: new_student(student_config(name), hierarchy, examples, 0, load_teacher(exports[task][variant]))
             for variant in ("pytorch", "fp32", "int8")}
    for variant in ("fp32", "int8"):
        assert torch.equal(start[variant].embedding.weight, start["pytorch"].embedding.weight), variant


def test_an_export_whose_table_is_unreadable_falls_back_to_its_source_or_is_refused(exports, tmp_path, monkeypatch,
                                                                                    capsys):
    from distill.models.onnx import OnnxModel
    monkeypatch.setattr(OnnxModel, "embedding_table", lambda self: None)
    train, dev, _, student = DATA["classification"]
    teacher = tmp_path / "teacher"
    shutil.copytree(exports["classification"]["pytorch"], teacher)
    cli("export", teacher, "--output", tmp_path / "onnx")
    args = ["kd", "--teacher", tmp_path / "onnx", "--model", student, "--train", train, "--dev", dev, "--epochs", "1",
            "--cache-dir", tmp_path / "cache", "--quiet"]
    cli(*args, "--output", tmp_path / "from-source")  # the source model is there, unchanged: its table
    (teacher / "distill.json").write_text((teacher / "distill.json").read_text() + "\n")  # changed since
    status, err = run_main(capsys, *args, "--output", tmp_path / "refused")
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert "its embedding table cannot be read from the graph, and the model it was exported from" in err
    assert "is gone or changed since; use --random-embeddings (kd), or no --embeddings-from-teacher (student), or give " \
        "that PyTorch model" in err
    assert not (tmp_path / "refused").exists()
    cli(*args, "--output", tmp_path / "random", "--random-embeddings")


@pytest.mark.parametrize("flags, named", [(["--online-teacher"], "--online-teacher"),
                                          (["--hidden-weight", "1"], "--hidden-weight, --attention-weight or "
                                                                     "--cosine-weight")])
def test_kd_refuses_what_an_export_cannot_give(flags, named, exports, tmp_path, capsys):
    train, dev, _, _ = DATA["classification"]
    student = "transformer" if "--hidden-weight" in flags else "lstm"
    status, err = run_main(capsys, "kd", "--teacher", exports["classification"]["int8"], "--model", student,
                           "--train", train, "--dev", dev, "--output", tmp_path / "kd", "--quiet", *flags)
    expected = (f"error: {exports['classification']['int8']}: is an ONNX export, which teaches kd through the logit "
                f"cache only; {named} needs the PyTorch teacher: drop it, or give the PyTorch teacher "
                f"({exports['classification']['pytorch']})")
    assert status == 2 and err.strip() == expected, err
    assert not (tmp_path / "kd").exists()


def test_a_students_export_teaches_as_the_student_does(exports, tmp_path, capsys):
    """A trained student is a teacher (a teacher-assistant chain), so its export is one too; a word student has
    no sub-word embeddings to give, as in PyTorch form."""
    train, dev, unlabeled, _ = DATA["classification"]
    cli("student", "--model", "cnn", "--train", train, "--dev", dev, "--epochs", "1", "--output", tmp_path / "cnn",
        "--quiet")
    cli("export", tmp_path / "cnn", "--output", tmp_path / "cnn-onnx")
    pseudo_label(str(tmp_path / "cnn-onnx"), str(unlabeled), str(tmp_path / "onnx.jsonl"), progress=False,
                 use_cache=False)
    pseudo_label(str(tmp_path / "cnn"), str(unlabeled), str(tmp_path / "pt.jsonl"), progress=False, use_cache=False)
    assert labels_of(records(tmp_path / "onnx.jsonl")) == labels_of(records(tmp_path / "pt.jsonl"))
    args = ["kd", "--teacher", tmp_path / "cnn-onnx", "--model", "lstm", "--train", train, "--dev", dev,
            "--epochs", "1", "--cache-dir", tmp_path / "cache", "--quiet"]
    status, err = run_main(capsys, *args, "--output", tmp_path / "kd")
    assert status == 2 and "has no sub-word embeddings to start word embeddings from: use --random-embeddings" in err
    cli(*args, "--output", tmp_path / "kd", "--random-embeddings")


def test_the_resume_signature_covers_the_exports_content(exports, tmp_path, capsys, monkeypatch):
    import distill.pseudo_label as module
    teacher = exports["classification"]["pytorch"]
    cli("export", teacher, "--output", tmp_path / "onnx")
    args = ["pseudo-label", "--teacher", tmp_path / "onnx", "--input", DATA["classification"][2], "--output",
            tmp_path / "p.jsonl", "--chunk-size", "50", "--quiet", "--no-cache"]
    chunks = []

    def interrupt_after_the_first_chunk():
        chunks.append(1)
        if len(chunks) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(module, "release_freed_memory", interrupt_after_the_first_chunk)
    assert run_main(capsys, *args)[0] == 130
    monkeypatch.undo()
    signature = json.loads((tmp_path / "p.jsonl.part.json").read_text())
    assert signature["teacher_export"]["fingerprint"] == load_teacher(tmp_path / "onnx").fingerprint()
    saved = (tmp_path / "p.jsonl.part").read_bytes(), (tmp_path / "p.jsonl.part.json").read_bytes()
    cli("export", teacher, "--output", tmp_path / "onnx", "--overwrite", "--quantize", "int8", "--check-data",
        DATA["classification"][1])  # the same folder, another model
    status, err = run_main(capsys, *args, "--resume")
    assert status == 2 and "cannot resume with different settings or data (inputs.teacher, teacher_export" in err, err
    cli("export", teacher, "--output", tmp_path / "onnx", "--overwrite")  # the fp32 export again: the same files
    (tmp_path / "p.jsonl.part").write_bytes(saved[0])
    (tmp_path / "p.jsonl.part.json").write_bytes(saved[1])
    cli(*args, "--resume")
    assert len(records(tmp_path / "p.jsonl")) == len(DATA["classification"][2].read_text().splitlines())


def test_a_transformer_student_copies_its_layers_from_the_exports_source(exports, tmp_path, capsys, monkeypatch):
    train, dev, _, _ = DATA["classification"]
    teacher = tmp_path / "teacher"
    shutil.copytree(exports["classification"]["pytorch"], teacher)
    cli("export", teacher, "--output", tmp_path / "onnx")
    args = ["kd", "--teacher", tmp_path / "onnx", "--model", "transformer", "--layers", "1", "--train", train,
            "--dev", dev, "--epochs", "1", "--cache-dir", tmp_path / "cache", "--quiet"]
    cli(*args, "--output", tmp_path / "kd")
    shutil.rmtree(teacher)
    status, err = run_main(capsys, *args, "--output", tmp_path / "kd2")
    assert status == 2 and "a transformer student copies the teacher's layers, which an ONNX graph does not give " \
        "back, and the model it was exported from" in err, err


def test_an_export_is_refused_where_a_pytorch_model_is_expected(exports):
    with pytest.raises(DistillError, match="is an exported ONNX model"):
        load_model(exports["classification"]["fp32"], expect="teacher")


def test_the_onnx_teacher_benchmark_runs_every_variant(tiny_classifier_teacher, tmp_path, capsys):
    """scripts/bench_onnx_teacher.py: pseudo-label with int8, fp32 ONNX and PyTorch and the pipeline on the same
    texts, and a student from each export's logits."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from bench_onnx_teacher import main
    train, dev, unlabeled, _ = DATA["classification"]
    result = main([tiny_classifier_teacher, "--input", str(unlabeled), "--lines", "40", "--check-data", str(dev),
                   "--rounds", "1", "--out", str(tmp_path / "out"), "--kd", "--train", str(train), "--dev", str(dev),
                   "--test", str(SAMPLES / "sentiment_test.csv"), "--epochs", "1"])
    variants = result["pseudo_label"]["variants"]
    assert set(variants) == {"onnx-int8", "onnx-fp32", "pytorch", "pipeline"}
    assert variants["onnx-fp32"]["labels_changed"] == 0 and variants["pipeline"]["labels_compared"] == 40
    assert set(result["kd"]) == {"onnx-fp32", "onnx-int8"}
    assert result["kd"]["onnx-fp32"]["teacher_export"] != result["kd"]["onnx-int8"]["teacher_export"]
    assert "| onnx-int8 |" in capsys.readouterr().out


# -- --use-export: the PyTorch teacher or its export, whichever was measured faster on this machine ---------------

def test_the_onnx_teacher_benchmark_refuses_a_teacher_it_cannot_export_before_it_writes(exports, tmp_path):
    """Was: an ONNX export given as the teacher passed the script's check (pseudo-label takes one), then its export
    was refused with OUT made and left empty. Now the table's line for the export, nothing made."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from bench_onnx_teacher import main
    fp32, (_, dev, unlabeled, _) = exports["classification"]["fp32"], DATA["classification"]
    with pytest.raises(DistillError, match=r"format=.onnx.\) does not take an ONNX export; export the PyTorch model"):
        main([fp32, "--input", str(unlabeled), "--check-data", str(dev), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def with_speed(export: str, folder: Path, **speed) -> str:
    """A copy of `export` whose card records `speed` over what was measured (the card's checksums cover the
    model's files, not the card)."""
    shutil.copytree(export, folder)
    card = json.loads((folder / "distill.json").read_text())
    card["speed"] = {**card["speed"], **speed}
    (folder / "distill.json").write_text(json.dumps(card))
    return str(folder)


def test_an_export_checked_on_data_records_its_speed_here(exports):
    from distill.export_speed import cpu_model
    card = json.loads((Path(exports["classification"]["int8"]) / "distill.json").read_text())
    speed = card["speed"]
    assert speed["cpu"] == cpu_model() and speed["threads"] == torch.get_num_threads()
    assert speed["batch_size"] == 64 and speed["precision"] == "fp32" and len(speed["date"]) == 10
    assert 0 < speed["examples"] <= 256 and speed["pytorch_examples_per_second"] > 0
    assert speed["ratio"] == pytest.approx(speed["export_examples_per_second"] / speed["pytorch_examples_per_second"],
                                           rel=0.05)
    # exported without --check-data: nothing measured
    assert json.loads((Path(exports["classification"]["fp32"]) / "distill.json").read_text())["speed"] is None


def test_export_measures_with_the_hook_and_says_it(tiny_classifier_teacher, tmp_path, capsys, monkeypatch):
    import distill.export
    calls = []

    def fake(reference, exported, examples):
        calls.append(len(examples))
        return {"examples": 3, "batch_size": 64, "threads": 1, "precision": "fp32", "cpu": "Test CPU",
                "date": "2025-01-01", "pytorch_examples_per_second": 100.0, "export_examples_per_second": 183.0,
                "ratio": 1.83}
    monkeypatch.setattr(distill.export, "measure_speed", fake)
    cli("export", tiny_classifier_teacher, "--output", tmp_path / "onnx", "--check-data", DATA["classification"][1])
    assert calls
    assert "; 1.83x PyTorch's speed here (183.0 against 100.0 ex/s, batch 64, 1 thread)" in capsys.readouterr().out
    assert json.loads((tmp_path / "onnx" / "distill.json").read_text())["speed"]["cpu"] == "Test CPU"


def test_use_export_runs_the_export_where_it_was_measured_faster(exports, tmp_path, caplog):
    from distill.export_speed import cpu_model
    teacher, corpus = exports["classification"]["pytorch"], str(DATA["classification"][2])
    here = {"cpu": cpu_model(), "threads": torch.get_num_threads(), "precision": "fp32"}
    cases = {"faster": {**here, "ratio": 1.83}, "slower": {**here, "ratio": 0.84},
             "elsewhere": {**here, "cpu": "Another CPU", "ratio": 3.0},
             "other-threads": {**here, "threads": here["threads"] + 1, "ratio": 3.0}}
    for name, speed in cases.items():
        export = with_speed(exports["classification"]["int8"], tmp_path / name, **speed)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="distill"):
            stats = pseudo_label(teacher, corpus, str(tmp_path / f"{name}.jsonl"), progress=False, use_cache=False,
                                 device="cpu", use_export=export)
        lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("teacher pass: ")]
        assert len(lines) == 1, caplog.text
        if name == "faster":
            assert stats["teacher_pass"]["export"] and stats["teacher_export"]["quantize"] == "int8"
            assert lines[0].startswith(f"teacher pass: ONNX int8 export {export} (measured 1.83x PyTorch on this "
                                       f"CPU, {here['threads']} thread"), lines[0]
            assert "labels may differ from PyTorch on " in lines[0] and "% of the check data" in lines[0]
        else:
            assert not stats["teacher_pass"]["export"] and "teacher_export" not in stats
            assert lines[0].startswith(f"teacher pass: PyTorch teacher {teacher} (the ONNX int8 export {export} ")
        if name == "slower":
            assert "measured 0.84x PyTorch on this CPU" in lines[0]
        if name in ("elsewhere", "other-threads"):
            assert "was measured on " in lines[0] and "export it here with check_data to measure" in lines[0]
    # the command line: the same choice, said in the log
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="distill"):
        cli("pseudo-label", "--teacher", teacher, "--input", corpus, "--output", tmp_path / "cli.jsonl", "--use-export",
            tmp_path / "faster", "--device", "cpu", "--quiet", "--no-cache")
    assert "teacher pass: ONNX int8 export" in caplog.text, caplog.text
    # an export made without --check-data has no measurement: the PyTorch teacher
    with caplog.at_level(logging.WARNING, logger="distill"):
        stats = pseudo_label(teacher, corpus, str(tmp_path / "unmeasured.jsonl"), progress=False, use_cache=False,
                             device="cpu", use_export=exports["classification"]["fp32"])
    assert not stats["teacher_pass"]["export"] and "has no speed measurement (exported without check_data)" in \
        stats["teacher_pass"]["reason"]


def test_use_export_refuses_an_export_of_another_teacher(exports, tmp_path, capsys):
    teacher, corpus = exports["classification"]["pytorch"], DATA["classification"][2]
    args = ["pseudo-label", "--input", corpus, "--output", tmp_path / "p.jsonl", "--quiet", "--no-cache"]
    tagger = exports["tagging"]["int8"]
    status, err = run_main(capsys, *args, "--teacher", teacher, "--use-export", tagger)
    assert status == 2 and err.strip() == (f"error: {tagger}: is an export of {exports['tagging']['pytorch']}, not of "
                                           f"{teacher} (the model card it recorded differs); give that teacher, or "
                                           f"export {teacher}"), err
    status, err = run_main(capsys, *args, "--teacher", exports["classification"]["int8"], "--use-export", tagger)
    assert status == 2 and "pseudo-label --use-export does not take an ONNX export; it chooses between a " \
        "PyTorch teacher and its export: give the PyTorch teacher it came from" in err
    status, err = run_main(capsys, *args, "--teacher", teacher, "--use-export", teacher)
    assert status == 2 and len(err.strip().splitlines()) == 1 and "is not an ONNX export; --use-export takes" in err
    assert not (tmp_path / "p.jsonl").exists()


def test_a_teacher_and_its_export_are_refused_as_one_teacher_given_twice(exports, tmp_path, capsys):
    """--teacher A --teacher A's int8 export (or two exports of A) was taken as a two-teacher ensemble: A mixed with
    itself at twice the cost, as A given twice (which was refused, by its path only)."""
    from distill.distiller import Distiller
    teacher, fp32, int8 = (exports["classification"][kind] for kind in ("pytorch", "fp32", "int8"))
    train, dev, corpus, _ = DATA["classification"]
    for first, second in ((teacher, int8), (fp32, teacher), (fp32, int8)):
        for args in (["kd", "--teacher", first, "--teacher", second, "--model", "lstm", "--train", train, "--dev", dev,
                      "--output", tmp_path / "run"],
                     ["pseudo-label", "--teacher", first, "--teacher", second, "--input", corpus, "--output",
                      tmp_path / "out.jsonl"]):
            status, err = run_main(capsys, *args)
            assert status == 2 and len(err.strip().splitlines()) == 1, err
            assert f"teachers {first} and {second} are one teacher given twice (" in err and "--teacher-weights" in err
    assert not (tmp_path / "run").exists() and not (tmp_path / "out.jsonl").exists()
    with pytest.raises(DistillError, match=f"teachers {teacher} and {int8} are one teacher given twice .*: an "
                                           "ensemble mixes different teachers"):
        Distiller([teacher, int8], "lstm")
    status, err = run_main(capsys, "pseudo-label", "--teacher", exports["tagging"]["pytorch"], "--teacher", int8,
                           "--input", corpus, "--output", tmp_path / "out.jsonl")
    assert "one teacher given twice" not in err, err  # an export of another teacher is another teacher


@pytest.mark.parametrize("edit, fragment", [
    (lambda card: card.update(export=[]), "its field 'export' is [], not a record (a JSON object)"),
    (lambda card: card.update(agreement="checked"), "its field 'agreement' is \"checked\", not a record"),
    (lambda card: card["agreement"].pop("score"), "its field 'agreement.score' is missing, not what distill writes"),
    (lambda card: card["export"].update(parameters="40k"), "its field 'export.parameters' is \"40k\", not what"),
    (lambda card: card["speed"].update(ratio=True), "its field 'speed.ratio' is true, not what distill writes"),
    (lambda card: card.update(sha256=[]), "its field 'sha256' is [], not the checksums of the model's files"),
    (lambda card: card["export"].update(quantize="int4"), "its field 'export.quantize' is \"int4\", which distill does "
                                                          "not write (it writes int8)"),
], ids=["export", "agreement", "agreement-field", "export-field", "speed-field", "sha256", "quantize-value"])
@pytest.mark.parametrize("command", ["predict", "compare", "pseudo-label", "kd"])
def test_an_exports_card_edited_to_another_type_is_refused_by_every_reader(edit, fragment, command, exports,
                                                                           tmp_path, capsys):
    """The card holds no checksum of itself: an export's `export` or `agreement` record edited into another JSON
    type (or a field of it removed) was a TypeError or AttributeError traceback in compare, pseudo-label and kd
    (predict said nothing), and a list of checksums "unknown model kind"; a quantization distill never writes
    ("int4") was said of the teacher and recorded in kd's summary as it was."""
    export = shutil.copytree(exports["classification"]["int8"], tmp_path / "int8")
    card = json.loads((export / "distill.json").read_text())
    edit(card)
    (export / "distill.json").write_text(json.dumps(card))
    train, dev, unlabeled, student = DATA["classification"]
    args = {"predict": ["predict", export, unlabeled],
            "compare": ["compare", export, "--data", dev],
            "pseudo-label": ["pseudo-label", "--teacher", export, "--input", unlabeled, "--output", tmp_path / "p.jsonl"],
            "kd": ["kd", "--teacher", export, "--model", student, "--train", train, "--dev", dev,
                   "--output", tmp_path / "kd"]}[command]
    status, err = run_main(capsys, *args)
    assert status == 2 and "Traceback" not in err and fragment in err, err
    assert err.count("\n") == 1 and not (tmp_path / "p.jsonl").exists() and not (tmp_path / "kd").exists()


def test_a_static_student_of_input_word_vectors_starts_from_the_exports_graph_alone(exports, tmp_path, capsys):
    """`--word-vectors input` (the mean of a word's sub-word input embeddings, which the graph holds) was refused as
    "a transformer student copies the teacher's layers" once the export's source model was gone: the static
    student was taken to read words through the encoder whatever its word vectors. It starts from the graph's
    table, as with the source there; 'encoder' word vectors still need the source."""
    train, dev, _, _ = DATA["classification"]
    teacher = tmp_path / "teacher"
    shutil.copytree(exports["classification"]["pytorch"], teacher)
    cli("export", teacher, "--output", tmp_path / "onnx")
    args = ["kd", "--teacher", tmp_path / "onnx", "--model", "static", "--embedding-dim", "8", "--train", train,
            "--dev", dev, "--epochs", "1", "--cache-dir", tmp_path / "cache", "--quiet"]
    cli(*args, "--word-vectors", "input", "--output", tmp_path / "with-source")
    shutil.rmtree(teacher)
    cli(*args, "--word-vectors", "input", "--output", tmp_path / "without")
    assert (tmp_path / "without" / "model.safetensors").read_bytes() == \
        (tmp_path / "with-source" / "model.safetensors").read_bytes()
    status, err = run_main(capsys, *args, "--word-vectors", "encoder", "--output", tmp_path / "encoder")
    assert status == 2 and "the model it was exported from" in err and not (tmp_path / "encoder").exists(), err
