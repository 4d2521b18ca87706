"""The study: its storage (SQLite, or a shared database), one lock per output, heartbeats, trials queued again after
an interruption, the default students first, the reseeded runs of the best few, the time budget; and `search`,
which runs it all and reports."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from distill.cache import CACHE_DIR_OPTION, check_cache_dir
from distill.data import DataOptions
from distill.errors import DistillError, option
from distill.io import (IN_MEMORY_SQLITE, NOT_A_DATABASE_URL, check_folder, check_target, make_folder, real_path,
                       require_database_driver, shown_url, sqlite_database)
from distill.settings import named, setting
from distill.student_search.report import reseed_candidates, spent_seconds, trial_record, write_reports
from distill.student_search.space import (BEST_EXPORT_FOLDER, BEST_FOLDER, GRACE_SECONDS, HEARTBEAT_SECONDS,
                                          LOCK_FILE, SEARCH_NAMES, STUDY_DB, STUDY_RECORD, TRIALS_FOLDER, TRIALS_JSON,
                                          TRIALS_PLOT, TRIALS_TABLE, WAIT_SECONDS, SearchSpace, load_space,
                                          optuna_module, require_search_packages)
from distill.student_search.trial import Budget, FamilyPruner, Job, measure, run_trial


@contextlib.contextmanager
def _locked(output: Path) -> Iterator[None]:
    """The search folder's lock: one process at a time warms the logit cache, opens the study or writes the
    reports, so processes joining one search neither score the teacher twice nor interleave their files."""
    import fcntl
    with open(output / LOCK_FILE, "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def storage_file(url: str) -> Path | None:
    """The file of an SQLite storage `url` (None: a database server's), or one line saying why `url` is none:
    a file's path given for its URL, sqlite://FILE (a host), or an in-memory SQLite database, which keeps the
    study only while this process runs (no other process joins it, and running the command again starts over)."""
    optuna_module()
    try:
        if not isinstance(url, str):  # a Path given for the URL: one line, as a path string is
            raise ValueError(NOT_A_DATABASE_URL)
        return sqlite_database(url)
    except ValueError as err:
        if str(err) == IN_MEMORY_SQLITE:
            default = option("no --storage", "storage=None")
            raise DistillError(f"{shown_url(url)}: {IN_MEMORY_SQLITE} keeps the study only in this process: give a "
                               f"file, sqlite:///PATH (or {default}: OUTPUT/study.db)") from None
        if str(err) != NOT_A_DATABASE_URL:
            raise DistillError(f"{url}: {err}") from None
        example = f"sqlite:///{url}" if isinstance(url, (str, os.PathLike)) and url and ":" not in str(url) \
            else "sqlite:///PATH"
        raise DistillError(f"{url!r} is not a storage URL: give {example} for an SQLite file, or a database "
                           "server's URL (postgresql://HOST/DB)") from None


def check_storage(url: str, inputs: list, output: Path) -> str | None:
    """The storage a search opens, checked before anything is written: `url`, or None where it names the search's
    own file (OUTPUT/study.db, the default), which is made with the folder. An SQLite file lies where the output
    rule allows (`check_written_folder`), and in the search's folder nowhere else: every other name there is the
    search's (best/ and the trials' folders are models, best/ replaced whole at each choice; trials.json is
    replaced at each report). A new file is not made here (a search refused after this would leave it behind):
    its folder must exist; an existing one, or a server's database, is opened."""
    from distill.outputs import check_written_folder
    database = storage_file(url)
    if database is not None:
        own = output / STUDY_DB
        place = real_path(database)
        if place == real_path(own):
            return None
        if real_path(output) in (place, *place.parents):
            default = option("no --storage", "storage=None")
            raise DistillError(f"{database}: lies in the search's folder {output}, whose study is {own} ({default}): "
                               "give that, or a file outside the folder")
        check_written_folder(database, [item for item in inputs if isinstance(item, (str, os.PathLike))], output)
        if not database.exists():
            if not database.parent.is_dir():
                raise DistillError(f"{shown_url(url)}: cannot open the study's storage (no folder {database.parent})")
            return url
    _storage(url).engine.dispose()  # a database it cannot open: said before the output folder is made
    return url


