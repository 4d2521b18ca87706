"""Distributed runs: 2 gloo processes under torchrun give what 1 process gives."""

import json
import os
import subprocess
import sys

import pytest
import torch

from distill import distributed
from distill.io import load_tensors
from procedures.pseudo_label import run_signature, signature_path
from tests.conftest import ROOT, SAMPLES, cli


def torchrun(*args: str, processes: int = 2) -> str:
    """Run nlp-train under torchrun on CPU (gloo); return its stdout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
               "-m", "procedures.cli", "--threads", "1", *map(str, args)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_shards_interleave_back_into_input_order():
    items = list(range(7))
    assert distributed.unshard([items[0::3], items[1::3], items[2::3]]) == items
    assert distributed.shard(items) == items and distributed.batch_share(items) == (items, 1.0)


def test_kd_on_two_processes_matches_one_process(tiny_classifier_teacher, tmp_path):
    args = ["kd", "--teacher", tiny_classifier_teacher, "--model", "lstm", "--train", SAMPLES / "sentiment_train.csv",
            "--dev", SAMPLES / "sentiment_dev.csv", "--unlabeled", SAMPLES / "unlabeled_movies.txt",
            "--epochs", "3", "--patience", "3", "--embedding-dim", "16", "--hidden-dim", "16", "--dropout", "0",
            "--batch-size", "25",
            "--lr", "0.02", "--quiet"]
    cli("--threads", "1", *args, "--output", tmp_path / "one", "--cache-dir", tmp_path / "cache-one")
    stdout = torchrun(*args, "--output", tmp_path / "two", "--cache-dir", tmp_path / "cache-two")
    assert stdout.count("saved to") == 1  # rank 0 alone reports
    one, two = ([json.loads(line) for line in open(tmp_path / run / "metrics.jsonl")] for run in ("one", "two"))
    assert [r["epoch"] for r in two] == [r["epoch"] for r in one] == [1, 2, 3]  # rank 0 alone logs
    for a, b in zip(one, two):  # without dropout, the same trajectory up to float summation order
        assert abs(a["train_loss"] - b["train_loss"]) < 1e-5 * a["train_loss"]
        assert a["dev"]["accuracy"] == b["dev"]["accuracy"]
    weights_one, weights_two = (load_tensors(tmp_path / run / "model.safetensors") for run in ("one", "two"))
    for name, value in weights_one.items():
        torch.testing.assert_close(weights_two[name], value, rtol=1e-4, atol=1e-5)
    assert sorted(os.listdir(tmp_path / "two")) == sorted(os.listdir(tmp_path / "one"))
    # the teacher logits each rank computed for its shard, gathered, equal the one-process cache
    (cache_one,), (cache_two,) = (list((tmp_path / c).iterdir()) for c in ("cache-one", "cache-two"))
    assert cache_one.name == cache_two.name
    torch.testing.assert_close(load_tensors(cache_two)["logits"], load_tensors(cache_one)["logits"])


def test_pseudo_label_on_two_processes_resumes_each_shard_and_matches_one_process(tiny_tagging_teacher, tmp_path):
    args = ["pseudo-label", "--teacher", tiny_tagging_teacher, "--input", SAMPLES / "unlabeled_news.txt",
            "--chunk-size", "32", "--logits", "--quiet"]
    cli("--threads", "1", *args, "--output", tmp_path / "one.jsonl")
    rows = (tmp_path / "one.jsonl").read_text().splitlines(keepends=True)
    assert len(rows) == 300
    # interrupted run: rank 0 had 40 records of its chunks (0, 2, ...), rank 1 was killed mid-record
    rank_rows = [[row for index, row in enumerate(rows) if (index // 32) % 2 == rank] for rank in (0, 1)]
    (tmp_path / "two.jsonl.rank0-of-2.part").write_text("".join(rank_rows[0][:40]))
    (tmp_path / "two.jsonl.rank1-of-2.part").write_text("".join(rank_rows[1][:70]) + rank_rows[1][70][:30])
    signature = run_signature(tiny_tagging_teacher, str(SAMPLES / "unlabeled_news.txt"), min_confidence=0.0,
                              with_logits=True, batch_size=64, chunk_size=32)
    signature["runtime"] = {"precision": "fp32", "threads": 1, "processes": 2}  # as the interrupted run left it
    signature_path(tmp_path / "two.jsonl").write_text(json.dumps(signature))
    stdout = torchrun(*args, "--output", tmp_path / "two.jsonl", "--resume")
    assert "190 of 190 examples" in stdout  # 300 - 40 - 70 left to label
    assert (tmp_path / "two.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.jsonl", "two.jsonl"]


def test_pseudo_label_resume_refuses_parts_of_another_process_count(tiny_classifier_teacher, tmp_path):
    (tmp_path / "out.jsonl.rank1-of-2.part").write_text("")
    args = ["pseudo-label", "--teacher", tiny_classifier_teacher, "--input", SAMPLES / "unlabeled_movies.txt",
            "--output", tmp_path / "out.jsonl", "--quiet"]
    with pytest.raises(SystemExit) as exit_info:
        from procedures.cli import main
        main([str(a) for a in args] + ["--resume"])
    assert exit_info.value.code == 2
    cli(*args)  # a fresh run clears the other run's parts
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]
