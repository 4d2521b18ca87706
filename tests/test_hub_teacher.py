"""A transformers classifier folder (`save_pretrained` of an AutoModelFor...Classification and its tokenizer)
is a teacher wherever one is taken: kd, pseudo-label, evaluate, predict, compare and the Python API."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
import torch

from distill.errors import DistillError
from tests.conftest import SAMPLES, cli, tiny_encoder

SENTIMENT = ["negative", "positive"]
NER = ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


def labelled(names: list[str]) -> dict:
    return {"id2label": dict(enumerate(names)), "label2id": {name: i for i, name in enumerate(names)}}


def folder(tmp_path_factory, name: str) -> Path:
    made = tmp_path_factory.mktemp("hf") / name
    made.mkdir()
    return made


@pytest.fixture(scope="session")
def hf_classifier(tiny_hf_classifier) -> str:
    """A tiny random DistilBertForSequenceClassification with the sentiment labels, and its tokenizer."""
    return tiny_hf_classifier


@pytest.fixture(scope="session")
def hf_tagger(tmp_path_factory) -> str:
    """A tiny random BertForTokenClassification with CoNLL's tags, reading 24 sub-tokens at a time (a long
    sentence is read in windows)."""
    from transformers import BertConfig, BertForTokenClassification
    return tiny_encoder(folder(tmp_path_factory, "ner"), 400, False, 1, lambda size:
                        BertForTokenClassification(BertConfig(
                            vocab_size=size, hidden_size=24, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=48, max_position_embeddings=24, **labelled(NER))))


@pytest.fixture(scope="session")
def hf_generic(tmp_path_factory) -> str:
    """A tiny BertForSequenceClassification whose config names its labels LABEL_0 and LABEL_1."""
    from transformers import BertConfig, BertForSequenceClassification
    return tiny_encoder(folder(tmp_path_factory, "generic"), 400, False, 2, lambda size:
                        BertForSequenceClassification(BertConfig(
                            vocab_size=size, hidden_size=24, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=48, max_position_embeddings=64)))


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DISTILL_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def conll_sentences(path: Path) -> list[list[str]]:
    sentences, words = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("-DOCSTART-"):
            continue
        if not line.strip():
            if words:
                sentences.append(words)
            words = []
        else:
            words.append(line.split()[0])
    return sentences + ([words] if words else [])


def test_classifier_logits_are_the_models_own(hf_classifier):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from distill.inference import predict_logits
    from distill.models import load_model
    teacher = load_model(hf_classifier)
    assert type(teacher).__name__ == "TransformersTeacher" and teacher.task == "classification"
    assert teacher.hierarchy.labels == SENTIMENT and teacher.kind == "teacher"
    texts = ["A witty, heartfelt film.", "The plot is stale and the acting is worse.", "Fine."]
    model = AutoModelForSequenceClassification.from_pretrained(hf_classifier).eval()
    tokenizer = AutoTokenizer.from_pretrained(hf_classifier)
    with torch.no_grad():
        theirs = model(**tokenizer(texts, padding=True, return_tensors="pt")).logits
    assert torch.allclose(predict_logits(teacher, texts).logits, theirs, atol=1e-5)
    assert teacher.predict(texts) == [SENTIMENT[i] for i in theirs.argmax(-1).tolist()]


def test_tagger_logits_are_the_models_own_at_first_sub_tokens(hf_tagger):
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    from distill.inference import predict_logits
    from distill.models import load_teacher
    teacher = load_teacher(hf_tagger)
    assert teacher.task == "tagging" and teacher.hierarchy.labels == NER and teacher.hierarchy.tag_scheme == "IOB2"
    sentences = [["Altavian", "police", "arrested", "8"], ["LAKE", "ORRIN"], ["Peace", "talks", "resumed", "."]]
    model = AutoModelForTokenClassification.from_pretrained(hf_tagger).eval()
    tokenizer = AutoTokenizer.from_pretrained(hf_tagger)
    encoded = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        theirs = model(**encoded).logits
    results = predict_logits(teacher, sentences)
    for row, words in enumerate(sentences):
        ids = encoded.word_ids(row)
        first = [ids.index(word) for word in range(len(words))]
        ours, scored = results.example(row)
        assert scored.all() and torch.allclose(ours, theirs[row, first], atol=1e-5)


def test_a_long_sentence_is_tagged_in_windows(hf_tagger):
    from distill.models import load_teacher
    teacher = load_teacher(hf_tagger)
    long = [word for sentence in conll_sentences(SAMPLES / "ner_dev.conll")[:6] for word in sentence]
    assert len(teacher.tokenizer(long, is_split_into_words=True)["input_ids"]) > 24
    (tags,) = teacher.predict([long])
    assert len(tags) == len(long) and set(tags) <= set(NER)


def summary_of(run: Path) -> dict:
    return json.loads((run / "train_summary.json").read_text(encoding="utf-8"))


def test_cli_classifier_teacher_through_every_command(hf_classifier, tmp_path, cache, capsys):
    """pseudo-label stores the logits kd then reads (no second teacher pass over the unlabeled text);
    evaluate, predict and compare take the folder as a model."""
    pseudo, run = tmp_path / "pseudo.jsonl", tmp_path / "student"
    cli("pseudo-label", "--teacher", hf_classifier, "--input", SAMPLES / "unlabeled_movies.txt", "--output", pseudo,
        "--quiet")
    records = [json.loads(line) for line in pseudo.read_text(encoding="utf-8").splitlines()]
    assert records and {record["label"] for record in records} <= set(SENTIMENT)
    cli("kd", "--teacher", hf_classifier, "--model", "lstm", "--train", SAMPLES / "sentiment_train.csv",
        "--dev", SAMPLES / "sentiment_dev.csv", "--unlabeled", pseudo, "--output", run, "--epochs", "1",
        "--embedding-dim", "16", "--hidden-dim", "16", "--quiet")
    summary = summary_of(run)
    assert summary["cached_examples"] >= len(records) and summary["teacher"] == hf_classifier
    assert summary["inputs"]["teacher"].startswith("transformers:")
    from distill.models import load_teacher
    assert Path(summary["cache_dir"]).name == load_teacher(hf_classifier).fingerprint()
    metrics = tmp_path / "teacher_metrics.json"
    cli("evaluate", hf_classifier, SAMPLES / "sentiment_test.csv", "--output", metrics, "--quiet")
    assert 0 <= json.loads(metrics.read_text(encoding="utf-8"))["accuracy"] <= 1
    before = sorted(p.name for p in Path(hf_classifier).iterdir())
    capsys.readouterr()
    cli("evaluate", hf_classifier, SAMPLES / "sentiment_test.csv", "--quiet")  # a folder distill did not write:
    assert json.loads(capsys.readouterr().out)["accuracy"] == json.loads(metrics.read_text(encoding="utf-8"))[
        "accuracy"]  # printed, and nothing written among its files
    assert sorted(p.name for p in Path(hf_classifier).iterdir()) == before
    cli("predict", hf_classifier, SAMPLES / "unlabeled_movies.txt")
    predicted = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [p["label"] for p in predicted] == [r["label"] for r in records]
    cli("compare", hf_classifier, run, "--data", SAMPLES / "sentiment_test.csv", "--limit", "20")
    assert "sentiment" in capsys.readouterr().out


def test_cli_tagger_teacher(hf_tagger, tmp_path, cache, capsys):
    run = tmp_path / "tagger"
    cli("kd", "--teacher", hf_tagger, "--model", "lstm-tagger", "--train", SAMPLES / "ner_train.conll",
        "--dev", SAMPLES / "ner_dev.conll", "--output", run, "--epochs", "1", "--quiet")
    assert summary_of(run)["teacher"] == hf_tagger
    from distill.inference import evaluate
    from distill.models import load_teacher
    expected = evaluate(load_teacher(hf_tagger), SAMPLES / "ner_dev.conll")  # the model's own dev scores
    assert {name: summary_of(run)["teacher_dev"][name] for name in expected} == pytest.approx(expected)
    metrics = tmp_path / "metrics.json"
    cli("evaluate", hf_tagger, SAMPLES / "ner_test.conll", "--output", metrics, "--quiet")
    assert {"f1", "token_accuracy"} <= set(json.loads(metrics.read_text(encoding="utf-8")))
    text = tmp_path / "sentences.txt"
    text.write_text("".join(" ".join(words) + "\n" for words in conll_sentences(SAMPLES / "ner_dev.conll")),
                    encoding="utf-8")
    pseudo = tmp_path / "tags.jsonl"
    cli("pseudo-label", "--teacher", hf_tagger, "--input", text, "--output", pseudo, "--quiet")
    records = [json.loads(line) for line in pseudo.read_text(encoding="utf-8").splitlines()]
    assert all(set(r["tags"]) <= set(NER) and len(r["tags"]) == len(r["tokens"]) for r in records)
    capsys.readouterr()
    cli("predict", hf_tagger, text)
    assert [json.loads(line)["tags"] for line in capsys.readouterr().out.splitlines()] == [r["tags"] for r in records]
    cli("compare", hf_tagger, run, "--data", SAMPLES / "ner_test.conll", "--limit", "10")


def refused(capsys, *args) -> str:
    """nlp-train ARGS fails with status 2; its one-line error."""
    from procedures.cli import main
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1, err
    return err


def copy_of(folder: str, tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(folder, tmp_path / name))


def kd_args(teacher, output) -> list:
    return ["kd", "--teacher", teacher, "--model", "lstm", "--train", SAMPLES / "sentiment_train.csv",
            "--dev", SAMPLES / "sentiment_dev.csv", "--output", output, "--epochs", "1", "--quiet"]


def test_distiller_takes_the_folder_or_the_loaded_teacher(hf_classifier, tmp_path, cache):
    from distill import Distiller, LabelModel, Output, Runtime, Teacher, TrainSettings, TransformersTeacher
    quiet = Runtime(threads=1, progress=False)
    train, dev = str(SAMPLES / "sentiment_train.csv"), str(SAMPLES / "sentiment_dev.csv")
    by_path = Distiller(hf_classifier, "lstm", settings=TrainSettings(epochs=1), env=quiet).fit(train, dev)
    teacher = TransformersTeacher.from_pretrained(hf_classifier)
    assert type(LabelModel.from_pretrained(hf_classifier)) is TransformersTeacher
    loaded = Distiller(teacher, "lstm", settings=TrainSettings(epochs=1), env=quiet).fit(train, dev)
    assert by_path.summary["cached_examples"] == 0 and loaded.summary["cached_examples"] == len(by_path.model.predict(
        [row for row in (SAMPLES / "sentiment_train.csv").read_text().splitlines()[1:]]))
    texts = ["A witty, heartfelt film.", "Tedious."]
    assert by_path.model.predict(texts) == loaded.model.predict(texts)
    with pytest.raises(DistillError, match="holds a TransformersTeacher, not a Teacher"):
        Teacher.from_pretrained(hf_classifier)
    with pytest.raises(DistillError, match="lies inside"):  # never written into the teacher's folder
        Distiller(teacher, "lstm", settings=TrainSettings(epochs=1), env=quiet).fit(
            train, dev, output=Output(Path(hf_classifier) / "student"))
    with pytest.raises(DistillError, match="a transformers classifier is a teacher given to distill"):
        teacher.save_pretrained(tmp_path / "copy")


def test_pickled_weights_are_refused_unread(hf_classifier, tmp_path, capsys):
    folder = copy_of(hf_classifier, tmp_path, "pickled")
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"never unpickled")
    err = refused(capsys, *kd_args(folder, tmp_path / "run"))
    assert "holds its weights only as pytorch_model.bin, a pickle, which distill never loads" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("fixture", ["hf_classifier", "tiny_causal_lm"])
def test_weights_that_lack_a_tensor_or_do_not_fit_the_config_are_refused_in_one_line(fixture, request, tmp_path,
                                                                                      capsys):
    """transformers filled a missing tensor with random values, printed its load report and went on: evaluate
    scored, and pseudo-label labelled, with a partly random model."""
    from safetensors.torch import load_file, save_file
    folder = copy_of(request.getfixturevalue(fixture), tmp_path, "lacking")
    tensors = load_file(folder / "model.safetensors")
    dropped = sorted(name for name in tensors if "layer" in name and name.endswith("weight"))[-1]
    save_file({name: value for name, value in tensors.items() if name != dropped}, folder / "model.safetensors",
              metadata={"format": "pt"})
    args = ["evaluate", folder, SAMPLES / "sentiment_dev.csv", "--output", tmp_path / "m.json", "--labels",
            "negative,positive"][:None if fixture == "tiny_causal_lm" else 5]
    err = refused(capsys, *args)
    assert f"{folder}: its weights lack 1 of the model's tensors (e.g. " in err and "LOAD REPORT" not in err
    config = json.loads((folder / "config.json").read_text())
    shutil.copy(request.getfixturevalue(fixture) + "/model.safetensors", folder / "model.safetensors")
    size_key = "dim" if "dim" in config else "hidden_size"
    (folder / "config.json").write_text(json.dumps({**config, size_key: config[size_key] * 2}))
    err = refused(capsys, *args)
    assert "cannot load its weights: they do not fit its config.json" in err and "LOAD REPORT" not in err
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("fixture", ["hf_classifier", "tiny_causal_lm"])
def test_weights_beyond_the_config_or_not_finite_are_refused_in_one_line(fixture, request, tmp_path, capsys):
    """A config of one layer fewer than the weights (or another head) loaded with the extra tensors dropped in
    silence, and a NaN weight was used as it was: predict wrote "confidence": NaN (no JSON), pseudo-label labelled
    every text alike, kd stopped with 'lower the learning rate'."""
    from safetensors.torch import load_file, save_file
    source = request.getfixturevalue(fixture)
    folder = copy_of(source, tmp_path, "edited")
    config = json.loads((folder / "config.json").read_text())
    layers = "n_layers" if "n_layers" in config else "num_hidden_layers"
    (folder / "config.json").write_text(json.dumps({**config, layers: config[layers] - 1}))
    args = ["pseudo-label", "--teacher", folder, "--input", SAMPLES / "unlabeled_movies.txt", "--output",
            tmp_path / "out.jsonl", "--no-cache"] + (["--labels", "negative,positive"] if fixture == "tiny_causal_lm"
                                                     else [])
    err = refused(capsys, *args)
    assert f"{folder}: its weights hold " in err and "tensors its config.json has no place for (e.g. " in err, err
    shutil.copy(Path(source) / "config.json", folder / "config.json")
    tensors = load_file(folder / "model.safetensors")
    poisoned = sorted(name for name in tensors if tensors[name].is_floating_point())[-1]
    tensors[poisoned] = torch.full_like(tensors[poisoned], float("nan"))
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    err = refused(capsys, *args)
    assert f"{folder}: its weights hold NaN or infinite values (in " in err, err
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("fixture", ["hf_classifier", "tiny_causal_lm"])
def test_a_weight_stored_as_integers_is_refused_in_one_line(fixture, request, tmp_path, capsys):
    """A floating weight saved as int64 (a damaged or hand-edited model.safetensors) was cast to float in silence
    and used with its fractions cut off: a teacher of truncated weights."""
    from safetensors.torch import load_file, save_file
    folder = copy_of(request.getfixturevalue(fixture), tmp_path, "ints")
    tensors = load_file(folder / "model.safetensors")
    name = sorted(name for name in tensors if tensors[name].is_floating_point())[-1]
    tensors[name] = tensors[name].to(torch.int64)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    labels = ["--labels", "negative,positive"] if fixture == "tiny_causal_lm" else []
    err = refused(capsys, "pseudo-label", "--teacher", folder, "--input", SAMPLES / "unlabeled_movies.txt",
                  "--output", tmp_path / "out.jsonl", "--no-cache", *labels)
    assert f"{folder}: its weights hold {name} as int64, where the model's is a floating tensor" in err, err
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("fixture", ["hf_classifier", "tiny_causal_lm"])
def test_a_tokenizer_of_more_tokens_than_the_model_embeds_is_refused(fixture, request, tmp_path, capsys):
    """Tokens added to the tokenizer and the model never resized (`resize_token_embeddings`): predict, evaluate,
    kd stopped with an IndexError traceback at the first text holding one."""
    from transformers import AutoTokenizer
    folder = copy_of(request.getfixturevalue(fixture), tmp_path, "added")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    size = len(tokenizer)
    tokenizer.add_tokens(["delightful", "muddled"])
    tokenizer.save_pretrained(folder)
    labels = ["--labels", "negative,positive"] if fixture == "tiny_causal_lm" else []
    err = refused(capsys, "evaluate", folder, SAMPLES / "sentiment_test.csv", "--output", tmp_path / "m.json", *labels)
    assert f"{folder}: its tokenizer has {size + 2} tokens and its model embeds {size}, so a text" in err, err
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("fixture", ["hf_classifier", "tiny_causal_lm"])
def test_a_config_value_transformers_refuses_is_said_of_the_config(fixture, request, tmp_path, capsys):
    """transformers reads the config to choose the tokenizer, so a size written as text was 'cannot load its
    tokenizer (... Field 'dim' expected int ...)': the tokenizer was fine."""
    folder = copy_of(request.getfixturevalue(fixture), tmp_path, "typed")
    config = json.loads((folder / "config.json").read_text())
    size_key = "dim" if "dim" in config else "hidden_size"
    (folder / "config.json").write_text(json.dumps({**config, size_key: str(config[size_key])}))
    labels = ["--labels", "negative,positive"] if fixture == "tiny_causal_lm" else []
    err = refused(capsys, "predict", folder, SAMPLES / "unlabeled_movies.txt", *labels)
    assert f"{folder}: its config.json does not describe a model transformers can build (" in err, err
    assert f"'{size_key}'" in err and "tokenizer" not in err, err


