"""Export: every model kind as ONNX gives PyTorch's logits (1e-4) and labels, int8 runs, the slim
teacher predicts identically, exported directories work in predict/evaluate/compare, bad input is refused."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install -e .[export])")

from distill.compare import compare_models, format_table  # noqa: E402
from distill.data import DataOptions, read_labelled, read_split  # noqa: E402
from distill.errors import DistillError  # noqa: E402
from distill.inference import decode_labels, predict_logits  # noqa: E402
from distill.io import file_sha256  # noqa: E402
from distill.export import agreement, export_model  # noqa: E402
from distill.inference import evaluate  # noqa: E402
from distill.labels import LabelHierarchy  # noqa: E402
from distill.models.base import LabelModel  # noqa: E402
from distill.models import MODEL_CARD, load_model  # noqa: E402
from distill.models.onnx import OnnxModel  # noqa: E402
from distill.models.students import build_student  # noqa: E402
from tests.conftest import SAMPLES, broken_package, cli, config_for, run_main  # noqa: E402

SENTIMENT_TEST, NER_TEST = SAMPLES / "sentiment_test.csv", SAMPLES / "ner_test.conll"
# name -> (student config options or None for a teacher, task)
KINDS = {
    "teacher-classifier": (None, "classification"),
    "teacher-tagger": (None, "tagging"),
    "lstm": ({"model": "lstm"}, "classification"),
    "lstm-max-binary": ({"model": "lstm", "pooling": "max", "binary": True}, "classification"),
    "cnn": ({"model": "cnn"}, "classification"),
    "cnn-max-mean": ({"model": "cnn", "pooling": "max-mean"}, "classification"),
    "ngram": ({"model": "ngram", "ngrams": 3, "buckets": 512}, "classification"),
    "static": ({"model": "static", "head_hidden": 10}, "classification"),
    "lstm-mean": ({"model": "lstm", "pooling": "mean"}, "classification"),
    "lstm-tagger": ({"model": "lstm-tagger"}, "tagging"),
    "lstm-tagger-crf": ({"model": "lstm-tagger", "crf": True}, "tagging"),
    "idcnn-tagger": ({"model": "idcnn-tagger"}, "tagging"),
    "idcnn-tagger-crf": ({"model": "idcnn-tagger", "crf": True}, "tagging"),
    "transformer": ({"model": "transformer", "layers": 2}, "classification"),
    "transformer-tagger": ({"model": "transformer-tagger", "layers": 2}, "tagging"),
}


def check_file(task: str) -> Path:
    return SENTIMENT_TEST if task == "classification" else NER_TEST


def examples_of(task: str) -> list:
    data = read_labelled(str(check_file(task)), task)
    return data["text"] if task == "classification" else data["tokens"]


@pytest.fixture
def model_dir(request, tiny_classifier_teacher, tiny_tagging_teacher, tiny_other_encoder_dir, tmp_path_factory) -> str:
    """A tiny model of the kind `request.param` names: the conftest teachers, or a random student (a transformer
    student: 2 layers of the second tiny encoder, a BERT)."""
    options, task = KINDS[request.param]
    if options is None:
        return tiny_classifier_teacher if task == "classification" else tiny_tagging_teacher
    train = SAMPLES / ("sentiment_train.csv" if task == "classification" else "ner_train.conll")
    return tiny_student(tmp_path_factory.mktemp(request.param) / "model", options, task, train, tiny_other_encoder_dir)


def tiny_student(directory: Path, options: dict, task: str, train: Path, encoder: str = "",
                 data: DataOptions = DataOptions()) -> str:
    """A random student of `options` with tiny sizes and the labels of `train`, saved in `directory`."""
    examples, gold = read_split(str(train), task, data)
    if task == "classification":
        labels = LabelHierarchy.from_labels(gold, None)
    else:
        labels = LabelHierarchy.from_labels((t for s in gold for t in s), None, first="O")
    torch.manual_seed(0)
    settings = dict(options)
    model = build_student(config_for(settings.pop("model"), embedding_dim=12, hidden_dim=10, filters=8, char_filters=6,
                                     dropout=0.0, encoder=encoder, **settings),
                          labels, examples).eval()
    if getattr(model, "crf", None) is not None:
        torch.nn.init.normal_(model.crf.transitions, std=2.0)  # strong transitions: Viterbi differs from argmax
    model.save_pretrained(directory)
    return str(directory)


def all_kinds():
    return pytest.mark.parametrize("model_dir", list(KINDS), indirect=True)


@all_kinds()
def test_onnx_export_gives_pytorch_logits_and_labels(model_dir, tmp_path):
    source = load_model(model_dir)
    task = source.task
    out = tmp_path / "onnx"
    cli("export", model_dir, "--output", out, "--check-data", check_file(task))
    exported = load_model(out)
    assert isinstance(exported, OnnxModel) and exported.task == task
    examples = examples_of(task)
    for batch_size in (1, 7, 64):  # batch and length axes are dynamic
        ours, theirs = predict_logits(source, examples, batch_size), predict_logits(exported, examples, batch_size)
        assert (ours.logits - theirs.logits).abs().max() <= 1e-4
        assert decode_labels(source, ours) == decode_labels(exported, theirs)
    card = json.loads((out / MODEL_CARD).read_text())
    assert card["format"] == "onnx" and card["export"]["quantize"] is None
    assert card["export"]["source_card_sha256"] == file_sha256(Path(model_dir) / MODEL_CARD)
    assert card["agreement"]["identical_labels"] == 1.0 and card["agreement"]["max_abs_logit_diff"] <= 1e-4
    assert card["agreement"]["points_lost"] == 0.0


@pytest.mark.parametrize("model_dir", ["ngram"], indirect=True)
def test_exported_ngram_student_reads_texts_shorter_than_its_ngrams(model_dir, tmp_path):
    """Its n-grams are hashed without a branch on the length, so the graph traced on longer texts gives a
    text of one or two words (no trigram) the same scores."""
    cli("export", model_dir, "--output", tmp_path / "onnx")
    source, exported = load_model(model_dir), load_model(tmp_path / "onnx")
    for texts in (["great"], ["so good", "bad"], ["great", "a slow , dull film about nothing"]):
        ours, theirs = predict_logits(source, texts), predict_logits(exported, texts)
        assert (ours.logits - theirs.logits).abs().max() <= 1e-5, texts


@pytest.mark.parametrize("model_dir", ["teacher-classifier", "teacher-tagger", "lstm", "lstm-tagger-crf",
                                       "idcnn-tagger", "transformer-tagger"], indirect=True)
def test_int8_export_runs_and_records_its_agreement(model_dir, tmp_path, capsys):
    task = load_model(model_dir).task
    out = tmp_path / "int8"
    cli("export", model_dir, "--output", out, "--quantize", "int8", "--check-data", check_file(task))
    assert "labels changed" in capsys.readouterr().out
    card = json.loads((out / MODEL_CARD).read_text())
    assert card["export"]["quantize"] == "int8"
    agreement = card["agreement"]
    assert 0.0 <= agreement["identical_labels"] <= 1.0 and agreement["examples"] == len(examples_of(task))
    exported = load_model(out)
    labels = decode_labels(exported, predict_logits(exported, examples_of(task)))
    known = set(exported.hierarchy.labels)
    assert all(label in known for label in (labels if task == "classification" else sum(labels, [])))


@pytest.mark.parametrize("model_dir", ["teacher-classifier", "teacher-tagger", "lstm-tagger-crf", "transformer"],
                         indirect=True)
def test_slim_copy_predicts_identically(model_dir, tmp_path):
    out = tmp_path / "slim"
    cli("export", model_dir, "--output", out, "--format", "safetensors")
    source, slim = load_model(model_dir), load_model(out)
    assert type(slim) is type(source)
    examples = examples_of(source.task)
    assert torch.equal(predict_logits(source, examples).logits, predict_logits(slim, examples).logits)
    size = sum(p.stat().st_size for p in Path(model_dir).rglob("*") if p.is_file())
    slim_size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    if source.kind == "teacher":  # a teacher sheds its optimizer state
        from distill.models.slim import load_slim_checkpoint
        assert not (out / "checkpoint.pt").exists() and slim_size < size / 2
        assert set(load_slim_checkpoint(out)) == {"config", "hierarchy", "encoder_state_dict",
                                                  "classifier_state_dict", "optimizer_state_dict"}


@pytest.mark.parametrize("model_dir", ["teacher-classifier"], indirect=True)
def test_predict_evaluate_and_compare_run_exports(model_dir, tmp_path, capsys):
    fp32, int8 = tmp_path / "fp32", tmp_path / "int8"
    cli("export", model_dir, "--output", fp32)
    cli("export", model_dir, "--output", int8, "--quantize", "int8", "--check-data", SENTIMENT_TEST)
    capsys.readouterr()
    cli("evaluate", fp32, SENTIMENT_TEST, "--output", tmp_path / "metrics.json", "--quiet")
    torch_metrics = tmp_path / "torch-metrics.json"
    cli("evaluate", model_dir, SENTIMENT_TEST, "--output", torch_metrics, "--quiet")
    assert json.loads((tmp_path / "metrics.json").read_text())["accuracy"] == \
        json.loads(torch_metrics.read_text())["accuracy"]
    capsys.readouterr()
    cli("predict", fp32, SAMPLES / "unlabeled_movies.txt")
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(records) == 300 and {"text", "label", "confidence"} <= set(records[0])
    cli("compare", model_dir, fp32, int8, "--data", SENTIMENT_TEST)
    table = capsys.readouterr().out
    assert str(fp32)[-20:] in table and str(int8)[-20:] in table


@pytest.mark.parametrize("model_dir", ["lstm"], indirect=True)
def test_export_refuses_bad_input(model_dir, tmp_path, capsys):
    onnx_dir = tmp_path / "onnx"
    cli("export", model_dir, "--output", onnx_dir)
    (tmp_path / "plain").mkdir()
    cases = [
        (["export", tmp_path / "plain", "--output", tmp_path / "a"], "not a model directory"),
        (["export", model_dir, "--output", model_dir], "is an input of this command"),
        (["export", model_dir, "--output", onnx_dir], "already holds a student model"),
        (["export", model_dir, "--output", tmp_path / "b", "--quantize", "int8"], "needs --check-data"),
        (["export", model_dir, "--output", tmp_path / "c", "--format", "safetensors", "--quantize", "int8",
          "--check-data", SENTIMENT_TEST], "only with --format onnx"),
        (["export", onnx_dir, "--output", tmp_path / "d"], "export --format onnx does not take an ONNX export; export "
                                                             f"the PyTorch model directory it came from ({model_dir})"),
        (["export", model_dir, "--output", tmp_path / "e", "--check-data", NER_TEST], str(NER_TEST)),
    ]
    for argv, fragment in cases:
        before = set(tmp_path.rglob("*"))
        status, err = run_main(capsys, *argv)
        assert status == 2 and fragment in err and len(err.strip().splitlines()) == 1, (argv, err)
        assert set(tmp_path.rglob("*")) == before, f"{argv} left files behind"
    cli("export", model_dir, "--output", onnx_dir, "--overwrite")  # replaced on request
    with pytest.raises(DistillError, match="is an exported ONNX model"):  # from_pretrained: PyTorch weights only
        load_model(onnx_dir, expect="student")
    # (kd and pseudo-label take an export as their teacher: tests/test_onnx_teacher.py)


@pytest.mark.parametrize("model_dir", ["lstm"], indirect=True)
def test_a_graph_the_int8_quantizer_refuses_is_one_line(model_dir, tmp_path, capsys, monkeypatch):
    """onnxruntime 1.30's quantizer (a GPU machine's) stopped the ID-CNN's int8 export with a traceback
    (`ValueError: Expected block.1.weight to be an initializer`); here it is made to fail so on any model."""
    import onnxruntime.quantization

    def refuse(*args, **kwargs):
        raise ValueError("Expected block.1.weight to be an initializer")
    monkeypatch.setattr(onnxruntime.quantization, "quantize_dynamic", refuse)
    status, err = run_main(capsys, "export", model_dir, "--output", tmp_path / "int8", "--quantize", "int8",
                           "--check-data", SENTIMENT_TEST)
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: onnxruntime {onnxruntime.__version__} could not quantize this model to int8 "
                          "(Expected block.1.weight to be an initializer); 1.31 or later")
    assert not (tmp_path / "int8").exists() and [p.name for p in tmp_path.iterdir()] == []


@pytest.mark.parametrize("model_dir", ["lstm"], indirect=True)
def test_an_onnx_model_whose_onnxruntime_does_not_import_is_one_line(model_dir, tmp_path, capsys, monkeypatch):
    """Installed but failing at its import (a broken install), onnxruntime was said to be missing: 'pip install'
    what is there."""
    cli("export", model_dir, "--output", tmp_path / "onnx")
    broken_package(monkeypatch, tmp_path / "site", "onnxruntime")
    status, err = run_main(capsys, "predict", tmp_path / "onnx", SAMPLES / "unlabeled_movies.txt")
    assert status == 2 and err == ("error: an ONNX model needs the onnxruntime package: pip install 'distill[export]' "
                                   "(onnxruntime is installed, but its import fails: ImportError: libdep.so.1: "
                                   "cannot open shared object file)\n")


@pytest.mark.parametrize("package", ["onnx", "onnxruntime"])
@pytest.mark.parametrize("model_dir", ["lstm"], indirect=True)
def test_an_onnx_export_without_its_packages_is_one_line_naming_the_extra(package, model_dir, tmp_path, capsys,
                                                                           monkeypatch):
    """A missing onnxruntime was a traceback from the card's version record, after the graph was written."""
    monkeypatch.setitem(sys.modules, package, None)  # as an uninstalled package: its import fails
    status, err = run_main(capsys, "export", model_dir, "--output", tmp_path / "onnx")
    assert status == 2 and err.strip() == f"error: ONNX export needs the {package} package: pip install 'distill[export]'"
    assert not (tmp_path / "onnx").exists()