def _storage(url: str):
    optuna = optuna_module()
    from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
    from sqlalchemy.exc import SQLAlchemyError  # optuna's storage layer: a database it cannot reach or open
    if storage_file(url) is None:
        require_database_driver(url, f"the study's storage {shown_url(url)}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the retry callback is "experimental"
        try:
            return RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {},
                              heartbeat_interval=HEARTBEAT_SECONDS, grace_period=GRACE_SECONDS,
                              heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback())
        except (ImportError, ValueError, optuna.exceptions.StorageInternalError, SQLAlchemyError) as err:
            gist = " ".join(str(err).replace(url, shown_url(url)).split()).split(" (Background on this error")[0]
            raise DistillError(f"{shown_url(url)}: cannot open the study's storage ({gist[:160]})") from None


def _retry(study, trial) -> None:
    """Queue an interrupted trial's settings again (its run continues from its last finished epoch)."""
    from optuna.storages import RetryHeartbeatStaleTrialCallback
    frozen = next(t for t in study.get_trials(deepcopy=False) if t.number == trial.number)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        RetryHeartbeatStaleTrialCallback()(study, frozen)


def _fail_dead_trials(study) -> None:
    """Fail, and queue again, the running trials whose process on this machine is gone (killed outright: SIGKILL,
    the kernel out of memory), as a stale heartbeat has them failed after `GRACE_SECONDS`: the search run again
    at once counted such a trial as running elsewhere, stopped without it, and chose (exit 0) without its
    student. A process of another machine, or one still alive, is left to its heartbeat."""
    import socket
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState
    host = socket.gethostname()
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        name, _, pid = str(trial.user_attrs.get("process", "")).rpartition(":")
        if name != host or not pid.isdigit() or _alive(int(pid)):
            continue
        with contextlib.suppress(UpdateFinishedTrialError):  # another process failed it first
            if study._storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL):
                _retry(study, trial)


def _alive(pid: int) -> bool:
    """Whether process `pid` of this machine exists (one of another user's too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _heartbeat(study, trial) -> Iterator[None]:
    """The trial's heartbeat in the storage while it runs, as `Study.optimize` keeps one."""
    from optuna.storages._heartbeat import get_heartbeat_thread  # optimize's own; the ask-and-tell API has none
    with get_heartbeat_thread(trial._trial_id, study._storage):
        yield


def _identity(teacher: str, train: Any, dev: Any, unlabeled: Any, space: SearchSpace, batch_size: int,
              threads: int, data: DataOptions) -> dict:
    """What a study's trials depend on, recorded with it: a search resumed or joined with other data, teacher,
    space or latency settings would mix trials that cannot be compared; so would other data options (another
    text column reads other text from the same files), recorded where not the defaults (a study recorded
    before them resumes)."""
    from distill.provenance import input_fingerprints
    inputs = {role: str(value) for role, value in (("teacher", teacher), ("train", train), ("dev", dev),
                                                    ("unlabeled", unlabeled)) if isinstance(value, (str, Path))}
    return {"inputs": input_fingerprints(inputs), "space": space.given, "latency_batch_size": batch_size,
            "latency_threads": threads, **({"data": dataclasses.asdict(data)} if data != DataOptions() else {})}


def _open_study(job: Job, storage: str | None, study_name: str, identity: dict, pruner):
    optuna = optuna_module()
    url = storage or f"sqlite:///{real_path(job.output / STUDY_DB)}"
    database = storage_file(url)
    fresh = database is not None and not database.exists()  # (under the folder's lock: no other process made it)
    opened = _storage(url)
    try:
        if study_name not in {held.study_name for held in opened.get_all_studies()}:
            _claim_trials(None, study_name, job.output)  # another study's folders: refused before a study is made
        study = optuna.create_study(storage=opened, study_name=study_name, direction="maximize", pruner=pruner,
                                    load_if_exists=True)
    except DistillError:
        if fresh:  # a refused search leaves no study file it made
            opened.engine.dispose()
            database.unlink(missing_ok=True)
        raise
    _searched_as(study, identity, url, study_name)  # refused now, before the teacher's logits are cached
    _claim_trials(study, study_name, job.output)
    return study, url


