"""What a training run reports as it goes: callbacks, and the reporters `--report-to` builds.

The one training loop (`distill.training.fit_tasks`) calls every `Callback` it is given at six
events: the run begins; an optimizer step ends (each loss term by name, the total, the learning
rates); an epoch ends (dev metrics, the selection metric and its value, the train loss); the best
epoch so far was saved; the run ends (its best epoch and history); or the run stops before its end
(an error, Ctrl-C, SIGTERM). Under torchrun rank 0 alone calls them; give every rank the same
callbacks (each step's loss terms are summed across the ranks for them, which every rank takes part
in). A callback's `state_dict` is kept in the run's resume state after every epoch and handed back
to `load_state_dict` on `--resume`, so a tracker continues the run it opened.

The loss terms are the objective's `distill.losses.LossSum` names, each its weighted mean over the
step's whole (global, accumulated) batch, so that they add up to ``total``: ``nll`` for a teacher or
a student trained alone; ``student`` (w_s times its NLL) and ``distillation`` (w_d times the
distillation term) for kd, and ``hidden``, ``attention`` and ``cosine`` for the layer terms in use.

`TensorBoardCallback` and `MLflowCallback` need the ``tracking`` extra (``pip install
'distill[tracking]'``); `reporter` builds one by the name ``--report-to`` takes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from distill import distributed
from distill.errors import DistillError, import_extra, option
from distill.io import IN_MEMORY_SQLITE, require_database_driver, shown_url, sqlite_database
from distill.outputs import TRACKING_FOLDER
from distill.registry import Registry

TRACKING_EXTRA = "pip install 'distill[tracking]'"
log = logging.getLogger(__name__)


@dataclass
class Step:
    """One optimizer step: its number (from 1, counted across epochs and a resume), its epoch, each loss
    term's value and the ``total`` (`losses`), the learning rates it took (``lr``, or ``lr/encoder`` and
    ``lr/head`` for a teacher), and the task of its batch (a multi-task teacher's head; "" for one task)."""

    step: int
    epoch: int
    losses: dict[str, float]
    learning_rates: dict[str, float]
    task: str = ""


@dataclass
class EpochEnd:
    """An epoch scored on dev: its number, the optimizer steps so far, its mean train loss, the dev metrics
    (a multi-task teacher's: per head, and their ``mean``), the metric that picks the best epoch and its
    value (`score`), and whether it is the best so far."""

    epoch: int
    step: int
    train_loss: float
    dev: dict
    select_metric: str
    score: float
    best: bool


class Callback:
    """Base class: override the events to hear of; each does nothing here."""

    def on_train_begin(self, run: dict) -> None:
        """The run starts (or resumes): ``epochs``, ``first_epoch``, ``step`` (steps already taken),
        ``steps_per_epoch``, ``tasks``, ``settings`` (the loop's), ``directory`` (None in memory) and
        ``model``, the model being trained (as transformers' callbacks get it: to read, e.g. to keep each
        epoch's weights, never to change)."""

    def on_step(self, step: Step) -> None:
        """An optimizer step was taken."""

    def on_epoch_end(self, epoch: EpochEnd) -> None:
        """An epoch was scored on dev."""

    def on_best_saved(self, epoch: EpochEnd) -> None:
        """`epoch` is the best so far, and was saved (to the run's directory, or kept in memory)."""

    def on_train_end(self, result: dict) -> None:
        """The run ended: its ``best`` epoch record, ``history`` and ``steps``."""

    def folders(self) -> list[Path]:
        """The folders this callback writes into (its logs): the run checks them under the output rule
        (`distill.outputs.check_written_folder`) before it writes anything."""
        return []

    def stores(self) -> dict[Path, str]:
        """What this callback writes on this machine besides its folders (a tracking store: an SQLite file, the folder
        of MLflow's file store), each with how an error names it: the run checks each under the output rule too,
        before it writes anything (never an input, nor in another model's folder)."""
        return {}

    def on_train_stop(self, error: BaseException) -> None:
        """The run stopped before its end: by `error` (an ``Exception``), or interrupted (Ctrl-C's
        ``KeyboardInterrupt``, the CLI's SIGTERM: not an ``Exception``). Close what the run opened; the
        error goes on once every callback has heard of it."""

    def state_dict(self) -> dict:
        """What a resumed run needs to continue this callback's record (JSON-able), saved after every epoch."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """A resumed run's `state_dict` as saved after its last finished epoch, before `on_train_begin`."""


class CallbackList:
    """The callbacks of a run, called on rank 0 alone; false when there are none."""

    def __init__(self, callbacks: Iterable[Callback] = ()):
        self.callbacks = list(callbacks)
        for callback in self.callbacks:
            if not isinstance(callback, Callback):
                raise DistillError(f"callbacks: give distill.callbacks.Callback objects, not {type(callback).__name__}")

    def __bool__(self) -> bool:
        return bool(self.callbacks)

    def _call(self, event: str, *args) -> None:
        if distributed.is_main():
            for callback in self.callbacks:
                getattr(callback, event)(*args)

    def on_train_begin(self, run: dict) -> None:
        self._call("on_train_begin", run)

    def on_step(self, step: Step) -> None:
        self._call("on_step", step)

    def on_epoch_end(self, epoch: EpochEnd) -> None:
        self._call("on_epoch_end", epoch)

    def on_best_saved(self, epoch: EpochEnd) -> None:
        self._call("on_best_saved", epoch)

    def on_train_end(self, result: dict) -> None:
        self._call("on_train_end", result)

    def on_train_stop(self, error: BaseException) -> None:
        """Every callback hears of the stop, even when one of them fails to close (logged, not raised:
        the run's own error is the one to report)."""
        if distributed.is_main():
            for callback in self.callbacks:
                try:
                    callback.on_train_stop(error)
                except Exception as failed:  # noqa: BLE001 - the stop's own error is the one that goes on
                    log.warning("%s could not close its record of the run: %s", type(callback).__name__, failed)

    def _keys(self) -> list[str]:
        """Each callback's name in the resume state: its class's, numbered when a class comes twice."""
        names = [type(callback).__qualname__ for callback in self.callbacks]
        return [name if names.count(name) == 1 else f"{name}#{names[:i].count(name)}" for i, name in enumerate(names)]

    def state_dict(self) -> dict:
        return {key: callback.state_dict() for key, callback in zip(self._keys(), self.callbacks)}

    def load_state_dict(self, state: dict) -> None:
        for key, callback in zip(self._keys(), self.callbacks):
            callback.load_state_dict(state.get(key, {}))


def scalars(values: dict, prefix: str) -> dict[str, float]:
    """The numbers of a (nested) metrics dict as flat ``prefix/key/...`` names: what trackers plot."""
    flat: dict[str, float] = {}
    for key, value in values.items():
        name = f"{prefix}/{key}"
        if isinstance(value, dict):
            flat.update(scalars(value, name))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            flat[name] = float(value)
    return flat


def step_scalars(step: Step) -> dict[str, float]:
    """A step's loss terms (``train/NAME``, a head's ``train/HEAD/NAME``) and learning rates (``lr``...)."""
    prefix = f"train/{step.task}" if step.task else "train"
    return {**scalars(step.losses, prefix), **step.learning_rates}


def epoch_scalars(epoch: EpochEnd) -> dict[str, float]:
    """An epoch's dev metrics (``dev/...``), train loss and selection score (``select/METRIC``)."""
    return {**scalars(epoch.dev, "dev"), "epoch/train_loss": epoch.train_loss,
            f"select/{epoch.select_metric}": epoch.score}


def require_package(module: str, reporter: str, api: str, imports: str | None = None) -> None:
    """Refuse a reporter whose package (or the module of it that it `imports`) is not installed or does not import,
    in one line naming the extra that installs it."""
    import_extra(module, option(f"--report-to {reporter}", api), TRACKING_EXTRA, imports)


class TensorBoardCallback(Callback):
    """Writes every step's loss terms and learning rates, and every epoch's dev metrics, as TensorBoard
    scalars into `log_dir` (``tensorboard --logdir LOG_DIR`` shows them). The writer opens when the run
    begins and is flushed after each epoch, so an interrupted run keeps what it logged; a resumed run adds
    its events beside them, and hides the interrupted epoch's steps, which it logs again."""

    def __init__(self, log_dir: str | Path):
        require_package("tensorboard", "tensorboard", "TensorBoardCallback", imports="torch.utils.tensorboard")
        self.log_dir, self.writer = Path(log_dir), None

    def folders(self) -> list[Path]:
        return [self.log_dir]

    def on_train_begin(self, run: dict) -> None:
        """A resumed run purges the events its interrupted run logged after its last finished epoch (it logs those
        steps again); a new run is refused a folder holding another run's events, whose lines it would draw over."""
        from torch.utils.tensorboard import SummaryWriter
        if run["step"] == 0 and any(self.log_dir.glob("events.out.tfevents.*")):
            raise DistillError(f"{self.log_dir}: holds another run's TensorBoard events (this run's steps would be "
                               "drawn over its lines): choose an empty folder for "
                               f"{option('--logging-dir', 'TensorBoardCallback(log_dir)')}, or remove them")
        self.writer = SummaryWriter(str(self.log_dir), purge_step=run["step"] + 1 if run["step"] else None)
        self.writer.add_text("settings", f"```\n{json.dumps(run['settings'], indent=1, default=str)}\n```",
                             run["step"])

    def _scalars(self, values: dict[str, float], step: int) -> None:
        for name, value in values.items():
            self.writer.add_scalar(name, value, step)

    def on_step(self, step: Step) -> None:
        self._scalars(step_scalars(step), step.step)

    def on_epoch_end(self, epoch: EpochEnd) -> None:
        self._scalars(epoch_scalars(epoch), epoch.step)
        self.writer.flush()

    def on_train_end(self, result: dict) -> None:
        self.writer.close()

    def on_train_stop(self, error: BaseException) -> None:
        if self.writer is not None:
            self.writer.close()  # the events logged so far reach the disk before the process ends


MLFLOW_BATCH = 1000  # the most metrics MLflow takes in one log_batch
DATABASE_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}  # MLflow's database stores besides SQLite
# what MLflow keeps a database store (SQLite, its default, or a server's) with: the tracking extra's, not mlflow-skinny's
DATABASE_PACKAGES = ("sqlalchemy", "alembic")
FLUSH_SECONDS = 10.0  # how stale a tracked run's step metrics may be while an epoch runs