@pytest.mark.parametrize("text, said", [("{\"architectures\": [", "is not valid JSON (Expecting"),
                                        ("[1]", "is not a JSON object"),
                                        ("{\"dim\": 8}", "names neither architectures nor model_type")])
def test_a_config_json_that_is_no_transformers_config_is_named(text, said, hf_classifier, tmp_path, capsys):
    folder = copy_of(hf_classifier, tmp_path, "config")
    (folder / "config.json").write_text(text)
    err = refused(capsys, "predict", folder, SAMPLES / "unlabeled_movies.txt")
    assert f"{folder}: its config.json {said}" in err and "so it is no transformers model" in err


def test_a_model_that_is_not_a_classifier_is_refused(tmp_path, capsys, hf_classifier):
    from transformers import BertConfig, BertModel, GPT2Config
    encoder = tmp_path / "encoder"
    BertModel(BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=8)).save_pretrained(encoder)
    err = refused(capsys, "predict", encoder, SAMPLES / "unlabeled_movies.txt")
    assert "is a BertModel (a bare encoder, with no classification head); distill takes a transformers sequence or " \
           "token classifier" in err
    causal = tmp_path / "gpt2"
    causal.mkdir()
    GPT2Config(n_layer=1, n_embd=8, n_head=2, architectures=["GPT2LMHeadModel"]).to_json_file(causal / "config.json")
    err = refused(capsys, *kd_args(causal, tmp_path / "run"))  # a causal LM teaches asked a prompt: its weights first
    assert "missing model.safetensors: a causal language model is read from safetensors weights" in err