def _searched_as(study, identity: dict, url: str, study_name: str) -> bool:
    """Whether `study` records `identity` (`_identity`) as what its trials were searched with; one recording
    another and holding trials is refused. The record is made as the first trial is asked (`_run_trials`): a study
    that holds none pins nothing, so a search stopped before its first trial (a wrong file, Ctrl-C while the
    teacher's logits were cached) is not refused as other data when run again corrected."""
    recorded = study.user_attrs.get("search")
    if recorded is None or recorded == identity:
        return recorded is not None
    if not study.get_trials(deepcopy=False):
        return False
    differs = next(key for key in {**recorded, **identity} if recorded.get(key) != identity.get(key))
    said = {"inputs": "other data or another teacher", "space": "another space",
            "latency_batch_size": "another latency batch size", "latency_threads": "other latency threads",
            "data": "other data options (columns, label separator)"}
    raise DistillError(f"{shown_url(url)}: study {study_name!r} searched with {said.get(differs, differs)}; "
                       f"resume it with the same one, or give another {option('--output', 'output')} "
                       f"(or {named(SearchSettings, 'storage', 'storage')})")


def _record_search(study, identity: dict, url: str, study_name: str) -> None:
    """Pin `identity` on the study as a trial is asked, unless it records it already (`_searched_as`)."""
    if not _searched_as(study, identity, url, study_name):
        study.set_user_attr("search", identity)


def _claim_trials(study, study_name: str, output: Path) -> None:
    """The trial folders are this study's: a trial finds its folder's finished run and takes it as its own, so
    folders another study left (its study.db removed, or another --storage or --study-name given for the same
    output) would be taken for trials they are not, and the best model with them. The folder records the study it
    holds (an id kept in the study); a study from before the record adopts the folders its trials name. `study`
    None: one not made yet, which no folder can be of."""
    import uuid
    from distill.io import read_json, write_json
    search_id = None if study is None else study.user_attrs.get("search_id")
    if search_id is None and study is not None:
        search_id = uuid.uuid4().hex
        study.set_user_attr("search_id", search_id)
    trials, record = output / TRIALS_FOLDER, output / TRIALS_FOLDER / STUDY_RECORD
    where = f"give another {option('--output', 'output')}, or remove {output} to start over there"
    held = [] if study is None else study.get_trials(deepcopy=False)
    if record.is_file():
        recorded = read_json(record)
        if not isinstance(recorded, dict) or recorded.get("search_id") != search_id:
            name = recorded.get("study_name") if isinstance(recorded, dict) else None
            raise DistillError(f"{output}: holds the trials of another study ({name!r}, in a storage this search "
                               f"was not given, or one since removed), which this one would take for its own: {where}")
        gone = next((t for t in held if t.state.name == "COMPLETE"
                     and (folder := t.user_attrs.get("folder")) and not (output / folder).is_dir()), None)
        if gone is not None:  # its record names a model no longer there: trials.json, best/ and test scores of it
            raise DistillError(f"{output / gone.user_attrs['folder']}: the folder of trial {gone.number} (complete) "
                               f"is gone: the study holds its scores, not its model, which the search's report "
                               f"names and its choice may copy; put it back, or {where}")
        return
    named = {t.user_attrs.get("folder") for t in held}
    foreign = sorted(path for path in trials.iterdir() if not path.name.startswith(".")
                     and f"{TRIALS_FOLDER}/{path.name}" not in named) if trials.is_dir() else []
    if foreign:
        raise DistillError(f"{foreign[0]}: a trial folder of no trial of study {study_name!r} (another study's, whose "
                           f"storage this search was not given, or one since removed): {where}")
    elsewhere = sorted(folder for t in held if t.state.name == "COMPLETE"
                       and (folder := t.user_attrs.get("folder")) and not (output / folder).is_dir())
    if elsewhere:  # a study that ran in another folder: its trials' models are not here to choose from
        raise DistillError(f"{output}: study {study_name!r} ran its trials in another folder (its {elsewhere[0]} is not "
                           f"here): give the {option('--output', 'output')} it ran in")
    if study is not None:
        write_json(record, {"study_name": study_name, "search_id": search_id})


