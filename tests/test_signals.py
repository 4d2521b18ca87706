"""SIGTERM and Ctrl-C: a run stops promptly and cleans up as after any interruption, never mid-save, and stays
resumable."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
import torch

from tests.conftest import DEV, SMALL_LSTM, TRAIN, cli, interrupt_evaluation, nlp_train, run_main


@pytest.fixture
def busy_cores():
    """Four processes spinning beside the test, killed after it: the load of a shared machine, where a
    SIGTERM once took minutes to end a run (the interpreter's teardown, starved of CPU)."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(4)]
    yield
    for spinner in spinners:
        spinner.kill()
        spinner.wait()


def test_sigterm_cleans_up_as_ctrl_c_does_and_puts_an_overwritten_model_back(tmp_path, busy_cores):
    """`kill`, `timeout` and job schedulers stop a run with SIGTERM: a fresh run's output goes, and a
    model that --overwrite moved aside comes back whole, as after Ctrl-C; promptly, on a busy machine too."""
    args = ["student", *SMALL_LSTM, "--batch-size", "2", "--train", TRAIN, "--dev", DEV]
    model = tmp_path / "model"
    cli(*args, "--epochs", "1", "--output", model)
    before = {f.name: f.read_bytes() for f in model.iterdir()}
    for output, extra, ready in ((model, ["--overwrite"], lambda: (tmp_path / ".model.replaced").exists()),
                                 (tmp_path / "fresh", [], lambda: (tmp_path / "fresh").exists())):
        process = nlp_train(*args, "--epochs", "200", "--patience", "200", "--output", output, *extra)
        deadline = time.monotonic() + 600  # the start-up, slow beside the busy processes, is not what is tested
        while not ready():
            assert process.poll() is None, process.stderr.read().decode()
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail("the run did not start within 600 s")
            time.sleep(0.01)
        time.sleep(0.5)
        process.terminate()
        assert process.wait(timeout=60) == 128 + signal.SIGTERM
        assert process.stderr.read().decode().strip().splitlines()[-1] == "terminated"
    assert {f.name: f.read_bytes() for f in model.iterdir()} == before
    assert not (tmp_path / ".model.replaced").exists()
    assert not (tmp_path / "fresh").exists() or (tmp_path / "fresh" / "resume.pt").exists()


def test_a_sigterm_dropped_inside_a_finalizer_still_stops_the_run(tmp_path, monkeypatch, capsys):
    """A signal's exception raised while a `__del__` runs is printed and dropped by Python; the command line
    delivers it again, so the run stops (143) instead of training on with SIGTERM ignored."""
    import distill.errors
    import distill.training
    real_evaluate = distill.training.evaluate

    class Finalized:
        def __del__(self):
            distill.errors.raise_terminated(signal.SIGTERM, None)  # as if SIGTERM came while it ran

    def evaluate(*args, **kwargs):
        Finalized()
        return real_evaluate(*args, **kwargs)

    monkeypatch.setattr(distill.training, "evaluate", evaluate)
    status, err = run_main(capsys, "student", *SMALL_LSTM, "--epochs", "3", "--train", TRAIN, "--dev", DEV,
                           "--output", tmp_path / "out")
    assert status == 128 + signal.SIGTERM and err.strip().splitlines()[-1] == "terminated"


def test_a_dropped_interrupt_is_delivered_again_once_and_never_after_its_command(monkeypatch):
    """Two finalizers dropping one SIGTERM before its redelivery made two deliveries: the second reached whatever
    ran next in the process (the next in-process command, stopped with 143 before it began)."""
    import types
    from distill.errors import Terminated
    import procedures.cli as cli_module

    class Timer:  # fired by the test, not by the clock
        made: list = []

        def __init__(self, interval, function, args):
            self.function, self.args, self.cancelled = function, args, False
            Timer.made.append(self)

        def start(self):
            pass

        def cancel(self):
            self.cancelled = True

    received = []
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    monkeypatch.setattr(cli_module.threading, "Timer", Timer)
    monkeypatch.setattr(cli_module, "raise_terminated", lambda signum, frame: received.append(signum))
    try:
        dropped = types.SimpleNamespace(exc_value=Terminated())
        cli_module._redeliver_interrupt(dropped)
        cli_module._redeliver_interrupt(dropped)  # the next finalizer, before the first is delivered
        assert len(Timer.made) == 1
        Timer.made[0].function(*Timer.made[0].args)
        deadline = time.monotonic() + 60
        while not received and time.monotonic() < deadline:  # handled between Python instructions
            pass
        assert received == [signal.SIGTERM]
        cli_module._redeliver_interrupt(dropped)  # dropped again once delivered: sent again
        assert len(Timer.made) == 2
        cli_module._cancel_redelivery()  # the command ends before it is delivered
        assert Timer.made[1].cancelled
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("own_process", [True, False], ids=["own-process", "in-process"])
def test_an_interrupted_command_line_ends_without_tearing_the_interpreter_down(own_process, tmp_path, monkeypatch):
    """Once an interrupted run has cleaned up, its process ends at once (`end_process`): the interpreter's
    teardown collects every object of torch and transformers, which took most of a minute on a loaded
    machine. `main` called with arguments (from Python, these tests) is not its process's own: it raises."""
    import procedures.cli
    args = ["student", *SMALL_LSTM, "--epochs", "2", "--train", TRAIN, "--dev", DEV, "--output", tmp_path / "out"]
    monkeypatch.setattr(sys, "argv", ["nlp-train", *map(str, args)])
    ended = []
    monkeypatch.setattr(procedures.cli, "end_process", lambda code: ended.append(code) or sys.exit(code))
    interrupt_evaluation(monkeypatch, call=1)
    with pytest.raises(SystemExit) as exit_info:
        procedures.cli.main(None if own_process else [str(a) for a in args])
    assert exit_info.value.code == 130 and ended == ([130] if own_process else [])


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupt_while_a_best_epoch_is_saved_waits_for_the_save(signum, tmp_path, capsys, monkeypatch):
    """SIGTERM or Ctrl-C between writing a new best epoch's weights and its card is held until the model and
    the resume state are both saved: the run stops resumable and then finishes as an uninterrupted one."""
    import distill.models.students as students
    from distill.io import load_tensors
    args = ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--epochs", "3"]
    cli(*args, "--output", tmp_path / "reference")
    real_card, cards = students.write_model_card, []

    def card_after_a_signal(*card_args, **card_kwargs):
        cards.append(1)
        if len(cards) == 1:
            signal.raise_signal(signum)
        return real_card(*card_args, **card_kwargs)

    monkeypatch.setattr(students, "write_model_card", card_after_a_signal)
    out = tmp_path / "run"
    # Python's own Ctrl-C handler, whatever the runner left (a shell starts background jobs ignoring SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        status, err = run_main(capsys, *args, "--output", out)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert status == (128 + signal.SIGTERM if signum == signal.SIGTERM else 130), err
    assert (out / "resume.pt").exists() and (out / "distill.json").exists()
    cli(*args, "--output", out, "--resume")
    ours, reference = load_tensors(out / "model.safetensors"), load_tensors(tmp_path / "reference/model.safetensors")
    assert ours.keys() == reference.keys() and all(torch.equal(ours[k], reference[k]) for k in ours)


def test_an_interrupt_after_the_last_epoch_keeps_the_run_to_resume(tmp_path, capsys, monkeypatch):
    """Between the last epoch and the summary the run still holds its resume state: Ctrl-C there keeps
    every epoch (the folder was removed), and --resume only writes the summary."""
    import distill.trainers as trainers
    args = ["student", *SMALL_LSTM, "--train", TRAIN, "--dev", DEV, "--epochs", "2", "--output", tmp_path / "run"]

    def interrupted(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(trainers, "model_size_bytes", interrupted)  # called after the last epoch, before the summary
    assert run_main(capsys, *args)[0] == 130
    assert (tmp_path / "run" / "resume.pt").exists() and (tmp_path / "run" / "model.safetensors").exists()
    monkeypatch.undo()
    assert run_main(capsys, *args, "--resume")[0] == 0
    summary = json.loads((tmp_path / "run" / "train_summary.json").read_text())
    assert len(summary["history"]) == 2 and not (tmp_path / "run" / "resume.pt").exists()
