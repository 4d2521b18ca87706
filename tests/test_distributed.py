"""Distributed runs: 2 gloo processes under torchrun give what 1 process gives."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from distill import distributed
from distill.data import read_classification, read_tagging
from distill.distillation import CachedTeacherLogits, TeacherStudentDistill, DistillObjective
from distill.inference import predict_logits
from distill.io import load_tensors
from distill.models import load_model
from distill.models.students import build_student
from distill.training import SupervisedObjective, make_batch
from distill.pseudo_label import run_signature, signature_path
from tests.conftest import ROOT, SAMPLES, cli, config_for, free_port


# The CPU alone (gloo), also on a GPU machine: what these tests compare is one process against two on the same device
TORCHRUN_ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
                "CUDA_VISIBLE_DEVICES": ""}


def torchrun(*args: str, processes: int = 2) -> str:
    """Run nlp-train under torchrun on CPU (gloo); return its stdout."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
               "-m", "procedures.cli", "--threads", "1", *map(str, args)]
    done = subprocess.run(command, env=TORCHRUN_ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def start_nodes(*args: str) -> list[subprocess.Popen]:
    """nlp-train on two torchrun "nodes" of one process each, as two machines start it: the same command on
    each, a c10d rendezvous at one endpoint (here 127.0.0.1; each node in a process group of its own, as a
    machine's processes are)."""
    endpoint = f"127.0.0.1:{free_port()}"
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1",
               "--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint, "--rdzv_id", "test", "-m", "procedures.cli",
               "--threads", "1", *map(str, args)]
    return [subprocess.Popen(command, env=TORCHRUN_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True) for _ in range(2)]


def two_nodes(*args: str) -> str:
    """Run nlp-train on two torchrun nodes (`start_nodes`); return their stdouts, joined."""
    nodes = start_nodes(*args)
    done = [node.communicate(timeout=300) for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], [err[-2000:] for _, err in done]
    return "".join(out for out, _ in done)


def test_shards_interleave_back_into_input_order():
    items = list(range(7))
    assert distributed.unshard([items[0::3], items[1::3], items[2::3]]) == items
    assert distributed.shard(items) == items and distributed.batch_share(items) == (items, True)


def parts_of_batch(model, objective, examples: list, labels: list, shares: list[tuple[list[int], bool]],
                   monkeypatch) -> torch.Tensor:
    """The sum of every share's `global_batch_part`, the all-reduce of the denominators done by hand
    (each share's input, summed): what DDP's gradient average of world x part trains on."""
    batches = [make_batch(model, examples, labels, share) for share, _ in shares]
    terms = [objective.terms(model, model(**batch["inputs"]), batch) for batch in batches]
    sent = []
    monkeypatch.setattr(distributed, "all_reduce_sum", lambda values: sent.append(values) or values)
    for share_terms, (_, counted) in zip(terms, shares):
        distributed.global_batch_part(share_terms, counted)
    monkeypatch.setattr(distributed, "all_reduce_sum", lambda values: sum(sent))
    return sum(distributed.global_batch_part(share_terms, counted)
               for share_terms, (_, counted) in zip(terms, shares))


def gradients(model, loss: torch.Tensor) -> dict:
    model.zero_grad()
    loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


CASES = {  # kind: (teacher fixture, student model or None to train the teacher, kd options)
    "teacher-tagger": ("tiny_tagging_teacher", None, {}),
    "kd-tagger": ("tiny_tagging_teacher", "lstm-tagger", {"kd_loss": "kl", "min_confidence": 0.3}),
    "kd-tagger-unsure": ("tiny_tagging_teacher", "lstm-tagger", {"kd_loss": "kl", "min_confidence": 1.0}),
    "kd-crf": ("tiny_tagging_teacher", "crf", {"kd_loss": "mse", "min_confidence": 0.3}),
    "kd-binary": ("tiny_classifier_teacher", "lstm", {"kd_loss": "mse", "min_confidence": 0.3}),
}