def _warm_cache(job: Job, task: str, teacher) -> None:
    """The teacher's logits of the training and unlabeled text into the logit cache, once for the study: each
    trial then reads them (scored in the trial only for what the space adds, such as augmented text)."""
    from distill.cache import LogitStore, teacher_logits
    from distill.data import labelled_examples, unlabeled_examples
    examples = list(labelled_examples(job.train, task, job.data, "train").inputs)
    if job.unlabeled is not None:
        examples += list(unlabeled_examples(job.unlabeled, task, job.data, "unlabeled").inputs)
    teacher_logits(teacher, examples, LogitStore(teacher, job.cache_dir), progress=job.progress)


def _reseeding(trial) -> bool:
    return "reseed_of" in trial.user_attrs


def _next_trial(study, job: Job, trials: int, held: list) -> tuple[str, Any]:
    """What this process does next: ("ask", None) after queuing what the study should run next (a default
    student not yet tried, or a reseeded run), ("wait", None) while other processes finish the search trials
    that reseeding needs, or ("stop", why). Decided on `held`, one reading of the study's trials: read twice, a
    trial another process finished in between was complete in one and running in the other, and the best trial
    so far (running in the first) was passed over for reseeding (the two-process test, once, under load)."""
    records = [trial_record(t, job.budget) for t in held]
    searched = [t for t in held if not _reseeding(t)]
    states = [t.state.name for t in searched]
    finished, running = states.count("COMPLETE") + states.count("PRUNED"), states.count("RUNNING")
    spent = spent_seconds(held)
    if job.time_budget is not None and spent >= job.time_budget:
        return "stop", "time budget"
    if any(t.state.name == "WAITING" for t in held):  # a killed trial queued again: it runs first (`study.ask`
        return "ask", None                            # takes the oldest), so nothing queued now is left behind
    if finished + running < trials:
        # the budget's last part is kept for reseeding the best trials so far
        if job.time_budget is None or spent + _reseed_estimate(records, job) < job.time_budget:
            tried = {t.user_attrs["default"] for t in searched if "default" in t.user_attrs and t.state.name != "FAIL"}
            student = next((name for name in job.space.students if name not in tried), None)
            if student is not None:  # the defaults first, one at a time: the search can only add to them
                # one that failed (an error stopped the search) runs again, continuing its run where it can
                failed = [t.user_attrs["folder"] for t in searched if t.user_attrs.get("default") == student
                          and "folder" in t.user_attrs]
                study.enqueue_trial(job.space.default_params(student),
                                    user_attrs={"default": student, **({"folder": failed[-1]} if failed else {})})
            return "ask", None
    if not job.reseed_top or not job.seeds:
        return "stop", "trials"
    if running:
        return "wait", None
    queued = {(t.user_attrs["reseed_of"], t.user_attrs["seed"]) for t in held if _reseeding(t)}
    for record in reseed_candidates(records, job.reseed_top):
        trial = next(t for t in searched if t.number == record["number"])
        for offset in range(1, job.seeds + 1):  # after the trial's own seed, whichever process (--seed) ran it
            seed = (trial.user_attrs.get("seed", job.seed) + offset) % 2**32
            if (record["number"], seed) not in queued:
                attrs = {"reseed_of": record["number"], "seed": seed, "measured": trial.user_attrs["measured"],
                         **({"default": trial.user_attrs["default"]} if "default" in trial.user_attrs else {})}
                study.enqueue_trial(trial.params, user_attrs=attrs)
                return "ask", None
    return "stop", "trials"


def _reseed_estimate(records: list[dict], job: Job) -> float:
    """Seconds reseeding the current candidates would take: each one's time, `seeds` times."""
    if not job.reseed_top or not job.seeds:
        return 0.0
    return job.seeds * sum(r["seconds"] or 0.0 for r in reseed_candidates(records, job.reseed_top))