@pytest.mark.parametrize("model_dir", ["lstm"], indirect=True)
def test_an_edited_export_is_refused(model_dir, tmp_path, capsys):
    out = tmp_path / "onnx"
    cli("export", model_dir, "--output", out)
    with open(out / "model.onnx", "ab") as handle:
        handle.write(b"\0")
    status, err = run_main(capsys, "predict", out, SAMPLES / "unlabeled_movies.txt")
    assert status == 2 and "corrupted or truncated" in err


@pytest.mark.parametrize("model_dir", ["lstm-tagger-crf"], indirect=True)
def test_an_export_loaded_in_python_predicts_and_is_not_saved_again(model_dir, tmp_path):
    """The docs say load_model runs an export and model.predict predicts; an OnnxModel had no predict, and no
    save_pretrained either (an AttributeError)."""
    out = tmp_path / "onnx"
    cli("export", model_dir, "--output", out)
    source, exported = load_model(model_dir), load_model(out)
    examples = examples_of("tagging")
    assert exported.predict(examples) == source.predict(examples) and exported.predict([]) == []
    with pytest.raises(DistillError, match="give a list of examples, not one string"):
        exported.predict("Mina spoke")
    refused = (f"{out}: is an exported ONNX model, which save_pretrained does not write again: copy its folder, or "
               f"export the PyTorch model it came from ({model_dir}) again")
    with pytest.raises(DistillError, match=re.escape(refused)):
        exported.save_pretrained(tmp_path / "copy")
    assert not (tmp_path / "copy").exists()
    assert LabelModel.predict is OnnxModel.predict  # one code path for every model
    with pytest.raises(DistillError, match="is an exported ONNX model, which predict, evaluate and compare run"):
        LabelModel.from_pretrained(out)