def case(request, kind: str):
    """A model (eval mode: no dropout), its class-weighted objective, 12 examples and their labels
    (for kd the last 6 unlabeled, so their hard targets are the teacher's confident argmax)."""
    fixture, student_model, kd_options = CASES[kind]
    teacher = load_model(request.getfixturevalue(fixture))
    if teacher.task == "tagging":
        data = read_tagging(str(SAMPLES / "ner_train.conll"))
        examples, labels = list(data["tokens"][:12]), list(data["tags"][:12])
    else:
        data = read_classification(str(SAMPLES / "sentiment_train.csv"))
        examples, labels = list(data["text"][:12]), list(data["label"][:12])
    weights = [1.0 + i % 3 for i in range(len(teacher.hierarchy))]
    if student_model is None:
        return teacher, SupervisedObjective(weights), examples, labels
    torch.manual_seed(0)
    config = config_for("lstm-tagger" if student_model == "crf" else student_model, embedding_dim=8,
                           hidden_dim=6, dropout=0.0, crf=student_model == "crf", binary=student_model == "lstm")
    student = build_student(config, teacher.hierarchy, examples).eval()
    source = CachedTeacherLogits(predict_logits(teacher, examples))
    objective = DistillObjective(TeacherStudentDistill(class_weights=weights, **kd_options), source)
    return student, objective, examples, labels[:6] + [None] * 6


@pytest.mark.parametrize("kind", list(CASES))
def test_shares_with_global_denominators_give_the_whole_batch_gradient(request, kind, monkeypatch):
    """Unequal shares of a batch (one all unlabeled: with min confidence 1 it has no hard target at
    all; one a stand-in that does not count) give the one-process loss and gradient, whatever the
    loss averages over: scored words, class weights, examples, complete sentences."""
    model, objective, examples, labels = case(request, kind)
    whole = list(range(len(examples)))
    batch = make_batch(model, examples, labels, whole)
    loss = objective(model, model(**batch["inputs"]), batch)
    expected = gradients(model, loss)
    shares = [(whole[:4], True), (whole[4:6], True), (whole[6:], True), (whole[:1], False)]
    parts = parts_of_batch(model, objective, examples, labels, shares, monkeypatch)
    assert parts.item() == pytest.approx(loss.item(), rel=1e-6)
    got = gradients(model, parts)
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        torch.testing.assert_close(got[name], value, rtol=1e-5, atol=1e-7, msg=name)


def assert_two_processes_match_one(args: list, tmp_path, one: tuple = (), two: tuple = (), launch=torchrun) -> None:
    """Train with `args` (+ `one`) on 1 process and (+ `two`) under torchrun on 2: the same losses, dev
    scores and weights.

    The weights are compared by their mean gap over the whole model, not element by element: Adam's
    step is about lr whatever the gradient's size, so float noise in a near-zero gradient can flip a
    few elements' steps (a CI machine: 61 of a tagger's 23,669 weights up to 1.2e-3 apart at lr 0.002,
    mean gap under 4e-6). A share of the batch weighted wrongly (each rank dividing by its own
    denominators) moves most weights instead: mean gaps of 6e-4 to 5e-2 in these tests, and the
    taggers' losses 4e-4 to 3e-3 apart (relative)."""
    cli("--threads", "1", *args, "--output", tmp_path / "one", "--device", "cpu", *one)  # as TORCHRUN_ENV's
    stdout = launch(*args, "--output", tmp_path / "two", *two)
    assert stdout.count("saved to") == 1  # rank 0 alone reports
    one, two = ([json.loads(line) for line in open(tmp_path / run / "metrics.jsonl")] for run in ("one", "two"))
    assert [r["epoch"] for r in two] == [r["epoch"] for r in one]  # rank 0 alone logs
    for a, b in zip(one, two):  # without dropout, the same trajectory up to float summation order
        assert abs(a["train_loss"] - b["train_loss"]) < 1e-5 * a["train_loss"], (a["train_loss"], b["train_loss"])
        assert a["dev"] == pytest.approx(b["dev"])
    weights_one, weights_two = (load_tensors(tmp_path / run / "model.safetensors") for run in ("one", "two"))
    assert weights_two.keys() == weights_one.keys()
    gaps = torch.cat([(weights_two[name] - value).abs().flatten() for name, value in weights_one.items()])
    largest = {name: (weights_two[name] - value).abs().max().item() for name, value in weights_one.items()}
    assert gaps.mean() < 1e-5, (gaps.mean().item(), largest)
    assert sorted(os.listdir(tmp_path / "two")) == sorted(os.listdir(tmp_path / "one"))