def _run_trials(study, job: Job, trials: int, timeout: float | None, started: float,
                record: Callable[[], None]) -> str:
    """Ask the study for trials and run them until it holds `trials` finished or running search trials and the
    reseeded runs of the best (`Job.reseed_top`), or `timeout` (this process's seconds), or the time budget is
    spent; returns why it stopped. `record` pins the search's inputs on the study before each trial is asked."""
    optuna = optuna_module()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Heartbeat of storage")  # ours is kept as optimize keeps it
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        while timeout is None or time.monotonic() - started < timeout:
            with _locked(job.output):  # processes sharing the folder count and ask one at a time: none overshoots
                optuna.storages.fail_stale_trials(study)  # a killed process's trial: failed, and queued again
                _fail_dead_trials(study)  # at once where that process was of this machine
                held = study.get_trials(deepcopy=False)
                step, why = _next_trial(study, job, trials, held)
                if step == "stop":
                    return why
                if step == "ask":
                    # seeded by the trials held: a resumed or joining process draws anew, not the first trials'
                    study.sampler = optuna.samplers.TPESampler(seed=(job.seed + len(held)) % 2**32)
                    record()
                    trial = study.ask()
            if step == "wait":
                time.sleep(WAIT_SECONDS)
                continue
            with _heartbeat(study, trial):
                try:
                    value = run_trial(trial, job)
                except optuna.TrialPruned:
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                    continue
                except Exception as err:  # a bug or bad settings: recorded, and the search stops with it
                    trial.set_user_attr("error", f"{type(err).__name__}: {err}"[:500])
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    raise
                except BaseException:  # Ctrl-C, SIGTERM: the trial runs again, from its last epoch, on resume
                    _retry(study, trial)
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    raise
            study.tell(trial, value)
    return "timeout"


# -- the search as a whole ---------------------------------------------------------------------------------------

@dataclass
class SearchSettings:
    """How a search runs: `search`'s keyword arguments of the study, its budget and its choice, as one settings group
    (`distill.settings`) from which ``nlp-train search`` declares its options; ``search(..., **asdict(settings))``."""

    trials: int = setting(20, low=1, help="Trials the study should hold finished (trained to the end, or pruned), "
                          "counted over every resume and every process that joins it; the default students are the "
                          "first, and the reseeded runs (--reseed-top) come on top.")
    max_latency_ms: float | None = setting(None, low=0, low_open=True,
                                           help="Budget: milliseconds a batch of --batch-size may take.")
    as_fast_as: str | Path | None = setting(None, path="dir", metavar="MODEL_DIR", help="Budget: as fast as this "
                                            "model (e.g. the student you use now): its latency, timed here when the "
                                            "search starts, in the same way as every trial's, is --max-latency-ms.")
    batch_size: int = setting(32, low=1, help="The batch size latency is measured at.")
    max_mb: float | None = setting(None, low=0, low_open=True, help="Budget: megabytes the model folder may take.")
    storage: str | None = setting(None, metavar="URL", help="An Optuna storage URL that several processes or machines "
                                  "share, e.g. postgresql://host/db or sqlite:////shared/study.db [default: "
                                  "sqlite:///OUTPUT/study.db].")
    study_name: str = setting("distill-search", help="The study's name in --storage.")
    timeout: float | None = setting(None, low=0, low_open=True, metavar="SECONDS",
                                    help="Start no trial after this many seconds (the running one finishes).")
    time_budget: float | None = setting(None, low=0, low_open=True, metavar="SECONDS", help="The whole search's time: "
                                        "start no trial once the study's trials have taken this long in all (over "
                                        "every resume and process; keeping the time the reseeding needs). A running "
                                        "trial finishes or is pruned.")
    reseed_top: int = setting(3, low=0, help="Train the best N trials within the budget (and the best default student) "
                              "again with --seeds other seeds, and choose the best mean dev score (0: the best single "
                              "run).")
    seeds: int = setting(2, low=0, help="Other seeds each of the --reseed-top trials is trained with (its own seed + 1, "
                         "+ 2, ...; its own is the --seed of the process that ran it).")
    prune: bool = setting(True, off="--no-prune", help="Stop a trial whose dev score falls below the median of its own "
                          "student's other trials at the same epoch (after two of them and its second epoch); the "
                          "default students are never stopped.")
    seed: int = setting(42, low=0, high=2**32 - 1, help="Seeds the sampler and every trial's training.")
    cache_dir: str | Path | None = setting(None, **CACHE_DIR_OPTION)


