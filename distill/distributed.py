"""Process-group plumbing for runs launched by `torchrun` (or `accelerate launch`): the one place
that knows about ranks.

A run started without a launcher (WORLD_SIZE unset or 1) never creates a process group: every
helper here then answers for a single process and costs nothing. Under a launcher, `init` joins
the group the launcher's environment describes: gloo for CPU tensors, nccl for CUDA tensors. Every
process waits `join_timeout` for the others to start (DISTILL_JOIN_TIMEOUT, default five minutes), not
torch's half hour.

Light to import: torch is imported by the helpers that need it, so a command line that joins no group
(`nlp-train predict --help`, `nlp-train --help`) asks `launched` without paying for torch's import.
"""

from __future__ import annotations

import math
import os
import re
import socket
import sys
import time
from typing import TYPE_CHECKING, Any, Sequence

from distill.errors import DistillError

if TYPE_CHECKING:
    import torch

    from distill.losses import LossSum


# What torchrun (or `accelerate launch`) sets besides WORLD_SIZE, and the env:// rendezvous needs.
LAUNCH_VARIABLES = ("RANK", "MASTER_ADDR", "MASTER_PORT")
JOIN_TIMEOUT = "DISTILL_JOIN_TIMEOUT"  # seconds each process waits for the others of its run to start
DEFAULT_JOIN_SECONDS = 300


def launched() -> bool:
    """Whether a launcher started this process as one of several (torchrun sets WORLD_SIZE); a WORLD_SIZE that is
    no number is one line, not int()'s traceback."""
    size = os.environ.get("WORLD_SIZE", "1")
    if not size.strip().isdigit() or int(size) < 1:
        raise DistillError(f"WORLD_SIZE={size!r} is no number of processes: start the run with torchrun, which sets "
                           "it, or unset it for one process")
    return int(size) > 1


def check_launch() -> None:
    """A WORLD_SIZE above 1 without the rest of a launcher's environment (set by hand, or left from a job script):
    one line before the process group is joined, not the rendezvous' traceback."""
    missing = [name for name in LAUNCH_VARIABLES if not os.environ.get(name)]
    if missing:
        size = os.environ["WORLD_SIZE"]
        raise DistillError(f"WORLD_SIZE={size} makes this process one of {size}, but {', '.join(missing)} "
                           f"{'is' if len(missing) == 1 else 'are'} not set: start it with torchrun "
                           f"(torchrun --nproc-per-node {size} -m procedures.cli ...), or unset WORLD_SIZE "
                           "for one process")
    size = int(os.environ["WORLD_SIZE"])
    _launch_number("RANK", f"a process number from 0 to {size - 1} (WORLD_SIZE={size})", size - 1)
    port = _launch_number("MASTER_PORT", "a TCP port (1 to 65535)", 65535, low=1)
    local_rank()
    join_timeout()
    address = os.environ["MASTER_ADDR"]
    try:  # else the rendezvous retries a name no resolver knows, a warning every few seconds, for half an hour
        socket.getaddrinfo(address, port)
    except (OSError, UnicodeError) as err:
        reason = getattr(err, "strerror", None) or err
        raise DistillError(f"MASTER_ADDR={address!r} is no address this machine can resolve ({reason}): start the run "
                           "with torchrun, which sets it, or unset WORLD_SIZE for one process") from None


def _launch_number(name: str, what: str, high: int | None = None, low: int = 0, default: str | None = None) -> int:
    """A whole number a launcher sets in the environment (RANK, LOCAL_RANK, MASTER_PORT), checked from `low` to
    `high`: junk set by hand is one line, not the rendezvous' int() traceback, and a rank past WORLD_SIZE is not
    a process that waits for a group it can never join."""
    value = os.environ.get(name, default)
    if value is None or not value.strip().isdigit() or not low <= int(value) <= (high if high is not None
                                                                                  else int(value)):
        raise DistillError(f"{name}={value!r} is not {what}: start the run with torchrun, which sets it, or unset "
                           "WORLD_SIZE for one process")
    return int(value)


def _dist():
    """torch.distributed, imported when a helper first needs it."""
    import torch.distributed
    return torch.distributed


