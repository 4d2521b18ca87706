"""Students: pooling never reads padding, round trips, bad inputs, and the CLI."""

import json

import pytest
import torch

from distill.errors import DistillError
from distill.labels import LabelHierarchy
from distill.losses import IGNORE_INDEX
from distill.models import load_model
from distill.models.students import build_student, last_states
from distill.vocab import Vocabulary
from tests.conftest import SAMPLES, cli, config_for

TEXTS = ["a fine film", "not good at all , sadly", "great"]


def test_last_states_pick_last_real_token_not_padding():
    torch.manual_seed(0)
    model = build_student(config_for("lstm", embedding_dim=8, hidden_dim=6, dropout=0.0),
                          LabelHierarchy(["neg", "pos"]), TEXTS).eval()
    alone = model(**model.prepare(["a fine film"])[0])
    padded_inputs, _ = model.prepare(["a fine film", "not good at all , sadly either"])  # pads the first row
    assert padded_inputs["word_ids"][0, -1] == 0
    assert torch.allclose(model(**padded_inputs)[0], alone[0], atol=1e-6)


def test_last_states_reads_forward_end_and_backward_start():
    outputs = torch.arange(2 * 4 * 4, dtype=torch.float).view(2, 4, 4)  # hidden 2 per direction
    states = last_states(outputs, torch.tensor([2, 4]))
    assert states[0].tolist() == outputs[0, 1, :2].tolist() + outputs[0, 0, 2:].tolist()
    assert states[1].tolist() == outputs[1, 3, :2].tolist() + outputs[1, 0, 2:].tolist()


@pytest.mark.parametrize("name, pooling", [("lstm", "max"), ("lstm", "mean"), ("lstm", "max-mean"),
                                           ("cnn", "max"), ("cnn", "mean"), ("cnn", "max-mean")])
def test_pooling_over_time_never_reads_padding(name, pooling):
    torch.manual_seed(0)
    model = build_student(config_for(name, embedding_dim=8, hidden_dim=6, filters=5, dropout=0.0, pooling=pooling),
                          LabelHierarchy(["neg", "pos"]), TEXTS).eval()
    assert model.config.pooling == pooling
    alone = model(**model.prepare(["a fine film"])[0])
    padded_inputs, _ = model.prepare(["a fine film", "not good at all , sadly either"])
    assert torch.allclose(model(**padded_inputs)[0], alone[0], atol=1e-6)


def test_cnn_saved_before_pooling_was_a_setting_loads_with_max_pooling(tmp_path):
    """A CNN config without `pooling` (format 2), or with format 1's LSTM-only `pooling: last`, is
    the max-pooling CNN it was."""
    model = build_student(config_for("cnn", embedding_dim=8, filters=5), LabelHierarchy(["neg", "pos"]), TEXTS)
    model.save_pretrained(tmp_path / "cnn")
    path = tmp_path / "cnn" / "config.json"
    saved = json.loads(path.read_text())
    del saved["config"]["pooling"]
    path.write_text(json.dumps(saved))
    card_path = tmp_path / "cnn" / "distill.json"
    card = json.loads(card_path.read_text())
    from distill.io import file_sha256
    card["sha256"]["config.json"] = file_sha256(path)
    card_path.write_text(json.dumps(card))
    assert load_model(tmp_path / "cnn").config.pooling == "max"
    saved["config"].update(pooling="last", hidden_dim=150)  # format 1: one config of every student
    path.write_text(json.dumps(saved))
    card["sha256"] = {"model.safetensors": card["sha256"]["model.safetensors"]}
    del card["format_version"], card["class"]
    card["model"] = "CNNClassifier"
    card_path.write_text(json.dumps(card))
    loaded = load_model(tmp_path / "cnn")
    assert loaded.config.pooling == "max"
    assert torch.equal(loaded(**loaded.prepare(TEXTS)[0]), model.eval()(**model.prepare(TEXTS)[0]))