@dataclass
class SearchResult:
    """A search's outcome: ``report`` is trials.json's content; `best` the chosen model's folder (None when no
    completed trial fits the budget)."""

    report: dict
    output: Path

    @property
    def best(self) -> Path | None:
        return self.output / BEST_FOLDER if self.report["best"] else None

    @property
    def trials(self) -> list[dict]:
        return self.report["trials"]


def check_search_output(output: Path, inputs: list) -> None:
    """A search's folder (its study, trials and best model) is none of its inputs, holds none, lies in none,
    and is no model's directory: a search started there would write its files among the model's. An existing
    folder is new to the search (empty, hidden names aside) or a search's own (it holds trials/, made first):
    any other would have its best/, trials.json or study.db replaced (a model of its own at best/ among them)."""
    from distill.outputs import check_directory_output, is_model_folder
    check_folder(output)
    check_directory_output(output, [item for item in inputs if isinstance(item, (str, os.PathLike))])
    out = real_path(output)
    for folder in out.parents:  # in another search's folder, at a name it writes: its next trial's folder, say
        if (folder / TRIALS_FOLDER / STUDY_RECORD).is_file() and out.relative_to(folder).parts[0] in SEARCH_NAMES:
            raise DistillError(f"{output}: lies in {folder / out.relative_to(folder).parts[0]}, which the search in "
                               f"{folder} writes (its trials, reports and best model): choose an output outside it")
    if output.is_dir() and is_model_folder(output):
        raise DistillError(f"{output}: is a model directory; a search writes a folder of its own (its study, "
                           "trials and best model): choose another output")
    for name in (TRIALS_FOLDER, BEST_FOLDER, BEST_EXPORT_FOLDER, TRIALS_JSON, TRIALS_TABLE, TRIALS_PLOT):
        # what it writes there, checked before any trial (a link, a folder for a file...), not after the last one
        check_target(output / name, folder=name in (TRIALS_FOLDER, BEST_FOLDER, BEST_EXPORT_FOLDER))
    if output.is_dir() and not (output / TRIALS_FOLDER).is_dir():
        held = sorted(path.name for path in output.iterdir() if not path.name.startswith("."))
        if held:
            raise DistillError(f"{output}: holds {held[0]}{' and more' * (len(held) > 1)}, and no search's "
                               f"{TRIALS_FOLDER}/: a search writes its study, trials, reports and {BEST_FOLDER}/ "
                               "there, over what those names hold; give a new or empty folder (or the folder of "
                               "the search to resume)")


def check_search_cache(cache_dir: str | Path | None, output: Path) -> None:
    """A logit cache in the search's folder lies at a name the search does not write (OUTPUT/cache, say): in best/
    it was removed when best/ was replaced at the choice, and the same command then refused (best/ a model by
    then); in trials/ it was one more folder there for a study to take for a trial's."""
    if cache_dir is None:
        return
    folder, out = real_path(cache_dir), real_path(output)
    if out in folder.parents and (name := folder.relative_to(out).parts[0]) in SEARCH_NAMES:
        raise DistillError(f"{cache_dir}: lies in the search's {name}, which it writes ({output / name}: its trials, "
                           "reports, study and best model): choose a cache folder outside those (such as "
                           f"{output / 'cache'})")


