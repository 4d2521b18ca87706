"""Teachers asked a prompt (a causal language model's folder, a served model): what decides their scores, for a
run's record of its inputs, without loading either."""

from __future__ import annotations

from pathlib import Path


def prompted_fingerprint(source: str | Path) -> str | None:
    """For a run's record of its inputs (`distill.provenance.input_fingerprints`): the fingerprint of the
    language-model teacher `source` names, its prompt included, as it keys the logit cache; None for any other
    teacher."""
    from distill.models.prompt import is_served
    if is_served(source):
        from distill.models.served import served_fingerprint
        return served_fingerprint(str(source))
    from distill.models.causal_lm import causal_lm_fingerprint, is_causal_lm_source
    if is_causal_lm_source(source):
        return causal_lm_fingerprint(source)
    return None


def examples_file(source: str | Path) -> str | None:
    """The labelled file whose texts the prompt of the language-model teacher `source` shows as its few-shot
    examples (the current `prompt_settings`: --shots-from with --shots N), scored on which it reads better than
    it is (`distill.provenance.learnt_from`); None for any other teacher, or a prompt without examples."""
    from distill.models.prompt import current_settings, is_served
    settings = current_settings()
    if not settings.shots or not settings.shots_from:
        return None
    from distill.models.causal_lm import is_causal_lm_source
    return settings.shots_from if is_served(source) or is_causal_lm_source(source) else None