TINY_STUDENT = ["--embedding-dim", "16", "--hidden-dim", "16", "--dropout", "0", "--quiet"]  # lstm, lstm-tagger


def test_kd_on_two_processes_matches_one_process(tiny_classifier_teacher, tmp_path):
    args = ["kd", "--teacher", tiny_classifier_teacher, "--model", "lstm", "--train", SAMPLES / "sentiment_train.csv",
            "--dev", SAMPLES / "sentiment_dev.csv", "--unlabeled", SAMPLES / "unlabeled_movies.txt",
            "--epochs", "3", "--patience", "3", "--batch-size", "25", "--lr", "0.02", *TINY_STUDENT]
    # Each rank scores its shard of the teacher's examples in batches of other paddings, so the two
    # runs' teacher logits differ by ~1e-7; Adam turns that into up to ~1e-4 on rare words' embeddings
    # after 3 epochs at lr 0.02.
    assert_two_processes_match_one(args, tmp_path, one=("--cache-dir", tmp_path / "cache-one"),
                                   two=("--cache-dir", tmp_path / "cache-two"))
    # the teacher logits each rank computed for its shard, gathered, equal the one-process cache (a shard for the
    # dev examples, which the teacher's dev scores come from, and one for the transfer set)
    shards_one, shards_two = (sorted((tmp_path / c).rglob("*.safetensors")) for c in ("cache-one", "cache-two"))
    assert [s.relative_to(tmp_path / "cache-one") for s in shards_one] == \
        [s.relative_to(tmp_path / "cache-two") for s in shards_two] and len(shards_one) == 2
    for cache_one, cache_two in zip(shards_one, shards_two):
        torch.testing.assert_close(load_tensors(cache_two)["logits"], load_tensors(cache_one)["logits"])


@pytest.mark.parametrize("options", [["--kd-loss", "kl", "--class-weights", "inverse"], ["--kd-loss", "mse", "--crf"],
                                     ["--augment", "1"]], ids=["kl-weighted", "mse-crf", "augmented"])
def test_tagger_kd_on_two_processes_matches_one_process(tiny_tagging_teacher, tmp_path, options):
    """Token-level NLL and KL/MSE average over the words of the whole batch, CRF NLL over its complete
    sentences; unsure pseudo-labels (--min-confidence) leave ranks with different counts of both. With
    --augment, every rank makes the same synthetic sentences and keeps the gathered logits on its own disk.

    A low learning rate: at --lr 0.02 (batches of 9) float noise grew until the 2-process run drifted
    (losses equal to 4e-7 after epoch 1, 9e-5 after epoch 2, weights up to 0.2 apart); Adam's steps on
    the near-zero gradients of rare characters' embeddings amplify it."""
    args = ["kd", "--teacher", tiny_tagging_teacher, "--model", "lstm-tagger", "--train", SAMPLES / "ner_train.conll",
            "--dev", SAMPLES / "ner_dev.conll", "--unlabeled", SAMPLES / "unlabeled_news.txt",
            "--unlabeled-ratio", "0.5", "--min-confidence", "0.5", "--epochs", "2", "--batch-size", "18",
            "--lr", "0.002", *TINY_STUDENT, *options]
    cache = ("--cache-dir", tmp_path / "cache")
    assert_two_processes_match_one(args, tmp_path, one=cache, two=cache)