def test_the_agreement_records_the_metric_it_scores(tmp_path):
    """A plain-tag (POS) tagger is scored by token accuracy, which has no entity F1: the card said "f1"."""
    pos = DataOptions(tag_column=1)
    for name, task, train, options, metric in [
            ("pos", "tagging", SAMPLES / "ner_train.conll", pos, "token_accuracy"),
            ("ner", "tagging", SAMPLES / "ner_train.conll", DataOptions(), "f1"),
            ("sentiment", "classification", SAMPLES / "sentiment_train.csv", DataOptions(), "accuracy")]:
        model = load_model(tiny_student(tmp_path / name, {"model": "lstm" if task == "classification" else
                                                          "lstm-tagger"}, task, train, data=options))
        examples, gold = read_split(str(check_file(task)), task, options)
        measured = agreement(model, model, examples, gold)
        assert measured["metric"] == metric, name
        assert measured["score"] == measured["reference_score"] == evaluate(model, examples, gold)[metric]


def test_an_exports_source_is_found_from_any_working_directory(tmp_path, monkeypatch):
    """The card records the source folder's absolute path: a relative one, as typed, named another folder (or
    none) for a command run elsewhere, which then took the source as gone."""
    tiny_student(tmp_path / "work" / "m", {"model": "lstm"}, "classification", SAMPLES / "sentiment_train.csv")
    monkeypatch.chdir(tmp_path / "work")
    export_model("m", "e", "onnx")
    card = json.loads((tmp_path / "work" / "e" / MODEL_CARD).read_text())
    assert card["export"]["source"] == str(tmp_path / "work" / "m")
    monkeypatch.chdir(tmp_path)
    assert load_model("work/e").source_model() is not None