@pytest.mark.parametrize("model_type", ["internlm2", None])
def test_a_causal_lm_transformers_does_not_build_is_not_called_a_non_classifier(tiny_causal_lm, tmp_path, capsys,
                                                                                model_type):
    """A causal LM of custom code (or whose config lost its model_type) is refused as that, everywhere, before any
    output; was: 'is a LlamaForCausalLM (a causal language model); distill takes a transformers sequence or token
    classifier', of a kind distill takes."""
    folder = shutil.copytree(tiny_causal_lm, tmp_path / "custom")
    config = json.loads((folder / "config.json").read_text())
    config.pop("model_type") if model_type is None else config.update(model_type=model_type)
    (folder / "config.json").write_text(json.dumps(config))
    for args in (kd_args(folder, tmp_path / "run"), ["evaluate", folder, SAMPLES / "sentiment_dev.csv", "--output",
                                                     tmp_path / "m.json"], ["export", folder, "--output", tmp_path / "x"]):
        assert refused(capsys, *args) == (
            f"error: {folder}: is a LlamaForCausalLM, a causal language model of a class transformers does not build "
            f"for model type {model_type!r} (custom code, which distill never runs, or a config.json without its "
            "model_type); distill takes a causal language model that transformers builds itself, or a transformers "
            "sequence or token classifier (...ForSequenceClassification or ...ForTokenClassification)")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["custom"]