def test_cnn_refuses_last_state_pooling(tmp_path, capsys):
    with pytest.raises(DistillError, match="a cnn pools max, mean or max-mean"):
        config_for("cnn", pooling="last")
    from procedures.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main(["student", "--model", "cnn", "--pooling", "last", "--train", str(SAMPLES / "sentiment_train.csv"),
              "--dev", str(SAMPLES / "sentiment_dev.csv"), "--output", str(tmp_path / "cnn"), "--quiet"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "a cnn pools max, mean or max-mean" in error and "Traceback" not in error
    assert not (tmp_path / "cnn").exists()


@pytest.mark.parametrize("name, extra", [("lstm", {}), ("lstm", {"pooling": "max", "binary": True}),
                                         ("cnn", {}), ("ngram", {"ngrams": 3, "buckets": 64}),
                                         ("lstm-tagger", {"crf": True}), ("idcnn-tagger", {})])
def test_save_and_load_round_trip(tmp_path, name, extra):
    tagger = name.endswith("tagger")
    examples = [t.split() for t in TEXTS] if tagger else TEXTS
    labels = LabelHierarchy(["O", "B-PER"] if tagger else ["neg", "pos"])
    model = build_student(config_for(name, embedding_dim=8, hidden_dim=6, filters=5, **extra),
                          labels, examples).eval()
    model.save_pretrained(tmp_path / name)
    loaded = load_model(tmp_path / name, expect="student")
    assert type(loaded) is type(model)
    inputs, mask = model.prepare(examples)
    assert torch.equal(model(**inputs), loaded(**loaded.prepare(examples)[0]))
    assert model.decode(model(**inputs), mask) == loaded.decode(loaded(**inputs), mask)


def test_ngram_ids_hash_each_complete_ngram_and_pad_the_rest():
    from distill.models.ngram import HASH_PRIME, ngram_ids
    words = torch.tensor([[5, 6, 7, 8], [9, 3, 0, 0]])
    pair = lambda a, b: (a * HASH_PRIME + b) % 50 + 1  # noqa: E731
    assert ngram_ids(words, 2, 50).tolist() == [[pair(5, 6), pair(6, 7), pair(7, 8), 0], [pair(9, 3), 0, 0, 0]]
    triple = ((5 * HASH_PRIME + 6) * HASH_PRIME + 7) % 50 + 1  # the same hash, whether reduced at each step or not
    assert ngram_ids(words, 3, 50)[0, 0].item() == triple and ngram_ids(words, 3, 50)[1].tolist() == [0] * 4
    assert ngram_ids(words[:, :2], 4, 50).tolist() == [[0, 0], [0, 0]]  # shorter than n: no n-gram


def test_ngram_student_classifies_the_mean_of_its_words_and_ngrams():
    """Logits = Linear(mean of the word and the n-gram embeddings), padding in neither the sum nor the count."""
    from distill.models.ngram import ngram_ids
    model = build_student(config_for("ngram", embedding_dim=4, ngrams=3, buckets=16), LabelHierarchy(["a", "b"]),
                          TEXTS).eval()
    inputs, _ = model.prepare(TEXTS)
    words = inputs["word_ids"]
    for row, text in enumerate(TEXTS):
        ids = words[row, : len(text.split())].unsqueeze(0)
        grams = [ngram_ids(ids, n, 16)[0] for n in (2, 3)]
        vectors = [model.embedding(ids)[0]] + [model.ngram_embedding(g[g != 0]) for g in grams]
        expected = model.classifier(torch.cat(vectors).mean(0))
        assert torch.allclose(model(**inputs)[row], expected, atol=1e-6), text


@pytest.mark.parametrize("name, setting, message", [
    ("ngram", {"ngrams": 1000}, "ngrams must be within [1, 8], got 1000"),  # would never finish an epoch
    ("ngram", {"buckets": 0}, "buckets must be within [1, 16777216], got 0"),
    ("lstm", {"dropout": 1.0}, "dropout must be within [0.0, 1.0), got 1.0"),
    ("lstm", {"dropout": float("nan")}, "dropout must be within [0.0, 1.0), got nan"),
    ("cnn", {"filter_widths": [3, 0]}, "filter_widths must be >= 1, got [3, 0]"),
    ("lstm", {"pooling": "avg"}, "pooling must be one of last, max, mean, max-mean, got 'avg'"),
    ("transformer", {"layers": 0}, "layers must be >= 1, got 0"),
    ("lstm", {"hidden_dim": "16"}, "hidden_dim must be a whole number, got '16'"),
    ("lstm", {"hidden_dim": 16.5}, "hidden_dim must be a whole number, got 16.5"),
    ("lstm", {"dropout": True}, "dropout must be a number, got True"),
    ("lstm", {"lowercase": "no"}, "lowercase must be true or false, got 'no'"),
    ("cnn", {"filter_widths": [3, True]}, "filter_widths must be a list of whole numbers, got [3, True]"),
    # the option refuses an empty list; from Python it made a CNN whose classifier reads nothing (a search space's
    # filter_widths: [[]] too)
    ("cnn", {"filter_widths": []}, "filter_widths must be a non-empty list of whole numbers, got []"),
    ("idcnn-tagger", {"idcnn_dilations": []}, "idcnn_dilations must be a non-empty list of whole numbers, got []")])
def test_student_configs_refuse_what_their_cli_options_refuse(name, setting, message):
    """The API and hand-edited config.json files meet the types and limits `--help` shows, not a hang or a
    traceback."""
    import re
    with pytest.raises(DistillError, match=re.escape(message)):
        config_for(name, **setting)


def test_bad_student_inputs():
    with pytest.raises(DistillError, match="unknown student model 'gru'"):
        build_student(config_for("gru"), LabelHierarchy(["a", "b"]), TEXTS)
    with pytest.raises(DistillError, match="empty vocabulary"):
        Vocabulary.build([["rare"]], min_freq=2)
    with pytest.raises(DistillError, match="binary mode needs exactly two labels"):
        build_student(config_for("cnn", binary=True), LabelHierarchy(["a", "b", "c"]), TEXTS)


def test_student_cli_trains_and_reports_size(tmp_path, capsys):
    cli("student", "--model", "lstm-tagger", "--train", SAMPLES / "ner_train.conll", "--dev",
        SAMPLES / "ner_dev.conll", "--output", tmp_path / "tagger", "--epochs", "8", "--quiet")
    out = capsys.readouterr().out
    assert "parameters" in out and "MB" in out
    summary = json.loads((tmp_path / "tagger" / "train_summary.json").read_text())
    assert summary["best"]["dev"]["f1"] > 0.3  # the sample NER is learnable in a few epochs
    cli("evaluate", tmp_path / "tagger", SAMPLES / "ner_test.conll", "--quiet")


def test_embeddings_from_teacher_change_the_table(tiny_classifier_teacher, tmp_path):
    from distill.embedding_init import init_from_teacher
    model = build_student(config_for("lstm", embedding_dim=8), LabelHierarchy(["neg", "pos"]), TEXTS)
    before = model.embedding.weight.detach().clone()
    init_from_teacher(model, load_model(tiny_classifier_teacher))
    after = model.embedding.weight.detach()
    assert torch.equal(after[0], before[0]) and not torch.equal(after[2:], before[2:])
    assert after[2:].std().item() == pytest.approx(before[2:].std().item(), rel=1e-3)


def test_crf_loss_without_a_complete_sentence_reaches_every_parameter():
    """A distributed rank whose share has no sentence the CRF can score still needs every parameter in
    its backward pass (DDP waits for all of them); its loss adds 0 over a denominator of 0."""
    sentences = [t.split() for t in TEXTS]
    torch.manual_seed(0)
    tagger = build_student(config_for("lstm-tagger", embedding_dim=8, hidden_dim=6, dropout=0.0, crf=True),
                           LabelHierarchy(["O", "B-PER"]), sentences)
    inputs, mask = tagger.prepare(sentences)
    targets = torch.zeros(mask.shape, dtype=torch.long)
    targets[:, 0] = IGNORE_INDEX  # every sentence partly labelled
    term = tagger.supervised_loss(tagger(**inputs), targets, mask, None)
    assert term.total.item() == 0.0 and term.denominator.item() == 0.0
    term.total.backward()
    assert all(p.grad is not None for p in tagger.parameters())


@pytest.mark.parametrize("name, example", [("lstm", "a naïve film"), ("lstm-tagger", ["Zoë", "spoke", "."])])
def test_a_word_reads_the_same_in_either_unicode_form(name, example):
    """Decomposed text (a letter, then its combining accent) is the composed word, not three tokens."""
    import unicodedata
    decomposed = unicodedata.normalize("NFD", example) if isinstance(example, str) else \
        [unicodedata.normalize("NFD", word) for word in example]
    assert decomposed != example
    labels = LabelHierarchy(["neg", "pos"] if name == "lstm" else ["O", "B-PER"])
    model = build_student(config_for(name, embedding_dim=8, hidden_dim=8), labels, [example])
    composed, _ = model.prepare([example])
    inputs, _ = model.prepare([decomposed])
    assert composed.keys() == inputs.keys()
    assert all(torch.equal(composed[key], inputs[key]) for key in composed)
    assert 1 not in inputs["word_ids"].tolist()[0]  # no <unk>


def test_a_new_idcnn_block_passes_its_input_through_unchanged():
    """Identity initialisation: each dilated convolution starts as the identity, so the 12 stacked ReLU
    layers of a new block carry the projected features (non-negative, after their ReLU) as they are."""
    tags = LabelHierarchy(["O", "B-PER", "I-PER"], separator=None)
    model = build_student(config_for("idcnn-tagger", embedding_dim=6, filters=5, char_filters=3,
                                     char_embedding_dim=3), tags, [["Mina", "spoke"], ["Rain"]])
    hidden = torch.rand(2, 5, 7)
    passed = hidden
    for _ in range(model.config.idcnn_iterations):
        for conv in model.block:
            passed = torch.relu(conv(passed))
    assert torch.equal(passed, hidden)
    assert all(conv.weight.requires_grad for conv in model.block)