class MLflowCallback(Callback):
    """Logs the run to MLflow: its settings as parameters, every step's loss terms and learning rates (sent in
    batches, at least every `FLUSH_SECONDS` and at each epoch's end) and every epoch's dev metrics as metrics,
    and the best epoch's number and score at the end. `tracking_uri` None is MLflow's own choice
    (MLFLOW_TRACKING_URI, else its default store); `experiment` is created if new (None:
    MLFLOW_EXPERIMENT_NAME, else ``distill``); `run_name` names the run (the output folder's name, from the
    command line).

    The tracked run ends FINISHED, FAILED (an error) or KILLED (Ctrl-C, SIGTERM); a resumed run continues
    the tracked run of the run it resumes (its id is in the resume state). A store that cannot be used
    (a server that does not answer, a file or folder that is not a store, an SQLite file that is not a
    database, a deleted experiment) is one `DistillError` naming the setting to change."""

    def __init__(self, tracking_uri: str | None = None, experiment: str | None = None, run_name: str | None = None):
        require_package("mlflow", "mlflow", "MLflowCallback")
        self.tracking_uri, self.experiment, self.run_name = tracking_uri, experiment, run_name
        self.client, self.run_id, self.resumed_run_id = None, None, None
        self._pending: list = []  # metrics not yet sent (`_log`)
        self._sent = time.monotonic()
        self._logged: set[tuple[str, int]] = set()  # (metric, step) the interrupted run sent past its last epoch

    def _setting(self, api: str, variable: str) -> str:
        """The setting a fix changes: the Python argument given, else the environment variable."""
        given = self.tracking_uri if api == "tracking_uri" else self.experiment
        return f"MLflowCallback({api}=...)" if given is not None else variable

    def _uri(self) -> str:
        """The store asked: the client's, else the one given, else MLflow's own choice (MLFLOW_TRACKING_URI)."""
        if self.client is not None:
            return self.client.tracking_uri
        if self.tracking_uri is not None:
            return self.tracking_uri
        import mlflow
        return mlflow.get_tracking_uri()

    @contextlib.contextmanager
    def _store(self, doing: str) -> Iterator[None]:
        """Any failure of the store while `doing` something: one line naming the store and the setting."""
        try:
            yield
        except DistillError:
            raise
        except Exception as err:  # noqa: BLE001 - MLflow, SQLAlchemy, a database driver, the OS: all the store's
            gist = " ".join(str(err).split()) or type(err).__name__
            gist = gist.split(". ")[0].split(" [SQL: ")[0][:200]
            uri = shown_url(self._uri())
            self.client = None  # a store that failed is not asked again to close the run
            raise DistillError(f"MLflow cannot {doing} in the tracking store {uri} ({gist}): set "
                               f"{self._setting('tracking_uri', 'MLFLOW_TRACKING_URI')} to a tracking server "
                               "(http://HOST:PORT) or a database (sqlite:///mlflow.db)") from None

    def _parts(self, uri: str) -> urllib.parse.SplitResult:
        """The store's URI in parts; one that is no URL (an unclosed IPv6 bracket, a port past 65535) is one line
        naming the setting, not urllib's ValueError."""
        try:
            parts = urllib.parse.urlsplit(uri)
            parts.port  # noqa: B018 - parsed on access
        except ValueError as err:
            raise DistillError(f"MLflow cannot use the tracking store {shown_url(uri)} (not a URL: {err}): set "
                               f"{self._setting('tracking_uri', 'MLFLOW_TRACKING_URI')} to a tracking server "
                               "(http://HOST:PORT) or a database (sqlite:///mlflow.db)") from None
        return parts

    def _require_database_packages(self, parts: urllib.parse.SplitResult) -> None:
        """A database store without SQLAlchemy or Alembic (mlflow-skinny installed alone) is refused in one line
        naming the extra: reading an SQLite store's path (through SQLAlchemy) was a traceback, and MLflow's own
        failure named neither."""
        if parts.scheme.split("+")[0] in ("sqlite", *DATABASE_PORTS):
            for module in DATABASE_PACKAGES:
                require_package(module, "mlflow", "MLflowCallback")

    def _reach(self, uri: str) -> None:
        """A store that cannot be reached is refused at once: MLflow's own client retries a refused connection,
        and an SQLite file it cannot open, for minutes before it gives up. An in-memory SQLite store, which
        keeps nothing once the run ends, is refused too."""
        parts = self._parts(uri)
        self._require_database_packages(parts)
        if parts.scheme.split("+")[0] == "sqlite":
            self._open_sqlite(uri)
        if parts.scheme.split("+")[0] in DATABASE_PORTS:
            self._reach_database(uri, parts)
            require_database_driver(uri, option("--report-to mlflow", "MLflowCallback"))  # MLflow's line named no extra
        if parts.scheme not in ("http", "https"):
            return
        netloc = parts.netloc.rsplit("@", 1)[-1]  # user:password@ is MLflow's to send, not part of the address
        try:
            urllib.request.urlopen(f"{parts._replace(netloc=netloc).geturl().rstrip('/')}/health", timeout=10).close()
        except urllib.error.HTTPError:
            return  # it answered (perhaps asking for credentials, which MLflow's client sends)
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", None) or err
            raise DistillError(f"MLflow's tracking server {shown_url(uri)} does not answer ({reason}): start it, or "
                               f"set {self._setting('tracking_uri', 'MLFLOW_TRACKING_URI')} to one that runs") from None

    def _reach_database(self, uri: str, parts: urllib.parse.SplitResult) -> None:
        """A database server (PostgreSQL, MySQL, SQL Server) that does not take a connection at its host and port
        is refused at once, before MLflow's engine retries it for two minutes, warning at each retry; a URL of no
        host (a local socket) is MLflow's to open."""
        if not parts.hostname:
            return
        port = parts.port or DATABASE_PORTS[parts.scheme.split("+")[0]]
        try:
            socket.create_connection((parts.hostname, port), timeout=10).close()
        except OSError as err:
            reason = err.strerror or err
            raise DistillError(f"MLflow's tracking database {shown_url(uri)} does not answer at "
                               f"{parts.hostname}:{port} ({reason}): start it, or set "
                               f"{self._setting('tracking_uri', 'MLFLOW_TRACKING_URI')} to one that runs") from None

    def stores(self) -> dict[Path, str]:
        """The store on this machine that MLflow writes: an SQLite file, or a file store's folder (a path or
        file:PATH); none for a server. An SQLite URL naming no file is refused when the run opens it (`_reach`)."""
        uri = self._uri()
        parts = self._parts(uri)
        self._require_database_packages(parts)
        if parts.scheme.split("+")[0] == "sqlite":
            try:
                path = sqlite_database(uri)
            except ValueError:
                return {}
        elif parts.scheme == "file":
            path = Path(urllib.request.url2pathname(parts.path))
        elif parts.scheme == "" and uri:
            path = Path(uri)
        else:
            return {}
        return {path: f"MLflow's tracking store {path} ({self._setting('tracking_uri', 'MLFLOW_TRACKING_URI')})"}

    def _open_sqlite(self, uri: str) -> None:
        """Open the SQLite file `uri` names once, as MLflow will (its folder made if missing)."""
        import sqlite3
        try:
            database = sqlite_database(uri)
            database.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.closing(sqlite3.connect(database, timeout=10)) as connection:
                connection.execute("PRAGMA schema_version")
        except (ValueError, OSError, sqlite3.Error) as err:
            reason = "it keeps nothing once the run ends" if str(err) == IN_MEMORY_SQLITE else err
            raise DistillError(f"MLflow cannot use the tracking store {uri} ({reason}): set "
                               f"{self._setting('tracking_uri', 'MLFLOW_TRACKING_URI')} to an SQLite file it can "
                               "write (sqlite:///mlflow.db) or a tracking server (http://HOST:PORT)") from None

    def _experiment_id(self) -> str:
        name = self.experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or "distill"
        found = self.client.get_experiment_by_name(name)
        if found is None:
            return self.client.create_experiment(name)
        if found.lifecycle_stage == "deleted":
            raise DistillError(f"the MLflow experiment {name!r} was deleted: restore it (mlflow experiments restore "
                               f"--experiment-id {found.experiment_id}) or set "
                               f"{self._setting('experiment', 'MLFLOW_EXPERIMENT_NAME')} to another name")
        return found.experiment_id

    def on_train_begin(self, run: dict) -> None:
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient
        with self._store("open the run"):
            self._reach(self._uri())  # before the client, which opens the store (and retries) as it is made
            self.client = MlflowClient(self.tracking_uri)
            if self.resumed_run_id is not None and self._continue(self.resumed_run_id, run["step"]):
                return
            self.run_id = self.client.create_run(self._experiment_id(), run_name=self.run_name).info.run_id
            params = [Param(key, str(value)) for key, value in run["settings"].items()]
            self.client.log_batch(self.run_id, params=params)

    def _continue(self, run_id: str, step: int) -> bool:
        """Reopen the interrupted run's tracked run; False (and a warning) when the store no longer holds it.
        What it sent after `step` (its last finished epoch's), the resumed run computes again, alike since resume
        is exact: those points are not sent twice (an MLflow metric's history only grows)."""
        from mlflow.exceptions import MlflowException
        try:
            tracked = self.client.get_run(run_id)
        except MlflowException:
            tracked = None
        if tracked is None or tracked.info.lifecycle_stage == "deleted":
            log.warning("MLflow run %s, which the interrupted run logged to, is not in %s: this run is logged "
                        "to a new one", run_id, self.client.tracking_uri)
            return False
        self.client.update_run(run_id, status="RUNNING")
        self.run_id = run_id
        self._logged = {(key, point.step) for key in tracked.data.metrics
                        for point in self.client.get_metric_history(run_id, key) if point.step > step}
        return True

    def _log(self, values: dict[str, float], step: int) -> None:
        """Queue metrics; they are sent once `FLUSH_SECONDS` have passed since the last send, or a batch is full:
        a store call per step (an SQLite commit, an HTTP request) made small models' epochs several times slower."""
        from mlflow.entities import Metric
        now = int(time.time() * 1000)
        self._pending.extend(Metric(name, value, now, step) for name, value in values.items()
                             if (name, step) not in self._logged)
        if len(self._pending) >= MLFLOW_BATCH or time.monotonic() - self._sent >= FLUSH_SECONDS:
            self._flush()

    def _flush(self) -> None:
        with self._store("log metrics"):
            while self._pending:
                batch, self._pending = self._pending[:MLFLOW_BATCH], self._pending[MLFLOW_BATCH:]
                self.client.log_batch(self.run_id, metrics=batch)
        self._sent = time.monotonic()

    def on_step(self, step: Step) -> None:
        self._log(step_scalars(step), step.step)

    def on_epoch_end(self, epoch: EpochEnd) -> None:
        self._log(epoch_scalars(epoch), epoch.step)
        self._flush()  # an epoch's record is whole in the store once its dev score is

    def on_train_end(self, result: dict) -> None:
        best = result["best"]
        self._log({"best/epoch": best["epoch"]}, result["steps"])
        self._flush()
        with self._store("close the run"):
            self.client.set_terminated(self.run_id)

    def on_train_stop(self, error: BaseException) -> None:
        if self.client is not None and self.run_id is not None:
            self._flush()  # the steps up to the stop, as a resumed run logs on from them
            with self._store("close the run"):
                self.client.set_terminated(self.run_id, "FAILED" if isinstance(error, Exception) else "KILLED")

    def state_dict(self) -> dict:
        return {} if self.run_id is None else {"run_id": self.run_id}

    def load_state_dict(self, state: dict) -> None:
        self.resumed_run_id = state.get("run_id")