def test_the_fingerprint_holds_the_weights_transformers_loads(hf_classifier, tmp_path):
    """A folder with model.safetensors and a shards index too: transformers loads model.safetensors. Was: the
    fingerprint (the logit cache's key) held the index's shards, so new weights in model.safetensors kept the
    old key and the cache gave the old model's logits."""
    from distill.models.hub_files import source_fingerprint
    folder = shutil.copytree(hf_classifier, tmp_path / "both")
    (folder / "model-00001-of-00001.safetensors").write_bytes(b"a stale shard")
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {"classifier.weight": "model-00001-of-00001.safetensors"}}))
    before = source_fingerprint(folder)
    weights = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(weights[:-1] + bytes([weights[-1] ^ 1]))
    assert source_fingerprint(folder) != before


@pytest.mark.parametrize("id2label, message", [
    ({"0": "negative", "2": "positive"}, "numbers its labels [0, 2], not 0 to 1, so an output of the model has no "
                                         "label; restore the config from the model's source"),
    ({"0": " ", "1": "positive"}, "gives output 0 no label name: name it in its config.json"),
    ({"0": "positive", "1": "positive "}, "names 'positive' for two outputs, which could not be told apart: give "
                                          "each output its own label"),
])
def test_an_id2label_that_does_not_name_each_output_once_is_refused(hf_classifier, tmp_path, capsys, id2label,
                                                                    message):
    """Was: a KeyError traceback at the first prediction (a number missing), a class named "" in the predictions,
    or 'duplicate labels in [...]' naming no folder."""
    folder = shutil.copytree(hf_classifier, tmp_path / "edited")
    config = json.loads((folder / "config.json").read_text())
    config.update(id2label=id2label, label2id={name: int(index) for index, name in id2label.items()})
    (folder / "config.json").write_text(json.dumps(config))
    for args in (["evaluate", folder, SAMPLES / "sentiment_dev.csv", "--output", tmp_path / "m.json"],
                 ["predict", folder, SAMPLES / "unlabeled_movies.txt"], kd_args(folder, tmp_path / "run")):
        assert refused(capsys, *args) == f"error: {folder}: its config.json's id2label {message}"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["edited"]


