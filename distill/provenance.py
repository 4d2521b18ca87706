"""What a run was given and where it stands, kept apart from the loop that trains (`distill.training`): each input's
fingerprint (a file's sha256, a model's card, a teacher's files or prompt), what a model learnt from (so a dev or
test file it trained on is warned of), and the resume state an interrupted run continues from, exactly or not at
all (`RunState`, `load_run_state`)."""

from __future__ import annotations

import hashlib
import json
import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from distill import distributed, precision
from distill.errors import DistillError, ResumeRefused, option
from distill.io import file_sha256, load_sealed, uninterrupted
from distill.runtime import Output
from distill.settings import named

logger = logging.getLogger("distill")


def input_fingerprints(inputs: dict[str, str | None]) -> dict[str, str | None]:
    """What each input of a run holds: a file's sha256, a model directory's card (which records the
    sha256 of every model file), another folder's files (a local encoder: its config, tokenizer and
    weights), a transformers classifier given as a teacher by its files (`hub_teacher.source_fingerprint`), a
    language model asked a prompt by its files or endpoint and the prompt (`distill.models.prompted.prompted_fingerprint`),
    a hub spec or an encoder's name as written. Size and mtime are not enough: an edited
    file of the same size, or a file copied over with its old mtime, must count as changed."""
    from distill.models.card import MODEL_CARD
    from distill.models.hub_files import is_transformers_source, source_fingerprint
    from distill.models.prompted import prompted_fingerprint
    prints: dict[str, str | None] = {}
    for role, value in inputs.items():
        path = Path(value) if value else None
        prompted = prompted_fingerprint(value) if path is not None and role.split(":")[0] in TEACHER_ROLES else None
        if prompted is not None:  # a language model asked a prompt: its files or endpoint, and the prompt
            prints[role] = f"prompted:{prompted}"
        elif path is not None and role.split(":")[0] in TEACHER_ROLES and is_transformers_source(value):
            prints[role] = f"transformers:{source_fingerprint(value)}"  # its files, as they key the logit cache
        elif path is None or str(value).startswith(("hub:", "memory:")):  # as written: a spec, or a digest
            prints[role] = value
        elif (path / MODEL_CARD).is_file():
            prints[role] = file_sha256(path / MODEL_CARD)
        elif path.is_dir():
            prints[role] = folder_sha256(path)
        else:
            prints[role] = file_sha256(path) if path.is_file() else None
    return prints


TEACHER_ROLES = ("teacher", "embeddings_from_teacher")  # inputs that may be a transformers classifier (no card)


def teacher_role(number: int) -> str:
    """Teacher `number` (from 0) as a run's inputs name it: ``teacher``, then an ensemble's ``teacher:2``..."""
    return "teacher" if number == 0 else f"teacher:{number + 1}"


LEARNT_FROM_ROLES = ("train", "unlabeled")  # a model's inputs whose examples it fits: its scores there read high


SHOTS_ROLE = "shots"  # a language-model teacher scored on the file its prompt's examples come from
LEARNT_FROM_KEYS = ("inputs", "example_digests")  # what a run's summary records of the data it learnt from


