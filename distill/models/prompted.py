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