@dataclass
class ReportTarget:
    """Where a run's reporters write: its output folder (None: in memory) and a `logging_dir` given for
    TensorBoard's events (None: OUTPUT/runs)."""

    output: str | Path | None
    logging_dir: str | Path | None = None


def _tensorboard(target: ReportTarget) -> Callback:
    if target.logging_dir is None and target.output is None:
        raise DistillError(f"{option('--report-to tensorboard', 'TensorBoardCallback')} needs a folder for its "
                           f"events: give {option('--logging-dir', 'TensorBoardCallback(log_dir)')}")
    return TensorBoardCallback(target.logging_dir or Path(target.output) / TRACKING_FOLDER)


def _mlflow(target: ReportTarget) -> Callback:
    return MLflowCallback(run_name=None if target.output is None else Path(target.output).name)


REPORTERS: Registry[Callable[[ReportTarget], Callback]] = Registry(
    "reporter", [("tensorboard", _tensorboard), ("mlflow", _mlflow)])


def register_reporter(name: str, build: Callable[[ReportTarget], Callback]) -> None:
    """Make ``--report-to NAME`` build a callback of your own: `build` gets the run's `ReportTarget`."""
    if not isinstance(name, str) or not name or name == "none" or "," in name:
        raise DistillError(f"a reporter's name is a word other than none, got {name!r}")
    REPORTERS.add(name, build)