def test_compare_names_models_apart():
    """Only the last 34 characters were shown: runs of one model under different seeds looked alike."""
    rows = [{"model": model, "score": 0.5, "parameters": 10, "bytes": 1e6, "examples_per_second": 9.0, "speedup": 1.0,
             "examples": 40, "of": 40, "batch_size": 32}
            for model in ("runs/seed1/rotten-tomatoes/lstm-student-kd-kl-temperature-2",
                          "runs/seed2/rotten-tomatoes/lstm-student-kd-kl-temperature-2", "runs/demo/teacher")]
    table = format_table(rows).splitlines()[:-1]  # the last line says what was measured
    assert [line.split()[0] for line in table] == ["model", "seed1/rotten-tomatoes/lstm-student-kd-kl-temperature-2",
                                                   "seed2/rotten-tomatoes/lstm-student-kd-kl-temperature-2",
                                                   "runs/demo/teacher"]
    assert len({len(line) for line in table}) == 1  # the column widened to fit
    rows[1]["model"] = "runs/seed2/rotten-tomatoes/cnn-student-kd-kl-temperature-2"
    assert format_table(rows).splitlines()[1].startswith("s/lstm-student-kd-kl-temperature-2 ")  # apart already


def test_compare_times_the_models_in_alternating_rounds_and_shows_the_best(tmp_path, monkeypatch):
    """A model timed during a burst of load looked many times slower than its peer timed after it: every round
    times each model once, and a model's speed is its best round."""
    first = tiny_student(tmp_path / "lstm", {"model": "lstm"}, "classification", SAMPLES / "sentiment_train.csv")
    second = tiny_student(tmp_path / "cnn", {"model": "cnn"}, "classification", SAMPLES / "sentiment_train.csv")
    timed, speeds = [], iter([10.0, 50.0, 40.0, 20.0, 30.0, 60.0])  # a burst in round 1 for one, round 2 for the other
    monkeypatch.setattr("distill.compare.throughput", lambda model, examples, batch_size: timed.append(
        type(model).__name__) or next(speeds))
    rows = compare_models([first, second], str(SENTIMENT_TEST), rounds=3)
    assert timed == ["LSTMClassifier", "CNNClassifier"] * 3
    assert [row["rounds_examples_per_second"] for row in rows] == [[10.0, 40.0, 30.0], [50.0, 20.0, 60.0]]
    assert [row["examples_per_second"] for row in rows] == [40.0, 60.0] and rows[1]["speedup"] == 1.5
    with pytest.raises(DistillError, match="rounds must be a whole number >= 1, got 0"):
        compare_models([first], str(SENTIMENT_TEST), rounds=0)