def search(teacher: str | Path, train: Any, dev: Any, output: str | Path, trials: int = 20,
           unlabeled: Any = None, space: str | Path | dict | None = None, max_latency_ms: float | None = None,
           batch_size: int = 32, threads: int | None = None, max_mb: float | None = None, storage: str | None = None,
           study_name: str = "distill-search", timeout: float | None = None, test: Any = None, prune: bool = True,
           pruner: Any = None, seed: int = 42, cache_dir: str | Path | None = None, device: str = "cpu",
           data: DataOptions = DataOptions(), progress: bool = False,
           as_fast_as: str | Path | None = None, reseed_top: int = 3, seeds: int = 2,
           time_budget: float | None = None) -> SearchResult:
    """Search students and distillation settings for the best dev score within a budget (module docstring).

    `trials`: how many trials the study should hold finished (trained to the end, or pruned), counted over
    every process and every resume, the default students' first (one trial each, as `kd --model X` trains them
    within the space's fixed settings); `timeout` seconds: this process starts no trial after that;
    `time_budget` seconds: the study starts no trial once its trials have taken that long in all
    (`spent_seconds`), keeping the time the reseeding needs. `reseed_top`: the best trials within the budget (and
    the best default student's) are trained again with `seeds` other seeds, and the one with the best mean dev
    score is chosen (0: the best single run). The budget: `max_latency_ms`
    for a batch of `batch_size` dev examples at `threads` torch threads (None: this process's), or `as_fast_as`: a
    model directory whose latency, measured here when the search starts or resumes, is `max_latency_ms` (a budget
    that holds on a loaded machine as on an idle one); and/or `max_mb`.
    `space`: a file, a mapping or None (the task's `DEFAULT_SPACES`). `storage`: an Optuna storage URL shared by
    several processes or machines (default: ``sqlite:///OUTPUT/study.db``). `pruner`: an Optuna pruner
    (default: `FamilyPruner`, the median of the same student's other trials at the same epoch); `prune` False:
    none; a default student's or a reseeded run is never pruned by it (a trial far over the latency budget
    untrained is, before it trains: `trial.UNTRAINED_SLACK`). `test`: labelled data the chosen model and the
    best default student alone are scored on. Returns trials.json's content.
    """
    from distill.data import check_held_out, labelled_examples, unlabeled_examples
    from distill.errors import require_flag, require_number, require_whole
    from distill.models.kinds import require_kind
    from distill.runtime import Runtime
    from distill.trainers import _check_arguments
    require_search_packages()
    optuna = optuna_module()
    require_whole("trials", trials)
    require_whole("batch_size", batch_size)
    require_whole("threads", threads, optional=True)
    require_whole("seed", seed, 0, 2**32 - 1)
    require_flag("prune", prune)
    Runtime(device, progress=progress)  # the device and the progress flag, as every trial's run takes them
    _check_arguments(data=data)
    if not isinstance(study_name, str):
        raise DistillError(f"study_name must be a string (the study's name in its storage), got {study_name!r:.40}")
    if pruner is not None and not callable(getattr(pruner, "prune", None)):
        raise DistillError(f"pruner must be an Optuna pruner (its prune(study, trial) says whether to stop a trial), "
                           f"got {type(pruner).__name__} {pruner!r:.40}")
    require_number("max_latency_ms", max_latency_ms, 0, math.inf, low_open=True, optional=True)
    require_number("max_mb", max_mb, 0, math.inf, low_open=True, optional=True)
    if as_fast_as is not None and max_latency_ms is not None:
        raise DistillError(f"{named(SearchSettings, 'as_fast_as', 'as_fast_as')} sets the latency budget from a model's own "
                           f"latency: give it or {named(SearchSettings, 'max_latency_ms', 'max_latency_ms')}, not both")
    require_number("timeout", timeout, 0, math.inf, low_open=True, optional=True)
    require_number("time_budget", time_budget, 0, math.inf, low_open=True, optional=True)
    require_whole("reseed_top", reseed_top, 0)
    require_whole("seeds", seeds, 0)
    task = require_kind(teacher, "search").get("task")  # the teacher-kind table: a kind the search takes
    job_space = load_space(space, task)
    job_space.check_unlabeled(unlabeled)
    if as_fast_as is not None and not isinstance(as_fast_as, (str, os.PathLike)):  # one model, not a list of them
        raise DistillError(f"as_fast_as must be one model directory's path (the model whose latency is the budget, "
                           f"or None), got {type(as_fast_as).__name__} {as_fast_as!r:.60}")
    if as_fast_as is not None:  # a model directory of the search's task, before anything is written
        timed = require_kind(str(as_fast_as), "search").get("task")  # a model the search could time as its trials
        if timed != task:
            raise DistillError(f"{as_fast_as}: {named(SearchSettings, 'as_fast_as', 'as_fast_as')} is timed on the search's dev "
                               f"data, and this model does {timed}, the teacher {task}: give a model of the "
                               f"teacher's task")
    output = Path(output)
    check_search_output(output, [teacher, as_fast_as, train, dev, unlabeled, test, space])
    check_cache_dir(cache_dir)  # before the folder is made, as kd checks it before its run
    check_search_cache(cache_dir, output)
    threads = threads or torch.get_num_threads()
    job = Job(str(teacher), train, dev, unlabeled, data, output, job_space, Budget(max_latency_ms, max_mb),
              batch_size, threads, seed, cache_dir, device, progress, reseed_top, seeds, time_budget)
    from distill.labels import build_hierarchy
    from distill.models import load_model, load_teacher
    train_set = labelled_examples(train, task, data, "train")  # read now: a bad file must not leave an output behind,
    teacher_model = load_teacher(str(teacher), device=device)  # nor a broken teacher or one of other labels,
    teacher_model.hierarchy.check_same(build_hierarchy(task, train_set.labels, data.separator, train_set.where),
                                       f"teacher vs training data {train_set.where}")
    job_space.check_metric(task, teacher_model.hierarchy.scheme)
    if job_space.starts_from_teacher() and teacher_model.sub_word_tokenizer() is None:  # nor fail every trial
        kind = getattr(getattr(teacher_model, "config", None), "model", None) or \
            (getattr(teacher_model, "card", None) or {}).get("model") or type(teacher_model).__name__  # an export's
        raise DistillError(f"{teacher}: the teacher ({kind}) has no sub-word embeddings to start the students' word "
                           f"embeddings from: fix distiller: {{teacher_embeddings: false}} in the search space "
                           f"({option('--space FILE', 'space=')})")
    if job_space.starts_from_teacher():
        job_space.check_students_fit(teacher_model)
    if test is not None:  # nor stop the search once its trials are done
        labelled_examples(test, task, data, "test")
    dev_set = labelled_examples(dev, task, data, "dev")
    check_held_out(train_set, dev_set)  # now, as the trials would (or never, where every trial is pruned untrained)
    if unlabeled is not None:
        check_held_out(unlabeled_examples(unlabeled, task, data, "unlabeled"), dev_set, "the unlabeled data")
    job.dev_examples = list(dev_set.inputs)
    job.hierarchy, job.train_inputs = teacher_model.hierarchy, list(train_set.inputs)
    if storage is not None:
        storage = check_storage(storage, [teacher, as_fast_as, train, dev, unlabeled, test, space], output)
    if as_fast_as is not None:
        load_model(str(as_fast_as))  # whole (its files match its card), before the folder is made
    if pruner is None:
        pruner = FamilyPruner() if prune else optuna.pruners.NopPruner()
    created = not output.exists()
    make_folder(output / TRIALS_FOLDER)
    try:
        if as_fast_as is not None:  # timed now, as the trials will be: the same machine in the same state
            job.reference = {"model": str(as_fast_as), **measure(Path(as_fast_as), job.dev_examples, batch_size,
                                                                 threads, scratch=output)}
            job.budget.max_latency_ms = job.reference["latency_ms"]
        started = time.monotonic()
        identity = _identity(str(teacher), train, dev, unlabeled, job_space, batch_size, threads, data)
        with _locked(output):
            study, url = _open_study(job, storage, study_name, identity, pruner)
            _warm_cache(job, task, teacher_model)
    except BaseException:
        if created:  # refused, or stopped, before any trial ran: no folder of a search that never began is left
            shutil.rmtree(output, ignore_errors=True)
        raise
    stopped = _run_trials(study, job, trials, timeout, started,
                          lambda: _record_search(study, identity, url, study_name))
    with _locked(output):
        report = write_reports(study, job, test, time.monotonic() - started, stopped)
    return SearchResult(report, output)