def reporter_names(values: Sequence[str]) -> list[str]:
    """``--report-to`` values (repeated, or joined by commas) as reporter names, once each; ``none``: none.
    A value naming nothing (``--report-to "$TRACKER"`` with the variable unset) or an empty name among others
    (``tensorboard,,``) is refused: reporting nowhere, or without a reporter meant, would pass unseen."""
    for value in values:
        if not value.replace(",", "").strip():
            raise DistillError(f"{option('--report-to', 'reporters()')} {value!r} names no reporter: give "
                               f"{', '.join([*REPORTERS, 'none'])}")
        if any(not name.strip() for name in value.split(",")):
            raise DistillError(f"{option('--report-to', 'reporters()')} {value!r} has an empty reporter name: "
                               f"give names separated by single commas")
    names = [name.strip() for value in values for name in value.split(",")]
    unknown = [name for name in names if name != "none" and name not in REPORTERS]
    if unknown:
        raise DistillError(f"unknown reporter {unknown[0]!r}: choose from {', '.join([*REPORTERS, 'none'])}")
    if "none" in names and len(set(names)) > 1:
        raise DistillError(f"{option('--report-to', 'reporters()')} none reports nowhere: give it alone")
    return list(dict.fromkeys(name for name in names if name != "none"))


def reporters(names: Sequence[str], target: ReportTarget) -> list[Callback]:
    """The callbacks of ``--report-to`` `names` for a run writing to `target`."""
    return [REPORTERS[name](target) for name in reporter_names(names)]


__all__ = ["Callback", "CallbackList", "EpochEnd", "MLflowCallback", "REPORTERS", "ReportTarget", "Step",
           "TensorBoardCallback", "register_reporter", "reporter_names", "reporters"]