def test_compare_checks_every_model_against_the_data_first(tmp_path, monkeypatch):
    """A model whose labels or task do not fit the data was found only at its turn, after the models before it
    were scored and timed, and the error named the data file alone."""
    sentiment = tiny_student(tmp_path / "sentiment", {"model": "lstm"}, "classification",
                             SAMPLES / "sentiment_train.csv")
    topics = tiny_student(tmp_path / "topics", {"model": "lstm"}, "classification", SAMPLES / "topics_train.csv")
    tagger = tiny_student(tmp_path / "tagger", {"model": "lstm-tagger"}, "tagging", SAMPLES / "ner_train.conll")

    def scored(*args, **kwargs):
        raise AssertionError("a model was scored before every model was checked")
    monkeypatch.setattr("distill.compare.evaluate", scored)
    with pytest.raises(DistillError, match=re.escape(f"model {topics}: {SENTIMENT_TEST}: label 'positive' is not one "
                                                     "of the model's labels")):
        compare_models([sentiment, topics], str(SENTIMENT_TEST))
    with pytest.raises(DistillError, match=re.escape(f"model {tagger}: {SENTIMENT_TEST}: is CSV (classification "
                                                     "data), but this command or model tags words")):
        compare_models([sentiment, tagger], str(SENTIMENT_TEST))
    with pytest.raises(DistillError, match=re.escape(f"model {tagger}: {SENTIMENT_TEST}: is CSV (classification "
                                                     "data), but this command or model tags words")):
        compare_models([tagger, sentiment], str(SENTIMENT_TEST))  # the tagger first: the data was blamed, unnamed
    (tmp_path / "empty.csv").write_text("", encoding="utf-8")
    (tmp_path / "blank.csv").write_text("text,label\n,positive\n", encoding="utf-8")
    for data, message in ((tmp_path, ": is a directory, expected a file"), (tmp_path / "no.csv", ": file not found"),
                          (tmp_path / "empty.csv", ": file is empty"),  # these two were said of the first model
                          (tmp_path / "blank.csv", ":2: empty or non-text value in column 'text'")):
        for models in ([sentiment, topics], [tagger, sentiment]):  # a tagger first: not "CSV, but it tags words"
            with pytest.raises(DistillError, match=f"^{re.escape(str(data) + message)}"):  # the data's fault alone
                compare_models(models, str(data))