@pytest.mark.parametrize("options", [["--model", "cnn", "--filters", "8", "--class-weights", "1,4"],
                                     ["--model", "lstm", "--hidden-dim", "16", "--binary", "--class-weights", "1,3"]],
                         ids=["cnn", "lstm-binary"])
def test_class_weighted_student_on_two_processes_matches_one_process(tmp_path, options):
    """The weighted NLL divides by the summed class weights of the whole batch's targets."""
    args = ["student", "--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv",
            "--epochs", "2", "--batch-size", "15", "--lr", "0.02", "--embedding-dim", "16", "--dropout", "0",
            "--quiet", *options]
    assert_two_processes_match_one(args, tmp_path)


def test_accumulated_tagger_kd_reporting_on_two_processes_matches_one_process(tiny_tagging_teacher, tmp_path):
    """Micro-batches shared out to the processes divide by the denominators of the whole accumulated batch,
    and rank 0 alone reports each step's terms, summed across the ranks: the one process's events."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    args = ["kd", "--teacher", tiny_tagging_teacher, "--model", "lstm-tagger", *TINY_STUDENT, "--epochs", "2",
            "--train", SAMPLES / "ner_train.conll", "--dev", SAMPLES / "ner_dev.conll", "--batch-size", "8",
            "--grad-accumulation", "2", "--lr-schedule", "cosine", "--unlabeled", SAMPLES / "unlabeled_news.txt",
            "--min-confidence", "0.3",
            "--cache-dir", tmp_path / "cache", "--report-to", "tensorboard"]
    assert_two_processes_match_one(args, tmp_path)
    scalars = []
    for run in ("one", "two"):
        assert len(os.listdir(tmp_path / run / "runs")) == 1  # one events file: rank 0's
        events = EventAccumulator(str(tmp_path / run / "runs"))
        events.Reload()
        scalars.append({tag: [e.value for e in events.Scalars(tag)] for tag in ("train/student", "train/distillation")})
    for tag, values in scalars[0].items():
        assert scalars[1][tag] == pytest.approx(values, rel=1e-4), tag


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
    # the whole output is counted: the whole chunks labelled before the resume (32 + 64 of the 40 + 70 records;
    # a chunk cut short is labelled again, in the same batches), 204 by this run
    assert "300 of 300 examples written" in stdout and "96 of them labelled before the resume" in stdout, stdout
    assert (tmp_path / "two.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.jsonl", "one.jsonl.config.yaml", "two.jsonl",
                                                          "two.jsonl.config.yaml"]  # each run's options beside it


def test_pseudo_label_resume_refuses_parts_of_another_process_count(tiny_classifier_teacher, tmp_path):
    (tmp_path / "out.jsonl.rank1-of-2.part").write_text("")
    args = ["pseudo-label", "--teacher", tiny_classifier_teacher, "--input", SAMPLES / "unlabeled_movies.txt",
            "--output", tmp_path / "out.jsonl", "--quiet"]
    with pytest.raises(SystemExit) as exit_info:
        from procedures.cli import main
        main([str(a) for a in args] + ["--resume"])
    assert exit_info.value.code == 2
    cli(*args)  # a fresh run clears the other run's parts
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "out.jsonl.config.yaml"]


def test_a_lost_peer_is_told_from_other_errors(monkeypatch):
    gloo = RuntimeError("[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
                        "[127.0.0.1]:2957. This is typically caused by a remote worker crashing. Check the logs")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert distributed.lost_peer(gloo) == "Connection closed by peer [127.0.0.1]:2957"
    assert distributed.lost_peer(torch.distributed.DistBackendError("NCCL communicator was aborted on rank 0.")) \
        == "NCCL communicator was aborted on rank 0"
    assert distributed.lost_peer(RuntimeError("mat1 and mat2 shapes cannot be multiplied")) is None
    assert distributed.lost_peer(ValueError("Connection reset by peer")) is None
    monkeypatch.setenv("WORLD_SIZE", "1")  # one process: no peer to lose
    assert distributed.lost_peer(gloo) is None


SURVIVOR = """
import torch
from distill import distributed
from procedures import cli

