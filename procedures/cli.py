"""`nlp-train`: the command line. Thin: it parses options and calls a procedure.

The group is here; its commands live in `procedures.train_commands` (teacher, student, kd,
pseudo-label), `procedures.use_commands` (evaluate, predict, compare),
`procedures.export_commands` (export) and `procedures.search_commands` (search), each module
imported when one of its commands runs or shows its help (click's lazy-loading pattern). So
`nlp-train --help` imports neither torch nor transformers, and `predict` or `evaluate` of a word
student never imports transformers.
"""

from __future__ import annotations

import _thread
import importlib
import itertools
import os
import signal
import sys
import threading

import click

from distill.errors import DistillError, Terminated, on_command_line, os_error_message, raise_terminated
from distill.precision import PRECISIONS, set_precision
from distill.runtime import MAX_THREADS
from procedures.options import OnceCommand, refuse_repeated_options

# Every command: where it is defined, and its short help as `nlp-train --help` lists it without importing
# it (the first paragraph of its docstring: tests/test_startup.py checks that they agree).
COMMANDS = {
    "teacher": ("procedures.train_commands:teacher", "Fine-tune a DistilBERT (or other encoder) + Linear teacher, "
                "or one encoder with a head per task (--task-spec, repeated), or build a zero-shot teacher from label "
                "descriptions (--zero-shot)."),
    "student": ("procedures.train_commands:student",
                "Train a small student on gold labels alone (the baseline for `kd`)."),
    "kd": ("procedures.train_commands:kd",
           "Distill a teacher (or an ensemble: --teacher repeated) into a student: loss = w_s * NLL + w_d * "
           "distill(student, teacher)."),
    "pseudo-label": ("procedures.train_commands:pseudo_label_command", "Label unlabeled text with the teacher's "
                     "argmax (JSONL: line, text/tokens, label(s), confidence)."),
    "evaluate": ("procedures.use_commands:evaluate",
                 "Score a teacher or student directory on labelled DATA_FILE; prints and writes metrics JSON."),
    "predict": ("procedures.use_commands:predict", "Predict labels for INPUT_FILE (or stdin): one example per "
                "line, or JSONL; writes JSONL to stdout."),
    "compare": ("procedures.use_commands:compare", "Compare models (the first is the reference, e.g. the "
                "teacher): score, size, CPU throughput."),
    "export": ("procedures.export_commands:export",
               "Export MODEL_DIR for deployment: ONNX (fp32 or int8), a slim safetensors copy, or a "
               "transformers model."),
    "search": ("procedures.search_commands:search", "Search students and KD settings for the best dev score "
               "within a latency or size budget (Optuna)."),
}


SINGLE_PROCESS_COMMANDS = ("predict", "compare", "export")
# Under a launcher, each process of these works alone (no process group): `search` runs one trial a process.
INDEPENDENT_PROCESS_COMMANDS = ("search",)
GLOBAL_OPTIONS = ("--threads", "--precision")  # each takes one value


def hoist_global_options(args: list[str], commands: set[str]) -> list[str]:
    """`nlp-train kd ... --threads 1` as `nlp-train --threads 1 kd ...`: the global options are options
    of the group, and users write them after the command too (where click alone would refuse them)."""
    position = next((i for i, arg in enumerate(args) if arg in commands and (i == 0 or args[i - 1] not in
                                                                           GLOBAL_OPTIONS)), None)
    if position is None:
        return args
    hoisted, rest, after = [], [], iter(args[position + 1:])
    for arg in after:
        if arg == "--":
            rest += [arg, *after]
        elif arg in GLOBAL_OPTIONS:
            hoisted += [arg, *itertools.islice(after, 1)]  # and its value
        elif arg.split("=", 1)[0] in GLOBAL_OPTIONS:
            hoisted.append(arg)
        else:
            rest.append(arg)
    return args[:position] + hoisted + [args[position]] + rest


NO_SUCH_COMMAND = getattr(click.exceptions, "NoSuchCommand", ())  # click >= 8.4 suggests close names