@pytest.fixture
def bag_plugin(monkeypatch):
    """The documented plugin student, `examples/bag_student.py`, imported afresh with its "bag" registered for
    one test: a later docs page imports and registers it in a registry of its own, which a cached module skips."""
    import importlib
    import sys
    from distill.models import registry
    monkeypatch.setattr(registry, "_STUDENTS", registry._STUDENTS.copy())
    sys.modules.pop("examples.bag_student", None)
    yield importlib.import_module("examples.bag_student")
    sys.modules.pop("examples.bag_student", None)


@pytest.mark.usefixtures("bag_plugin")
def test_a_forward_the_onnx_exporter_cannot_translate_is_one_error_line(tmp_path, capfd):
    """The plugin student (`nn.EmbeddingBag` with `padding_idx`) gave a traceback and the exporter's TorchScript
    graph on stdout; now one line naming it, and nothing is left."""
    from procedures.cli import main
    bag = tiny_student(tmp_path / "bag", {"model": "examples.bag_student:BagOfEmbeddings"}, "classification",
                       SAMPLES / "sentiment_train.csv")
    capfd.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(["export", bag, "--output", str(tmp_path / "onnx")])
    out, err = capfd.readouterr()
    assert exit_info.value.code == 2 and err.strip() == (
        f"error: {bag}: this student cannot be exported to ONNX (embedding_bag with padding_idx); "
        "export it with --format safetensors instead"), err
    assert "graph" not in out and not (tmp_path / "onnx").exists()
    cli("export", bag, "--output", tmp_path / "slim", "--format", "safetensors")  # as the error suggests