def test_labels_are_read_without_the_blanks_around_them(hf_classifier, tmp_path):
    """As a data file's labels are: 'positive ' was a label no gold file could spell."""
    from distill.models import load_model
    folder = shutil.copytree(hf_classifier, tmp_path / "spaced")
    config = json.loads((folder / "config.json").read_text())
    config.update(id2label={"0": "negative ", "1": " positive"}, label2id={"negative ": 0, " positive": 1})
    (folder / "config.json").write_text(json.dumps(config))
    assert load_model(folder).hierarchy.labels == ["negative", "positive"]


def test_labels_the_teacher_does_not_have_are_refused(hf_generic, hf_classifier, tmp_path, capsys, caplog, cache):
    with caplog.at_level(logging.WARNING, logger="distill"):
        err = refused(capsys, *kd_args(hf_generic, tmp_path / "run"))
    assert "label sets differ: teacher ['LABEL_0', 'LABEL_1'] vs ['negative', 'positive']" in err
    assert "id2label gives generic names (LABEL_0, LABEL_1), kept as its labels" in caplog.text
    err = refused(capsys, "evaluate", hf_generic, SAMPLES / "sentiment_test.csv", "--output", tmp_path / "m.json")
    assert "is not one of the model's labels (known: LABEL_0, LABEL_1)" in err and "sentiment_test.csv: label '" in err
    err = refused(capsys, "kd", "--teacher", hf_classifier, "--model", "lstm-tagger", "--train",
                  SAMPLES / "ner_train.conll", "--dev", SAMPLES / "ner_dev.conll", "--output", tmp_path / "t")
    assert "does tagging but teacher" in err and "does classification" in err