class Commands(click.Group):
    """The `nlp-train` group: global options are accepted before or after the command, once.

    Lazy (click's documented pattern): `lazy_commands` maps each command's name to where it is
    defined, ``module:function``, and its short help; the module is imported the first time the
    command is looked up (`get_command`), and `nlp-train --help` lists the short help alone.
    Commands added in the ordinary way (`cli.command()`, `cli.add_command`) work as in any group.
    """

    command_class = OnceCommand

    def __init__(self, *args, lazy_commands: dict[str, tuple[str, str]] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            module, _, function = self.lazy_commands[cmd_name][0].partition(":")
            command = getattr(importlib.import_module(module), function)
            if not isinstance(command, click.Command) or command.name != cmd_name:
                raise TypeError(f"{module}:{function} is not the click command {cmd_name!r}")
            self.add_command(command)
        return self.commands.get(cmd_name)

    def summary(self, cmd_name: str, limit: int) -> str:
        """A command's short help within `limit` characters, as click shortens it; not loading the command."""
        command = self.commands.get(cmd_name) or click.Command(cmd_name, help=self.lazy_commands[cmd_name][1])
        return command.get_short_help_str(limit)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = [name for name in self.list_commands(ctx) if name not in self.commands or
                 not self.commands[name].hidden]
        if names:
            limit = formatter.width - 6 - max(map(len, names))  # as click's own listing
            with formatter.section("Commands"):
                formatter.write_dl([(name, self.summary(name, limit)) for name in names])

    def resolve_command(self, ctx: click.Context, args: list[str]):
        try:
            return super().resolve_command(ctx, args)
        except NO_SUCH_COMMAND as err:  # "did you mean" among every command, loaded or not
            raise NO_SUCH_COMMAND(err.command_name, possibilities=self.list_commands(ctx), ctx=ctx) from None

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        args = hoist_global_options(args, set(self.list_commands(ctx)))
        refuse_repeated_options(self, ctx, args)
        return super().parse_args(ctx, args)


@click.group(cls=Commands, lazy_commands=COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="distill")
@click.option("--threads", type=click.IntRange(1, MAX_THREADS),
              help="CPU threads for torch (default: all cores). 1 is often fastest for small students, "
                   "and avoids slow-downs when several jobs share a machine.")
@click.option("--precision", type=click.Choice(PRECISIONS), default="fp32", show_default=True,
              help="Model forward passes (training and inference) in fp32, or under bf16 autocast, or fp16 "
                   "autocast with a gradient scaler (CUDA only); auto = bf16 where the device supports it.")
@click.pass_context
def cli(context, threads, precision):
    """Train a transformer teacher and distill it into small, fast LSTM/CNN students.

    Typical chain: `teacher` -> `pseudo-label` -> `kd`, then `evaluate` and `predict`.
    Data: classification from CSV/TSV/JSONL (text and label columns), tagging from CoNLL
    files or JSONL with tokens/tags, hub datasets as hub:NAME[:CONFIG]:SPLIT.
    `teacher`, `student`, `kd`, `pseudo-label` and `evaluate` also run under torchrun
    (one process per CPU or GPU; see docs/distributed.md). The global options --threads and
    --precision may come before or after the command.
    """
    global _joined_process_group
    if threads:
        import torch
        torch.set_num_threads(threads)
    set_precision(precision)
    from distill import distributed
    if distributed.launched():
        if context.invoked_subcommand in SINGLE_PROCESS_COMMANDS:
            raise DistillError(f"{context.invoked_subcommand} runs as one process: start it without torchrun")
        if context.invoked_subcommand not in INDEPENDENT_PROCESS_COMMANDS:
            _joined_process_group = True
            distributed.init()


_joined_process_group = False  # whether `cli` joined a launcher's process group, which `main` then leaves


def leave_process_group() -> bool:
    """Leave the process group `cli` joined under a launcher; returns whether there was one. A process that
    joined none (`--help`, `--version`, a run without torchrun) has nothing to leave, and imports no torch
    for it."""
    global _joined_process_group
    if not _joined_process_group:
        return False
    _joined_process_group = False
    from distill import distributed
    distributed.teardown()
    return True


def end_process(code: int | str | None) -> None:
    """End a process that was part of a distributed run: Python's exit handlers run and the output is
    flushed, then the process exits without tearing the interpreter down. torch's gloo threads outlive
    `destroy_process_group` (torch 2.13), and destroying them during that teardown sometimes aborted a
    finished run ("terminate called without an active exception", exit -6: 1 of 8 runs of a CPU kd run
    here), which torchrun reports as a failure of the whole run."""
    import atexit
    if isinstance(code, str):
        click.echo(code, err=True)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


def out_of_memory(err: BaseException) -> bool:
    """Whether `err` is a failed allocation (CPU or GPU): too large a batch or model for the machine."""
    text = str(err)
    return isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError" or \
        "can't allocate memory" in text or "CUDA out of memory" in text or \
        "Storage size calculation overflowed" in text  # a model too large for any memory (some torch versions)


INTERRUPTED = (130, 128 + signal.SIGTERM)  # the exit statuses of Ctrl-C and SIGTERM


def _redeliver_interrupt(unraisable) -> None:
    """`sys.unraisablehook` while a command runs: a signal's exception raised inside a finalizer (a `__del__`, a
    weakref callback), where Python prints and drops it, is delivered again to the main thread, so the run still
    stops (a dropped SIGTERM, the next one ignored, once left a run training on)."""
    global _redelivery
    signum = signal.SIGTERM if isinstance(unraisable.exc_value, Terminated) else \
        signal.SIGINT if isinstance(unraisable.exc_value, KeyboardInterrupt) else None
    if signum is None:
        sys.__unraisablehook__(unraisable)
        return
    signal.signal(signal.SIGTERM, raise_terminated)  # the dropped one's handler set it ignored: delivered, it is not
    if _redelivery is None:  # one at a time: a second finalizer dropping it before it is delivered adds nothing
        # from another thread, a moment later: delivered now, it would be raised in this hook, and dropped again
        _redelivery = threading.Timer(0.1, _deliver, (signum,))
        _redelivery.start()


_redelivery: threading.Timer | None = None  # the interrupt `_redeliver_interrupt` will deliver again


def _deliver(signum: int) -> None:
    """The timer's: the interrupt to the main thread, which may drop it again in a finalizer (then sent again)."""
    global _redelivery
    _redelivery = None
    _thread.interrupt_main(signum)


def _cancel_redelivery() -> None:
    global _redelivery
    if _redelivery is not None:
        _redelivery.cancel()
        _redelivery = None


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors become one line on stderr and exit status 2, never a traceback; a process
    of a distributed run ends through `end_process`, and so does an interrupted command line (`argv` None:
    this process is the command's own). Once the run has cleaned up, tearing the interpreter down only
    garbage-collects the ~380,000 objects of torch, transformers and the rest: 9 s on this 2-core machine at
    load 13, and most of the minute a SIGTERM took to end a run under load, which a scheduler's kill must not
    wait for."""
    try:
        _run(argv)
    except SystemExit as done:
        if _left_process_group or (argv is None and done.code in INTERRUPTED):
            end_process(done.code)
        raise


_left_process_group = False  # whether `_run` left a launcher's process group


def _run(argv: list[str] | None) -> None:
    global _left_process_group
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main_thread = threading.current_thread() is threading.main_thread()  # only it may set a signal handler
    previous = signal.signal(signal.SIGTERM, raise_terminated) if main_thread else None
    previous_hook, sys.unraisablehook = sys.unraisablehook, _redeliver_interrupt
    try:
        with on_command_line():  # messages name the settings as options (--overwrite), not arguments
            cli.main(args=argv, prog_name="nlp-train", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as err:
        context = getattr(err, "ctx", None)
        hint = f" (see '{context.command_path} --help')" if context is not None else ""
        click.echo(f"error: {' '.join(err.format_message().split())}{hint}", err=True)
        sys.exit(2)
    except DistillError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Terminated:
        click.echo("terminated", err=True)
        sys.exit(128 + signal.SIGTERM)
    except (MemoryError, RuntimeError) as err:
        from distill import distributed
        lost = distributed.lost_peer(err)
        if lost is not None:
            click.echo(f"error: another process of this distributed run stopped ({lost}); the state of the last "
                       "finished epoch, if any, is kept: rerun with --resume", err=True)
        elif out_of_memory(err):
            click.echo("error: out of memory: lower --batch-size (and --max-length for the teacher) or the "
                       "model's size (--hidden-dim, --embedding-dim, --filters, --layers)", err=True)
        else:
            raise
        sys.exit(2)
    except OSError as err:
        click.echo(f"error: {os_error_message(err)}", err=True)
        sys.exit(2)
    finally:
        _cancel_redelivery()  # one still waiting would interrupt whatever runs next (another command, in-process)
        sys.unraisablehook = previous_hook
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
        _left_process_group = leave_process_group()
    sys.exit(0)


if __name__ == "__main__":
    main()