def join_timeout() -> float:
    """Seconds a process of a launched run waits for every other one to start (`JOIN_TIMEOUT` in the environment,
    else `DEFAULT_JOIN_SECONDS`): torch's own wait is half an hour, deaf to SIGTERM, for a process never started."""
    value = os.environ.get(JOIN_TIMEOUT, str(DEFAULT_JOIN_SECONDS))
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise DistillError(f"{JOIN_TIMEOUT}={value!r} is not a number of seconds above 0 (how long each process "
                           f"waits for the others to start; default {DEFAULT_JOIN_SECONDS})")
    return seconds


def _not_joined(missing: Sequence[int], size: int, seconds: float, where: str = "") -> DistillError:
    ranks = f"rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}"
    return DistillError(f"{ranks} of this run (WORLD_SIZE={size}) did not start within {seconds:g} s{where}: start "
                        f"every process of the run (torchrun on every node), or wait longer with "
                        f"{JOIN_TIMEOUT}=SECONDS")


def _joined_store(own: int, size: int) -> Any:
    """The launcher's rendezvous store once every rank has checked in there: torchrun's agent's, else the one rank
    0 serves (as torch's env:// makes them). A rank missing after `join_timeout` is one line naming it. The waits
    are short steps in Python, so that SIGTERM stops them and nothing of torch's is logged while they last."""
    from torch.distributed.constants import default_pg_timeout
    dist = _dist()
    seconds, address, port = join_timeout(), os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    deadline = time.monotonic() + seconds
    serves = own == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
    while not serves:  # a client: the server must answer first (torch's client retries for the whole timeout)
        try:
            socket.create_connection((address, port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise _not_joined([0], size, seconds, f" (nothing answers at {address}:{port})") from None
            time.sleep(0.2)
    store = dist.TCPStore(address, port, size, is_master=serves, timeout=default_pg_timeout, wait_for_workers=False,
                          multi_tenant=True)
    keys = [f"distill/joined/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/{r}" for r in range(size)]
    store.set(keys[own], "1")
    while not store.check(keys):
        if time.monotonic() > deadline:
            raise _not_joined([r for r, key in enumerate(keys) if not store.check([key])], size, seconds)
        time.sleep(0.1)
    return dist.PrefixStore("default_pg", store)  # the keys torch's own rendezvous gives the group


def active() -> bool:
    """Whether this process is in a process group; one that never imported torch.distributed is in none."""
    dist = sys.modules.get("torch.distributed")
    return dist is not None and dist.is_available() and dist.is_initialized()


def rank() -> int:
    return _dist().get_rank() if active() else 0


def world_size() -> int:
    return _dist().get_world_size() if active() else 1


def local_rank() -> int:
    """This process's number on its machine (torchrun's LOCAL_RANK; 0 unset)."""
    return _launch_number("LOCAL_RANK", "a process number on this machine (0 or more)", default="0")


def is_main() -> bool:
    """Rank 0 alone writes checkpoints, logs and outputs, and shows progress."""
    return rank() == 0


def init() -> None:
    """Join the launcher's process group; each process on a GPU machine takes the GPU of its local rank."""
    if not launched() or active():
        return
    check_launch()
    import torch
    if torch.cuda.is_available():
        if local_rank() < torch.cuda.device_count():  # else --device cpu, or `pick_device` refuses the GPU
            torch.cuda.set_device(local_rank())  # so device "cuda" (and --device auto) means this rank's GPU
        backend = "cpu:gloo,cuda:nccl"       # a CPU model on a GPU machine still works
    else:
        backend = "gloo"
    own, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    _dist().init_process_group(backend, store=_joined_store(own, size), rank=own, world_size=size)


def teardown() -> None:
    if active():
        _dist().destroy_process_group()


def barrier() -> None:
    if active():
        _dist().barrier()


def all_gather_objects(obj: Any) -> list:
    """Every rank's `obj` (any picklable value), in rank order, on every rank."""
    if not active():
        return [obj]
    gathered: list = [None] * world_size()
    _dist().all_gather_object(gathered, obj)
    return gathered


def broadcast_object(obj: Any) -> Any:
    """Rank 0's `obj` on every rank: for decisions all ranks must take the same way."""
    if not active():
        return obj
    box = [obj]
    _dist().broadcast_object_list(box, src=0)
    return box[0]


def all_reduce_sum(values: torch.Tensor) -> torch.Tensor:
    """The elementwise sum of every rank's `values` (a new tensor; `values` itself in one process)."""
    if not active():
        return values
    total = values.clone()
    _dist().all_reduce(total)
    return total


# What gloo and NCCL say when a collective loses a process of the run (killed, out of memory, its node gone)
PEER_LOST_MARKERS = ("Connection closed by peer", "Connection reset by peer", "Broken pipe", "remote worker crashing",
                     "ncclRemoteError", "NCCL communicator was aborted")


def lost_peer(err: BaseException) -> str | None:
    """The gist of `err` (its first sentence, without the C++ source location) when it is a collective of a
    launched run failing because another process stopped; None for any other error. Each surviving rank fails
    so at its next collective, and the backend's traceback tells the user nothing the other process's own
    message (if it had time for one) does not."""
    if not launched() or not isinstance(err, RuntimeError):
        return None
    text = str(err).strip()
    if not isinstance(err, _dist().DistError) and not any(marker in text for marker in PEER_LOST_MARKERS):
        return None
    first = re.sub(r"^\[[^\]]*\]\s*", "", text.splitlines()[0] if text else "")  # "[.../pair.cc:553] "
    return first.split(". ")[0].rstrip(".") or type(err).__name__


def shard(items: Sequence) -> Sequence:
    """This rank's strided share of `items` (rank r gets items r, r + world, ...): shares are
    balanced in size and, for length-sorted data, in length."""
    return items if world_size() == 1 else items[rank()::world_size()]


def unshard(shares: Sequence[Sequence]) -> list:
    """Undo `shard`: every rank's share, as gathered in rank order, back in input order."""
    merged: list = [None] * sum(len(s) for s in shares)
    for index, share in enumerate(shares):
        merged[index::len(shares)] = share
    return merged


def batch_share(indices: Sequence[int]) -> tuple[list[int], bool]:
    """This rank's part of a global batch, and whether it counts.

    A rank left without examples (a batch smaller than the world) recomputes one that does not
    count (see `global_batch_part`): DDP needs every rank in every backward pass.
    """
    if world_size() == 1:
        return list(indices), True
    mine = list(indices[rank()::world_size()])
    return mine or list(indices[:1]), bool(mine)


def global_denominators(parts: Sequence[tuple[Sequence[LossSum], bool]]) -> torch.Tensor:
    """Each term's denominator over the whole global batch: summed over this rank's `parts` (its terms of
    each micro-batch of an accumulated step, and whether that share counts) and across all ranks (one
    all-reduce for all terms)."""
    import torch
    return all_reduce_sum(sum(torch.stack([term.denominator for term in terms]) * (1.0 if counted else 0.0)
                              for terms, counted in parts))


def global_batch_terms(terms: Sequence[LossSum], counted: bool = True,
                       denominators: torch.Tensor | None = None) -> list[torch.Tensor]:
    """This rank's part of each term's mean over the whole global batch: its sum on this rank over the
    term's `denominators` (default: `global_denominators` of this batch alone)."""
    weight = 1.0 if counted else 0.0
    if denominators is None:
        denominators = global_denominators([(terms, counted)])
    return [term.scaled(weight).mean(denominator) for term, denominator in zip(terms, denominators)]


def global_batch_part(terms: Sequence[LossSum], counted: bool = True,
                      denominators: torch.Tensor | None = None) -> torch.Tensor:
    """This rank's part of the loss of the whole global batch: each term's sum on this rank over
    the term's denominator summed across all ranks (`global_batch_terms`), or over `denominators`
    summed over the micro-batches of an accumulated step too.

    Whatever a term averages over (examples, scored words, summed class weights, sentences), the
    ranks' (and micro-batches') parts add up to the one-process loss of the batch, so under DDP's
    gradient average the gradient of `world_size()` times the part is the one-process gradient. A
    share that does not count adds nothing to the sums or the denominators.
    """
    return sum(global_batch_terms(terms, counted, denominators))


def wrap_for_training(model: torch.nn.Module) -> torch.nn.Module:
    """The model as the training step should call it: DistributedDataParallel under a launcher,
    which averages gradients across ranks in backward; the model itself otherwise."""
    if not active():
        return model
    import torch
    device = next(model.parameters()).device
    device_ids = [device] if device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