@cli.cli.command("collective")
def collective():
    distributed.barrier()
    distributed.all_reduce_sum(torch.ones(1))

cli.main(["--threads", "1", "collective"])
"""
# as SIGKILL or the kernel's out-of-memory killer: no message, no clean-up (joined as every rank of a run joins)
KILLED = "import os; from distill import distributed; distributed.init(); distributed.barrier(); os._exit(9)"


def test_the_survivor_of_a_killed_worker_says_so_in_one_line():
    """Two gloo processes started as torchrun starts them (not under torchrun, whose SIGTERM would race the
    survivor's collective): the one left prints one line and exits with status 2, not a 50-line gloo traceback."""
    port = free_port()
    env = {**TORCHRUN_ENV, "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(port), "WORLD_SIZE": "2"}
    workers = [subprocess.Popen([sys.executable, "-c", script], env={**env, "RANK": rank, "LOCAL_RANK": rank},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for rank, script in (("0", SURVIVOR), ("1", KILLED))]
    (_, stderr), _ = [worker.communicate(timeout=120) for worker in workers]
    assert [worker.returncode for worker in workers] == [2, 9], stderr[-3000:]
    [line] = stderr.strip().splitlines()
    assert line.startswith("error: another process of this distributed run stopped (")
    assert line.endswith("); the state of the last finished epoch, if any, is kept: rerun with --resume")


# --- two machines: two torchrun nodes of one process each, on 127.0.0.1 ------------------------------------------

KD_ON_NODES = ["--model", "lstm", "--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv",
               "--epochs", "3", "--patience", "3", "--lr", "0.02", *TINY_STUDENT]


def test_kd_on_two_nodes_matches_one_process(tiny_classifier_teacher, tmp_path):
    """Two nodes (a c10d rendezvous, gloo between them) give the one-process run, and write it once."""
    cache = ("--cache-dir", tmp_path / "cache")
    assert_two_processes_match_one(["kd", "--teacher", tiny_classifier_teacher, *KD_ON_NODES, "--batch-size", "25"],
                                   tmp_path, one=cache, two=cache, launch=two_nodes)


def test_pseudo_label_on_two_nodes_matches_one_process(tiny_tagging_teacher, tmp_path):
    args = ["pseudo-label", "--teacher", tiny_tagging_teacher, "--input", SAMPLES / "unlabeled_news.txt",
            "--chunk-size", "32", "--quiet"]
    cli("--threads", "1", *args, "--output", tmp_path / "one.jsonl")
    stdout = two_nodes(*args, "--output", tmp_path / "two.jsonl")
    assert stdout.count("examples written") == 1, stdout  # rank 0 alone merges and reports
    assert (tmp_path / "two.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.jsonl", "one.jsonl.config.yaml", "two.jsonl",
                                                          "two.jsonl.config.yaml"]  # no part left behind


def test_a_node_killed_mid_run_ends_the_run_cleanly_and_resume_continues_it(tiny_classifier_teacher, tmp_path):
    """SIGKILL of the second node (its launcher and worker: a machine lost) after epoch 1: the first node's
    worker says so in one line and the run ends, its state kept; --resume on both nodes then finishes the run
    as one uninterrupted process does."""
    args = ["kd", "--teacher", tiny_classifier_teacher, *KD_ON_NODES, "--batch-size", "5",
            "--cache-dir", tmp_path / "cache"]
    cli("--threads", "1", *args, "--output", tmp_path / "one", "--device", "cpu")  # as TORCHRUN_ENV's
    out = tmp_path / "two"
    nodes = start_nodes(*args, "--output", out)
    deadline = time.monotonic() + 300
    while not (out / "resume.pt").exists():
        assert all(node.poll() is None for node in nodes) and time.monotonic() < deadline, \
            [node.communicate()[1][-2000:] for node in nodes]
        time.sleep(0.05)
    kill_node(nodes[1])
    _, err = nodes[0].communicate(timeout=300)
    nodes[1].wait()
    assert nodes[0].returncode != 0
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert lines and lines[0].startswith("error: another process of this distributed run stopped"), err[-3000:]
    assert (out / "resume.pt").exists()
    assert len(dev_metrics(out)) < 3, "the run ended before the kill"
    two_nodes(*args, "--output", out, "--resume")
    one, two = ([json.loads(line) for line in open(tmp_path / run / "metrics.jsonl")] for run in ("one", "two"))
    assert [r["epoch"] for r in two] == [1, 2, 3]
    for a, b in zip(one, two):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-5) and b["dev"] == pytest.approx(a["dev"])
    assert not (out / "resume.pt").exists()


def test_a_resume_on_two_processes_continues_each_ranks_own_random_streams(tmp_path):
    """Each rank draws its own dropout masks: the resume state held rank 0's random streams alone, every rank
    went on with them, and a resumed run with dropout ended on another model than the uninterrupted one."""
    args = ["student", "--model", "lstm", "--embedding-dim", "16", "--hidden-dim", "16", "--dropout", "0.3",
            "--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv", "--epochs", "3",
            "--patience", "3", "--batch-size", "2", "--quiet"]
    torchrun(*args, "--output", tmp_path / "whole")
    out = tmp_path / "resumed"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m",
               "procedures.cli", "--threads", "1", *map(str, args), "--output", str(out)]
    launcher = subprocess.Popen(command, env=TORCHRUN_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not (out / "resume.pt").exists():
        assert launcher.poll() is None and time.monotonic() < deadline, launcher.stderr.read()[-2000:]
        time.sleep(0.05)
    time.sleep(0.3)
    launcher.terminate()  # torchrun passes SIGTERM on to its workers
    launcher.communicate(timeout=120)
    assert (out / "resume.pt").exists() and len(dev_metrics(out)) < 3, "the run ended before it was stopped"
    torchrun(*args, "--output", out, "--resume")
    assert dev_metrics(out) == dev_metrics(tmp_path / "whole")
    assert (out / "model.safetensors").read_bytes() == (tmp_path / "whole" / "model.safetensors").read_bytes()


def kill_node(node: subprocess.Popen) -> None:
    """SIGKILL a node's launcher and its workers (torchrun starts each in a session of its own): a machine lost."""
    workers = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])  # the field after the command's name
        except (OSError, IndexError, ValueError):
            continue
        if parent == node.pid:
            workers.append(int(stat.parent.name))
    for pid in [node.pid, *workers]:
        os.kill(pid, signal.SIGKILL)