from tests.test_hub_teacher import conll_sentences, hf_tagger  # noqa: E402,F401  (hf_tagger: a fixture)


def test_a_transformers_classifier_exports_to_onnx_and_teaches_as_an_export_does(  # noqa: F811 (hf_tagger)
        tiny_hf_classifier, hf_tagger, tmp_path, monkeypatch, capsys):
    """The teacher-kind table takes a transformers classifier's folder in export --format onnx (int8 too): the
    export gives the model's own logits, and teaches pseudo-label and kd as an export of distill's teacher does;
    the formats it cannot take are refused with the table's line."""
    monkeypatch.setenv("DISTILL_CACHE", str(tmp_path / "cache"))
    int8 = tmp_path / "int8"
    cli("export", tiny_hf_classifier, "--output", int8, "--quantize", "int8", "--check-data", SENTIMENT_TEST)
    card = json.loads((int8 / MODEL_CARD).read_text())
    assert card["model"] == "transformers" and card["labels"] == ["negative", "positive"]
    assert card["agreement"]["examples"] == 60 and not (int8 / "model.safetensors").exists()
    teacher, exported = load_model(tiny_hf_classifier), load_model(int8)
    assert isinstance(exported, OnnxModel) and exported.source_model().fingerprint() == teacher.fingerprint()
    texts = read_split(str(SENTIMENT_TEST), "classification", DataOptions())[0][:20]
    assert torch.allclose(predict_logits(exported, texts).logits, predict_logits(teacher, texts).logits, atol=0.05)
    pseudo, run = tmp_path / "pseudo.jsonl", tmp_path / "student"
    cli("pseudo-label", "--teacher", int8, "--input", SAMPLES / "unlabeled_movies.txt", "--output", pseudo, "--quiet")
    assert len(pseudo.read_text().splitlines()) == 300
    cli("pseudo-label", "--teacher", tiny_hf_classifier, "--use-export", int8, "--input", SAMPLES /
        "unlabeled_movies.txt", "--output", tmp_path / "bulk.jsonl", "--quiet")  # the export is of this teacher
    cli("kd", "--teacher", int8, "--model", "lstm", "--embedding-dim", "8", "--hidden-dim", "8", "--train",
        SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv", "--unlabeled", pseudo, "--output",
        run, "--epochs", "1", "--quiet")
    summary = json.loads((run / "train_summary.json").read_text())
    assert summary["cached_examples"] >= 300  # pseudo-label's logits of the export, read from the cache
    tagger = tmp_path / "tagger"
    cli("export", hf_tagger, "--output", tagger)
    sentences = conll_sentences(NER_TEST)[:8]
    ours, theirs = predict_logits(load_model(tagger), sentences), predict_logits(load_model(hf_tagger), sentences)
    assert torch.allclose(ours.logits, theirs.logits, atol=1e-4)
    capsys.readouterr()
    for form in ("safetensors", "transformers"):
        status, err = run_main(capsys, "export", tiny_hf_classifier, "--output", tmp_path / form, "--format", form)
        assert status == 2 and err.strip() == (f"error: {tiny_hf_classifier}: export --format {form} does not take "
                                               "a transformers classifier; it is a transformers model already: copy "
                                               "its folder, or export it --format onnx")
        assert not (tmp_path / form).exists()