def learnt_record(model_dir: str | Path) -> dict:
    """What `learnt_from` reads of the run that made `model_dir`: from its ``train_summary.json``, or for an
    export (ONNX, slim copy) from its card, which keeps its source's record (the source folder may since
    hold another model, or none); an export made before kept none: its source's, while that is the model
    it was exported from."""
    from distill.io import file_sha256
    from distill.models.card import MODEL_CARD
    from distill.outputs import SUMMARY_FILE, read_summary
    record = read_summary(model_dir) if Path(model_dir).is_dir() else None
    if record is None:
        try:
            export = json.loads((Path(model_dir) / MODEL_CARD).read_text(encoding="utf-8"))["export"]
            record = export.get("learnt_from")
            if record is None and file_sha256(Path(export["source"]) / MODEL_CARD) == export["source_card_sha256"]:
                record = json.loads((Path(export["source"]) / SUMMARY_FILE).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
            return {}
    return {key: record[key] for key in LEARNT_FROM_KEYS if key in record} if isinstance(record, dict) else {}


def learnt_from(model_dir: str | Path, data_path: str, examples: Sequence | None = None) -> str | None:
    """Which of the inputs `model_dir` learnt from (``train``, ``unlabeled``, ``train:HEAD``; a language-model
    teacher's few-shot examples, ``shots``: `distill.models.prompted.examples_file`) is `data_path`, or None: scored there, a model reads better than it is. The file itself (by its
    sha256; a hub dataset by its spec), or, given its `examples`, the same examples in the same order
    in any file (another format, other line ends). Read from what the run's ``train_summary.json``
    records (an export's: its source's); runs of before this record have none."""
    from distill.data import memory_source
    from distill.models.prompted import examples_file
    given = input_fingerprints({"data": data_path})["data"]
    shown = examples_file(model_dir)  # a language-model teacher's few-shot examples are in every prompt
    if shown is not None and given is not None and input_fingerprints({"data": shown})["data"] == given:
        return SHOTS_ROLE
    summary = learnt_record(model_dir)
    recorded, digests = summary.get("inputs"), summary.get("example_digests")
    if isinstance(recorded, dict) and given is not None:
        role = next((role for role, print_ in recorded.items() if role.split(":")[0] in LEARNT_FROM_ROLES
                     and isinstance(print_, str) and (print_ == given or print_.startswith(f"{given} memory:"))),
                    None)
        if role is not None:
            return role
    if isinstance(digests, dict) and examples is not None:
        digest = memory_source(examples)
        return next((role for role, print_ in digests.items() if print_ == digest), None)
    return None


def warn_if_learnt_from(model_dir: str | Path, data_path: str, examples: Sequence | None = None) -> str | None:
    """Warn when `data_path` (its `examples`) is data `model_dir` learnt from (`learnt_from`); returns its role."""
    role = learnt_from(model_dir, data_path, examples)
    if role is not None and distributed.is_main():
        learnt = f"the data {model_dir} was trained on (its {role!r} input)" if role != SHOTS_ROLE else \
            f"where the few-shot examples of {model_dir}'s prompt come from ({option('--shots-from', 'shots_from')})"
        logger.warning(f"warning: {data_path} is {learnt}: its scores there read higher than on held-out data")
    return role


def folder_sha256(folder: Path) -> str:
    """One digest of every file under `folder`: the name and sha256 of each, in name order."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    listing = "".join(f"{p.relative_to(folder).as_posix()}\0{file_sha256(p)}\n" for p in files)
    return hashlib.sha256(listing.encode()).hexdigest()


def runtime_settings() -> dict:
    """What besides the options changes a run's numbers: precision, torch threads (the order of
    float sums), and the number of processes."""
    return {"precision": precision.current(), "threads": torch.get_num_threads(),
            "processes": distributed.world_size()}


@dataclass
class RunState:
    """Where an interruptible run keeps its end-of-epoch state, and what identifies the run.

    `signature` (JSON-able: settings, input fingerprints, runtime) must match on `--resume`, so a
    run is never continued with different settings or data. The state is removed once the run's
    summary is written (`finish`); it carries its own checksum, so a damaged state file is refused.
    """

    directory: Path
    signature: dict
    resume: bool = False
    learnt: dict = field(default_factory=dict)  # role -> digest of the examples it learns from: `learnt_from`
    sources: dict = field(default_factory=dict)  # role -> the input as given (a file's name): the README card

    def __post_init__(self) -> None:
        # checked at once, so a refused resume costs no data reading or teacher pass and touches nothing
        self.saved = load_run_state(self)

    @property
    def path(self) -> Path:
        from distill.models.card import RESUME_FILE
        return Path(self.directory) / RESUME_FILE

    def model_print(self) -> str | None:
        """Which model the run's folder holds, recorded in the resume state each time an epoch's best model is
        saved: one digest of the sha256 its card lists for each file but the README (which the run's end
        rewrites, with its scores, before the summary); None without a readable card."""
        from distill.models.card import MODEL_CARD
        from distill.models.readme import README
        try:
            files = json.loads((Path(self.directory) / MODEL_CARD).read_text(encoding="utf-8"))["sha256"]
            listed = {name: digest for name, digest in files.items() if name != README}
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return hashlib.sha256(json.dumps(listed, sort_keys=True).encode()).hexdigest()

    def check_best_kept(self, best: dict | None, recorded: str | None) -> None:
        """A resumed run that no epoch since improved ends on the model in its folder: refused unless that is
        the model the resume state recorded for its best epoch (`model_print`). A resume state copied in from
        another run of the same settings (or an older copy of this one's) passes every other check, and named
        a best epoch the folder's model never was. States that recorded none are not checked."""
        if best is None or recorded is None or self.model_print() == recorded:
            return
        raise ResumeRefused(f"{self.directory}: the model there is not the one the resume state saved for its best "
                            f"epoch ({best['epoch']}), which no epoch since has beaten: the resume state is another "
                            f"run's, or the model was replaced; start over with "
                            f"{named(Output, 'overwrite', 'overwrite=True')}")

    def finish(self, write_summary: Callable[[], None]) -> None:
        """Write the finished run's summary, then drop its resume state, with Ctrl-C and SIGTERM held
        between: an interrupt at any moment leaves either the state to resume from or a finished run,
        never a folder of neither (which the cleanup would remove, epochs and all)."""
        with uninterrupted():
            write_summary()
            self.path.unlink(missing_ok=True)


def rng_state(generator: torch.Generator) -> dict:
    """Every random stream training touches, as tensors (loadable with weights_only=True)."""
    version, mt, gauss = random.getstate()
    _, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    state = {"python": torch.tensor(mt, dtype=torch.int64), "python_version": version, "python_gauss": gauss,
             "numpy": torch.from_numpy(np_keys.astype(np.int64)), "numpy_pos": int(np_pos),
             "numpy_has_gauss": int(np_has_gauss), "numpy_gauss": float(np_gauss),
             "torch": torch.get_rng_state(), "data_order": generator.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def rng_states(generator: torch.Generator) -> list[dict]:
    """Every rank's random streams (`rng_state`), in rank order, for the resume state: each rank draws its own
    dropout masks for its share of a batch, so a resumed rank continues its own streams, not rank 0's. A
    collective under a launcher: every rank calls it."""
    return distributed.all_gather_objects(rng_state(generator))


def restore_rng_state(state: dict | list[dict], generator: torch.Generator) -> None:
    """Put back what `rng_state` gave, or this rank's streams of what `rng_states` gave."""
    if isinstance(state, list):
        state = state[distributed.rank()]
    random.setstate((state["python_version"], tuple(state["python"].tolist()), state["python_gauss"]))
    np.random.set_state(("MT19937", state["numpy"].numpy().astype(np.uint32), state["numpy_pos"],
                         state["numpy_has_gauss"], state["numpy_gauss"]))
    torch.set_rng_state(state["torch"])
    generator.set_state(state["data_order"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def changed_settings(saved: dict, current: dict, prefix: str = "") -> list[str]:
    """Dotted names of the settings that differ, e.g. ``config.lr`` or ``inputs.train``."""
    changed = []
    for key in sorted(set(saved) | set(current)):
        old, new = saved.get(key), current.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            changed += changed_settings(old, new, f"{prefix}{key}.")
        elif old != new:
            changed.append(prefix + key)
    return changed


def load_run_state(run: RunState) -> dict | None:
    """The saved state of an interrupted run, checked against this run's signature (None: start afresh)."""
    if not run.resume or not run.path.exists():
        return None
    try:
        state = load_sealed(run.path)
    except DistillError as err:  # damaged or no state file: no run continues from it (a search trial starts over)
        raise ResumeRefused(str(err)) from None
    saved, current = json.loads(state["signature"]), json.loads(json.dumps(run.signature, sort_keys=True))
    if saved != current:
        changed = changed_settings(saved, current)
        ran = [f"{name.split('.', 1)[1]} {saved.get('runtime', {}).get(name.split('.', 1)[1])} (now "
               f"{current['runtime'].get(name.split('.', 1)[1])})" for name in changed if name.startswith("runtime.")]
        same = option("the same --threads and --precision", "the same torch threads and precision")
        resume_so = (f"; it ran with {', '.join(ran)}: resume it so (as many processes, torchrun "
                     f"--nproc-per-node, and {same}), or start over with") if ran else \
            "; start over with"
        raise ResumeRefused(f"{run.directory}: cannot resume with different settings or data "
                           f"({', '.join(changed)}){resume_so} {named(Output, 'overwrite', 'overwrite=True')}")
    best = json.loads(state["best"])
    if best is not None:  # the best epoch's model lives only in the folder: a resume that never beats it keeps it
        from distill.models.card import read_model_card, verify_model_files
        try:
            verify_model_files(run.directory, read_model_card(run.directory, unfinished=True))
        except DistillError as err:
            raise ResumeRefused(f"{run.directory}: the model of the interrupted run's best epoch ({best['epoch']}) "
                               f"is missing or damaged ({err}); start over with "
                               f"{named(Output, 'overwrite', 'overwrite=True')}") from None
    return state