def test_outputs_never_go_into_the_teacher_folder(hf_classifier, tmp_path, capsys, cache):
    teacher = Path(hf_classifier)
    before = sorted(p.name for p in teacher.iterdir())
    assert "lies inside" in refused(capsys, *kd_args(teacher, teacher / "student"))
    assert "lies inside" in refused(capsys, *kd_args(teacher, tmp_path / "run"), "--cache-dir", teacher / "cache")
    err = refused(capsys, "pseudo-label", "--teacher", teacher, "--input", SAMPLES / "unlabeled_movies.txt",
                  "--output", teacher / "vocab.txt", "--overwrite")
    assert "is a file of the transformers model" in err
    err = refused(capsys, "evaluate", teacher, SAMPLES / "sentiment_test.csv", "--output", teacher / "config.json",
                  "--overwrite")
    assert "is a file of the transformers model" in err
    assert sorted(p.name for p in teacher.iterdir()) == before


def test_what_kd_needs_beyond_logits(hf_classifier, tmp_path, capsys, cache):
    """The input embeddings start a word student's (kd's default); the layer terms and copying layers are
    refused in one line."""
    err = refused(capsys, *kd_args(hf_classifier, tmp_path / "run"), "--hidden-weight", "1")
    assert "the layer terms" in err and f"the teacher must be distill's transformer teacher or a transformer " \
        f"student, not {hf_classifier} (TransformersTeacher), whose layers distill does not read" in err
    err = refused(capsys, "kd", "--teacher", hf_classifier, "--model", "transformer", "--train",
                  SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv", "--output", tmp_path / "t")
    assert "transformers classifier, whose layers distill does not copy" in err


def test_the_fingerprint_is_the_files(hf_classifier, tmp_path):
    from distill.models import load_teacher
    folder = copy_of(hf_classifier, tmp_path, "copy")
    first = load_teacher(folder).fingerprint()
    assert load_teacher(hf_classifier).fingerprint() == first
    (folder / "eval_metrics.json").write_text("{}")  # not a file the model reads
    assert load_teacher(folder).fingerprint() == first
    config = json.loads((folder / "config.json").read_text())
    config["id2label"] = {"0": "bad", "1": "good"}
    (folder / "config.json").write_text(json.dumps(config))
    changed = load_teacher(folder)
    assert changed.fingerprint() != first and changed.hierarchy.labels == ["bad", "good"]


def test_a_hub_name_loads_through_the_hub_cache(hf_classifier, tmp_path, monkeypatch, cache):
    """hub:NAME is fetched by the hub client into its cache (offline here: a snapshot put there by hand) and
    read from there as a folder is, with the same fingerprint."""
    from huggingface_hub import constants

    from distill.models import load_teacher
    snapshot = tmp_path / "hub" / "models--tiny--sentiment" / "snapshots" / ("0" * 40)
    shutil.copytree(hf_classifier, snapshot)
    (tmp_path / "hub" / "models--tiny--sentiment" / "refs").mkdir()
    (tmp_path / "hub" / "models--tiny--sentiment" / "refs" / "main").write_text("0" * 40)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    teacher = load_teacher("hub:tiny/sentiment")
    assert teacher.fingerprint() == load_teacher(hf_classifier).fingerprint()
    assert teacher.predict(["A witty film."]) == load_teacher(hf_classifier).predict(["A witty film."])
    with pytest.raises(DistillError, match="hub:tiny/missing: cannot fetch the model from the Hugging Face hub"):
        load_teacher("hub:tiny/missing")


def test_a_text_longer_than_the_model_reads_is_truncated_with_the_warning(hf_classifier, tmp_path, caplog):
    from distill.models import load_teacher
    long_text = " ".join(["a quietly devastating film"] * 40)
    texts = tmp_path / "long.txt"
    texts.write_text(long_text + "\nshort and sweet\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="distill"):
        cli("predict", hf_classifier, texts)
    assert "1 of 2 texts (50.0%) are longer than the 62 sub-tokens the teacher reads (the model's 64)" in caplog.text
    assert "a transformers classifier is not read in windows" in caplog.text
    (label,) = load_teacher(hf_classifier).predict([long_text])
    assert label in SENTIMENT


@pytest.mark.parametrize("fixture", ["hf_classifier", "hf_tagger"])
def test_a_folder_without_its_tokenizer_is_refused_by_every_command(fixture, request, tmp_path, capsys, cache):
    """Without its tokenizer files transformers falls back to a tokenizer of the special tokens alone (every word
    [UNK]): a blind teacher, refused in one line wherever a teacher is taken, before an output is made."""
    from distill.models.hub_teacher import TOKENIZER_FILES
    folder = copy_of(request.getfixturevalue(fixture), tmp_path, "no-tokenizer")
    for name in TOKENIZER_FILES:
        (folder / name).unlink(missing_ok=True)
    tagging = fixture == "hf_tagger"
    text = SAMPLES / ("ner_dev.conll" if tagging else "unlabeled_movies.txt")
    runs = [("predict", folder, SAMPLES / "unlabeled_movies.txt"),
            ("pseudo-label", "--teacher", folder, "--input", SAMPLES / "unlabeled_movies.txt", "--output",
             tmp_path / "pseudo.jsonl"),
            ("kd", "--teacher", folder, "--model", "lstm-tagger" if tagging else "lstm", "--train",
             SAMPLES / ("ner_train.conll" if tagging else "sentiment_train.csv"), "--dev", text if tagging else
             SAMPLES / "sentiment_dev.csv", "--output", tmp_path / "run", "--epochs", "1")]
    for args in runs:
        err = refused(capsys, *args)
        assert "cannot load its tokenizer (none of tokenizer.json, vocab.txt" in err and str(folder) in err
    assert not (tmp_path / "run").exists() and not (tmp_path / "pseudo.jsonl").exists()
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", encoding="utf-8")  # specials alone
    assert "its vocab.txt has 5 lines, but the model has" in refused(capsys, *runs[0])  # cut short of the model's


def test_a_vocab_txt_cut_short_is_refused_by_every_command(hf_classifier, tmp_path, capsys, cache):
    """Was: with no tokenizer.json, a vocab.txt of 300 of the model's 600 tokens was read, every word of the lost
    half as [UNK], and the teacher predicted and taught so."""
    folder = copy_of(hf_classifier, tmp_path, "cut")
    (folder / "tokenizer.json").unlink()
    lines = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
    (folder / "vocab.txt").write_text("\n".join(lines[:300]) + "\n", encoding="utf-8")
    expected = f"error: {folder}: its vocab.txt has 300 lines, but the model has 600 token embeddings (config.json's " \
               "vocab_size), so the vocabulary is cut short or another model's; give the folder the model was " \
               "saved to, whole"
    assert refused(capsys, "predict", folder, SAMPLES / "unlabeled_movies.txt") == expected
    assert refused(capsys, "pseudo-label", "--teacher", folder, "--input", SAMPLES / "unlabeled_movies.txt",
                   "--output", tmp_path / "pseudo.jsonl") == expected
    assert refused(capsys, *kd_args(folder, tmp_path / "run")) == expected
    assert not (tmp_path / "run").exists() and not (tmp_path / "pseudo.jsonl").exists()
    (folder / "vocab.txt").write_text("\n".join(lines[:598]) + "\n", encoding="utf-8")  # and two tokens added
    (folder / "added_tokens.json").write_text('{"<a>": 598, "<b>": 599}', encoding="utf-8")
    from distill.models import load_teacher
    assert len(load_teacher(folder).predict(["a fine film"])) == 1


def test_the_weights_config_json_names_key_the_cache_and_are_safetensors(hf_classifier, tmp_path, capsys, cache):
    """Was: with config.json's transformers_weights naming other.safetensors, transformers loaded that file, but the
    fingerprint (the logit cache's key) held model.safetensors: other weights there kept the cached logits."""
    from safetensors.torch import load_file, save_file

    from distill.models import load_teacher
    from distill.models.hub_files import source_fingerprint
    folder = copy_of(hf_classifier, tmp_path, "named")
    shutil.copy(folder / "model.safetensors", folder / "other.safetensors")
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    (folder / "config.json").write_text(json.dumps({**config, "transformers_weights": "other.safetensors"}),
                                        encoding="utf-8")
    first = load_teacher(folder).fingerprint()
    save_file({name: tensor + 0.5 for name, tensor in load_file(folder / "other.safetensors").items()},
              folder / "other.safetensors", metadata={"format": "pt"})
    assert load_teacher(folder).fingerprint() == source_fingerprint(folder) != first
    (folder / "other.safetensors").unlink()
    assert refused(capsys, "predict", folder, SAMPLES / "unlabeled_movies.txt") == \
        f"error: {folder}: missing other.safetensors, which its config.json names (transformers_weights)"
    for named in ("adapter_model.bin", "../model.safetensors"):
        (folder / "config.json").write_text(json.dumps({**config, "transformers_weights": named}), encoding="utf-8")
        assert refused(capsys, "predict", folder, SAMPLES / "unlabeled_movies.txt") == \
            f"error: {folder / 'config.json'}: its transformers_weights, {named!r}, names no safetensors file or " \
            "index inside the folder, which is all distill loads weights from"


@pytest.mark.parametrize("field, value, shown", [
    ("architectures", [5], "names its architectures as [5], not a list of class names"),
    ("architectures", "DistilBertForSequenceClassification", "names its architectures as \"DistilBertForSeq"),
    ("architectures", {"a": 1}, "names its architectures as {\"a\": 1}, not a list of class names"),
    ("model_type", ["distilbert"], "names its model_type as [\"distilbert\"], not a name"),
])
def test_a_config_naming_its_model_in_another_type_is_refused_by_every_command(field, value, shown, hf_classifier,
                                                                             tmp_path, capsys, cache):
    """config.json's architectures or model_type edited into another JSON type was an AttributeError, KeyError or
    TypeError traceback in every command (a string was read a letter at a time: "is a D (not a sequence or token
    classifier)"); it is refused in one line, nothing written."""
    folder = copy_of(hf_classifier, tmp_path, "edited")
    config = json.loads((folder / "config.json").read_text())
    config[field] = value
    (folder / "config.json").write_text(json.dumps(config))
    for args in [("predict", folder, SAMPLES / "unlabeled_movies.txt"),
                 ("pseudo-label", "--teacher", folder, "--input", SAMPLES / "unlabeled_movies.txt", "--output",
                  tmp_path / "pseudo.jsonl"),
                 ("export", folder, "--output", tmp_path / "onnx")]:
        err = refused(capsys, *args)
        assert f"{folder}: its config.json {shown}" in err, err
    assert not (tmp_path / "pseudo.jsonl").exists() and not (tmp_path / "onnx").exists()