def dev_metrics(out) -> list:
    return [json.loads(line)["dev"] for line in open(out / "metrics.jsonl")]


LAUNCHED = {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


@pytest.mark.parametrize("environment, message", [
    ({"WORLD_SIZE": "2"}, "WORLD_SIZE=2 makes this process one of 2, but RANK, MASTER_ADDR, MASTER_PORT are not set: "
                          "start it with torchrun (torchrun --nproc-per-node 2 -m procedures.cli ...)"),
    ({"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1"}, "but MASTER_PORT is not set"),
    ({"WORLD_SIZE": "two"}, "WORLD_SIZE='two' is no number of processes"),
    # int()'s traceback from the rendezvous
    ({**LAUNCHED, "RANK": "x"}, "RANK='x' is not a process number from 0 to 1 (WORLD_SIZE=2): start the run with torchrun"),
    ({**LAUNCHED, "MASTER_PORT": "junk"}, "MASTER_PORT='junk' is not a TCP port (1 to 65535)"),
    ({**LAUNCHED, "LOCAL_RANK": "-1"}, "LOCAL_RANK='-1' is not a process number on this machine (0 or more)"),
    # a process that waited (half an hour, torch's default) for a group it could never join
    ({**LAUNCHED, "RANK": "2"}, "RANK='2' is not a process number from 0 to 1 (WORLD_SIZE=2)"),
    # the rendezvous warned every few seconds that it could not resolve the name, for half an hour
    ({**LAUNCHED, "MASTER_ADDR": "nohost.invalid"}, "MASTER_ADDR='nohost.invalid' is no address this machine can "
                                                    "resolve ("),
    ({**LAUNCHED, "DISTILL_JOIN_TIMEOUT": "soon"}, "DISTILL_JOIN_TIMEOUT='soon' is not a number of seconds above 0"),
], ids=["world-size-alone", "no-port", "not-a-number", "rank-not-a-number", "port-not-a-number",
        "local-rank-negative", "rank-past-world-size", "address-unknown", "join-timeout-not-a-number"])
def test_a_launch_environment_that_is_not_whole_is_one_line(environment, message, tmp_path):
    """WORLD_SIZE set by hand (or left by a job script) without torchrun's other variables was the rendezvous'
    traceback (`environment variable RANK expected, but not set`), and a WORLD_SIZE, RANK, LOCAL_RANK or MASTER_PORT
    not a number int()'s (a RANK past WORLD_SIZE waited for a group it could never join). Run as its own process: one that took part in a launch ends by os._exit."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    done = subprocess.run([sys.executable, "-m", "procedures.cli", "--threads", "1", "student", "--model", "lstm",
                           "--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv",
                           "--epochs", "1", "--quiet", "--output", tmp_path / "out"],
                          env={**env, "PYTHONPATH": str(ROOT), **environment}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists(), done.stderr


@pytest.mark.parametrize("rank, message", [
    ("0", "rank 1 of this run (WORLD_SIZE=2) did not start within 2 s: start every process of the run"),
    ("1", "rank 0 of this run (WORLD_SIZE=2) did not start within 2 s (nothing answers at 127.0.0.1:"),
])
def test_a_process_whose_others_never_start_says_which_in_one_line(rank, message, tmp_path):
    """A launched process alone (the others never started: a node not launched, a job script's rank lost) waited
    torch's half hour, SIGTERM unheard; it waits DISTILL_JOIN_TIMEOUT seconds and names the ranks missing."""
    env = {name: value for name, value in os.environ.items() if name not in LAUNCHED}
    launched = {**LAUNCHED, "RANK": rank, "MASTER_PORT": str(free_port()), "DISTILL_JOIN_TIMEOUT": "2"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "procedures.cli", "--threads", "1", "student", "--model", "lstm",
                           "--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv",
                           "--epochs", "1", "--quiet", "--output", tmp_path / "out"],
                          env={**env, "PYTHONPATH": str(ROOT), **launched}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2 and message in done.stderr and "DISTILL_JOIN_TIMEOUT=SECONDS" in done.stderr, \
        done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists(), done.stderr
    assert time.monotonic() - started < 120


def test_a_resume_on_another_number_of_processes_says_how_the_run_ran(tmp_path, capsys, monkeypatch):
    """The refusal named `runtime.processes` and said to start over with --overwrite, losing the finished epochs;
    it says how many processes the run had, and to resume with as many."""
    from tests.conftest import interrupted_in_epoch_2, run_main
    args = interrupted_in_epoch_2(capsys, monkeypatch, "student", "--model", "lstm", "--embedding-dim", "8",
                                  "--hidden-dim", "6", "--train", SAMPLES / "sentiment_train.csv", "--dev",
                                  SAMPLES / "sentiment_dev.csv", "--epochs", "3", "--patience", "3", "--quiet",
                                  "--output", tmp_path / "out")
    monkeypatch.setattr(distributed, "world_size", lambda: 2)  # as a resume under torchrun --nproc-per-node 2
    status, err = run_main(capsys, *args, "--resume")
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert "(runtime.processes); it ran with processes 1 (now 2): resume it so (as many processes" in err
