"""A model behind an HTTP endpoint as the teacher: ``openai:MODEL`` (any OpenAI-compatible ``/chat/completions``:
vLLM, llama.cpp's server, Ollama, ``transformers serve``, hosted APIs) or ``systemone:MODEL`` (the System One
decision endpoint, ``/systemone``, of ``transformers serve``), at ``--base-url``.

Each text is one request of the prompt of `distill.models.prompt`. ``openai:`` asks for one answer token with its
top log-probabilities: a label's score is the log-sum of the probabilities of the listed tokens that begin its
words (a label none of them begins gets the lowest listed one, a bound from above); ``systemone:`` asks a
``choice`` question whose options are the labels and reads their probabilities. Both are calibrated as the causal
teacher is (the content-free input's scores subtracted: one request more). A server that gives no
log-probabilities (``transformers serve``'s chat endpoint ignores the setting) gives hard labels instead: the label
its answer begins with, one-hot, said once in a warning; an answer that names no label gives the uniform
distribution (its confidence, 1 / labels, falls below any ``--min-confidence`` that filters).

The key is read from $DISTILL_API_KEY, else $OPENAI_API_KEY, and only ever sent as the request's bearer token:
no setting, record, cache key or message holds it. At most ``--max-requests`` requests are in flight; the
``openai`` client retries a 408, 409, 429, 5xx, a time-out and a dropped connection `RETRIES` times with
exponential backoff (or the server's Retry-After), and what still fails stops the command with one line.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import torch

from distill import distributed
from distill.errors import DistillError, import_extra, option
from distill.labels import LabelHierarchy
from distill.models.base import LabelModel
from distill.models.prompt import CONTENT_FREE, Prompt, build_prompt, current_settings, prompt_digest

logger = logging.getLogger("distill")

KEY_VARIABLES = ("DISTILL_API_KEY", "OPENAI_API_KEY")
LLM_EXTRA = "pip install 'distill[llm]'"  # the openai client
RETRIES = 5  # the openai client's backoff: 0.5 s doubling to 8 s, or the server's Retry-After
TIMEOUT = 120.0  # seconds a request may take
TOP_LOGPROBS = 20  # the most OpenAI's API lists
HARD = -1e4  # the logit of a label a hard (one-hot) answer excludes: probability 0 at any temperature
CHARS_PER_TOKEN = 4  # for the estimate of prompt tokens shown before a run (the server's tokenizer is unknown)


def api_key() -> str | None:
    """The key from the environment (never from an option, a file or a record), or None: a local server needs none."""
    return next((os.environ[name] for name in KEY_VARIABLES if os.environ.get(name)), None)


def split_source(source: str) -> tuple[str, str]:
    """(``openai`` or ``systemone``, the model's name) of ``openai:MODEL`` or ``systemone:MODEL``."""
    api, _, model = source.partition(":")
    if not model:
        raise DistillError(f"{source}: give the served model's name after {api}:, e.g. {api}:gpt-4o-mini")
    return api, model


def base_url_of(source: str) -> str:
    """--base-url, else $OPENAI_BASE_URL: where the model is served (one line if neither is given)."""
    url = current_settings().base_url or os.environ.get("OPENAI_BASE_URL")
    if not url:
        raise DistillError(f"{source}: a served model needs its endpoint: give "
                           f"{option('--base-url', 'prompt_settings(base_url=...)')} URL (e.g. "
                           "http://127.0.0.1:8000/v1) or set OPENAI_BASE_URL")
    if not url.startswith(("http://", "https://")):
        raise DistillError(f"{url}: the base URL of a served model starts with http:// or https://")
    return url.rstrip("/")


def served_fingerprint(source: str) -> str:
    """The endpoint, the model's name and the prompt, never the key: what keys the logit cache."""
    api, model = split_source(source)
    return _digest(build_prompt(source), api, model, base_url_of(source))


def _digest(prompt: Prompt, api: str, model: str, base_url: str) -> str:
    """What decides a served model's answers: the prompt, and for ``systemone:`` the question it asks instead (the
    template's words before the text, which two templates of one prompt may part differently), the endpoint and the
    model's name."""
    asked = [{"instruction": prompt.instruction}] if api == "systemone" else []
    return prompt_digest(prompt, "served", api, model, base_url, *asked)


def load_served_teacher(source: str) -> "ServedTeacher":
    """The teacher of ``openai:MODEL`` or ``systemone:MODEL`` at the current base URL, asked the current prompt."""
    api, model = split_source(source)
    settings = current_settings()
    if api == "systemone" and settings.shots:
        raise DistillError(f"{source}: a System One question has no place for examples: drop "
                           f"{option('--shots', 'shots')}, or use openai:{model}")
    openai = import_extra("openai", "a served teacher", LLM_EXTRA)
    url = base_url_of(source)
    prompt = build_prompt(source)
    if api == "openai":
        require_distinct_first_words(source, prompt)
    client = openai.OpenAI(base_url=url, api_key=api_key() or "none", max_retries=RETRIES, timeout=TIMEOUT)
    return ServedTeacher(client, api, model, url, prompt, settings.max_requests)


def require_distinct_first_words(source: str, prompt: Prompt) -> None:
    """An ``openai:`` teacher scores a label by the answer tokens that begin its words (`label_logprobs`): two
    labels whose words begin with the same word ("very bad", "very good") get the same score for every text,
    so they are refused in one line before any request."""
    first: dict[str, str] = {}
    for name, words in zip(prompt.names, prompt.verbalizers):
        word = words.split()[0].casefold()
        other = first.setdefault(word, name)
        if other != name:
            raise DistillError(f"{source}: labels {other} and {name} begin with the same word ({word!r}), and an "
                               "openai: teacher scores a label by its answer's first token, which cannot tell them "
                               f"apart: give them distinct first words ({option('--labels', 'prompt_settings(labels=...)')} "
                               "NAME=WORDS,...)")


def label_logprobs(top: Sequence[tuple[str, float]], verbalizers: Sequence[str]) -> list[float]:
    """Each label's log-probability from an answer's first-token alternatives `top` ((token, log-probability)
    pairs): the log-sum of those that begin its words (case and surrounding spaces aside); a label none begins
    gets the lowest listed, which bounds its own from above."""
    words = [verbalizer.strip().casefold() for verbalizer in verbalizers]
    floor = min(logprob for _, logprob in top)
    scores = []
    for word in words:
        found = [logprob for token, logprob in top if token.strip() and word.startswith(token.strip().casefold())]
        scores.append(torch.logsumexp(torch.tensor(found), 0).item() if found else floor)
    return scores


def answered_label(answer: str, verbalizers: Sequence[str]) -> int | None:
    """The label an answer's text begins with (the longest words that fit), or None."""
    text = answer.strip().casefold()
    fits = [(len(word), index) for index, word in enumerate(v.strip().casefold() for v in verbalizers)
            if text.startswith(word)]
    return max(fits)[1] if fits else None


class ServedTeacher(LabelModel):
    """A served model asked `prompt` for each text: label log-probabilities (or hard labels) per text."""

    kind = "teacher"
    task = "classification"
    fixed_precision = True  # the server computes in its own precision, whatever --precision says
    config = None  # no reading settings (max length, windows): the server reads the prompt whole
    tokenizer = None  # nor sub-word embeddings to start a student's from (kd --random-embeddings)

    def __init__(self, client, api: str, model: str, base_url: str, prompt: Prompt, max_requests: int):
        super().__init__()
        self.client, self.api, self.model_name, self.base_url, self.prompt = client, api, model, base_url, prompt
        self.source = f"{api}:{model}"
        self.max_requests = max_requests
        self.hierarchy = LabelHierarchy(list(prompt.names), None)
        self._content_free: torch.Tensor | None = None
        self.hard: bool | None = None  # whether the server gives no log-probabilities (known after a request)
        self._warned_unanswered = False
        self.requests = itertools.count(1)  # next() is atomic: the requests sent so far, from any thread
        self.announced = False  # the whole run's requests said (`announce`)

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def fingerprint(self) -> str:
        return _digest(self.prompt, self.api, self.model_name, self.base_url)

    def where(self) -> str:
        return f"{self.source} at {self.base_url}"

    def cost(self, texts: Sequence[str]) -> tuple[int, int]:
        """(requests, prompt characters) that scoring `texts` sends."""
        return len(texts), sum(len(self.prompt.render(text)) for text in texts)

    def announce(self, requests: int, characters: int, whole_run: bool = False) -> None:
        """Say, before they are sent, how many requests and about how many prompt tokens (4 characters a token)
        go to the server. A command that says it for its whole run up front (`whole_run`: pseudo-label) silences
        the lines of each part that follow."""
        if (self.announced and not whole_run) or not requests or not distributed.is_main():
            return
        first = "" if self._content_free is not None or self.hard else " (and 1 for calibration)"
        logger.warning(f"{self.where()}: {requests:,} requests{first}, about {characters // CHARS_PER_TOKEN:,} prompt "
                       f"tokens, at most {self.max_requests} at once")
        self.announced = whole_run

    def prepare(self, examples: Sequence[str]) -> tuple[dict, None]:
        return {"texts": list(examples)}, None

    def forward(self, texts: Sequence[str]) -> torch.Tensor:
        """(texts, labels) calibrated log-probabilities, or a hard answer's one-hot logits."""
        if self._content_free is None and self.hard is None:
            self._content_free = self._ask(CONTENT_FREE)
            if self.hard and distributed.is_main():
                logger.warning(f"warning: {self.where()} returns no log-probabilities: its labels are the answers "
                               "it gives, one-hot (hard labels), uncalibrated")
        with ThreadPoolExecutor(max_workers=self.max_requests) as pool:
            scores = torch.stack(list(pool.map(self._ask, texts)))
        unanswered = int((scores == 0).all(-1).sum()) if self.hard else 0  # hard answers naming no label: uniform
        if unanswered and not self._warned_unanswered and distributed.is_main():
            self._warned_unanswered = True
            logger.warning(f"warning: {self.where()}: {unanswered} of {len(texts)} answers name no label; such a "
                           f"text gets the uniform distribution (confidence 1/{len(self.prompt.names)})")
        return scores if self.hard else scores - self._content_free

    def _ask(self, text: str) -> torch.Tensor:
        """One request: the label scores of `text`."""
        next(self.requests)
        try:
            if self.api == "systemone":
                return self._decision(text)
            return self._chat(text)
        except DistillError:
            raise
        except Exception as error:  # the openai client's errors, after its retries: one line, the key scrubbed
            raise DistillError(f"{self.where()}: request failed: {self._failure(error)}") from None

    def _chat(self, text: str) -> torch.Tensor:
        response = self.client.chat.completions.create(
            model=self.model_name, messages=[{"role": "user", "content": self.prompt.render(text)}], max_tokens=1,
            temperature=0, logprobs=True, top_logprobs=TOP_LOGPROBS)
        choice = response.choices[0]
        content = getattr(choice.logprobs, "content", None) if choice.logprobs is not None else None
        top = [(item.token, item.logprob) for item in content[0].top_logprobs] if content else []
        self._same_kind(hard=not top)
        if top:
            bad = next((value for _, value in top if not (isinstance(value, (int, float))
                                                           and math.isfinite(value) and value <= 1e-6)), None)
            if bad is not None:
                raise DistillError(f"{self.where()}: its answer gives the log-probability {bad!r}, which no "
                                   "probability has (a finite number <= 0): check the server")
            return torch.tensor(label_logprobs(top, self.prompt.verbalizers))
        chosen = answered_label(choice.message.content or "", self.prompt.verbalizers)
        scores = torch.zeros(len(self.prompt.names))
        if chosen is None:  # no label named: the uniform distribution
            return scores
        scores[:] = HARD
        scores[chosen] = 0.0
        return scores

    def _same_kind(self, hard: bool) -> None:
        """Every answer of a run gives log-probabilities, or none does: mixed, a one-hot answer's -1e4 would be
        taken for a calibration score (or every text's scores for a hard answer's), and labels turn around."""
        if self.hard is not None and self.hard != hard:
            raise DistillError(f"{self.where()}: it gave log-probabilities with some answers and none with others, "
                               "so its answers cannot be scored alike: check the server (or its logprobs setting)")
        self.hard = hard

    def _decision(self, text: str) -> torch.Tensor:
        names = self.prompt.names
        criteria = {name: words.strip() for name, words in zip(names, self.prompt.verbalizers)}
        body = {"model": self.model_name, "state": text,
                "questions": {"label": {"type": "choice", "instructions": self.prompt.instruction,
                                        "criteria": criteria}}}
        answer = self.client.post("/systemone", body=body, cast_to=object)
        try:
            probabilities = answer["answers"]["label"]["probabilities"]
            values = [float(probabilities[name]) for name in names]
        except (KeyError, TypeError, ValueError):
            values = []
        # a probability is a number from 0 to 1, and some label has one above 0 (NaN passed every filter)
        if not values or not all(math.isfinite(value) and -1e-6 <= value <= 1 + 1e-6 for value in values) \
                or max(values) <= 0:
            raise DistillError(f"{self.where()}: its answer is not a System One answer with a probability from 0 to "
                               f"1 per label, some above 0 ({str(answer)[:200]})")
        self.hard = False
        return torch.tensor([math.log(max(value, 1e-30)) for value in values])

    def _failure(self, error: Exception) -> str:
        """Why a request failed after the client's retries, from what it raised, the key scrubbed."""
        status = getattr(error, "status_code", None)
        what = {401: "the server refused the key (401: check $DISTILL_API_KEY or $OPENAI_API_KEY)",
                403: "the server refused the request (403: the key lacks access to this model)",
                404: "the server does not know this model or endpoint (404)",
                429: f"the server kept refusing with 429 (rate limit) through {RETRIES} retries: lower "
                     f"{option('--max-requests', 'max_requests')} or try later"}.get(status)
        if what is None and status is not None and status >= 500:
            what = f"the server kept failing with {status} through {RETRIES} retries"
        if what is None:
            kind = type(error).__name__
            what = {"APIConnectionError": f"the server cannot be reached (connection failed through {RETRIES} "
                                          "retries)",
                    "APITimeoutError": f"no answer within {TIMEOUT:.0f} s through {RETRIES} retries"}.get(
                kind, f"the server answered with an error ({status or kind})")
        detail = " ".join(str(getattr(error, "message", "") or "").split())[:200]
        line = what + (f" ({detail})" if detail and status else "")
        key = api_key()
        return line.replace(key, "***") if key else line

    def write_files(self, directory: Path, **extra) -> None:
        raise DistillError(f"{self.source}: a served model is a teacher given to distill, not a model it saves")
