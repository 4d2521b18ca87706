"""Linear-chain conditional random field layer.

We own this implementation because no maintained CRF package is available in
our environment. It is used on top of per-token emission scores (e.g. from a
student or teacher tagger) to model dependencies between adjacent tags.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class ConditionalRandomField(nn.Module):
    """Linear-chain CRF with learned transition, start and end scores.

    Shapes: emissions ``(B, T, K)``, tags ``(B, T)``, mask ``(B, T)`` where the
    mask is a per-sequence prefix mask (True for real tokens). All batch
    operations are vectorised; only the time dimension is looped over, since the
    recursions are inherently sequential.
    """

    def __init__(self, num_tags: int) -> None:
        super().__init__()
        if num_tags <= 0:
            raise ValueError(f"num_tags must be positive, got {num_tags}")
        self.num_tags = num_tags
        # transitions[i, j] is the score of moving from tag i to tag j.
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))
        self.start_transitions = nn.Parameter(torch.empty(num_tags))
        self.end_transitions = nn.Parameter(torch.empty(num_tags))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Small uniform init so no tag transition is favoured at the start."""
        nn.init.uniform_(self.transitions, -0.1, 0.1)
        nn.init.uniform_(self.start_transitions, -0.1, 0.1)
        nn.init.uniform_(self.end_transitions, -0.1, 0.1)

    def extra_repr(self) -> str:
        return f"num_tags={self.num_tags}"

    def _check(self, emissions: Tensor, mask: Tensor, tags: Tensor | None = None) -> Tensor:
        """Validate shapes early: silent broadcasting would give wrong losses."""
        if emissions.dim() != 3 or emissions.size(2) != self.num_tags:
            raise ValueError(
                f"emissions must be (B, T, {self.num_tags}), got {tuple(emissions.shape)}"
            )
        if mask.shape != emissions.shape[:2]:
            raise ValueError(
                f"mask shape {tuple(mask.shape)} does not match emissions {tuple(emissions.shape[:2])}"
            )
        if tags is not None and tags.shape != emissions.shape[:2]:
            raise ValueError(
                f"tags shape {tuple(tags.shape)} does not match emissions {tuple(emissions.shape[:2])}"
            )
        return mask.to(emissions.device, torch.bool)

    def neg_log_likelihood(self, emissions: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        """Mean over the batch of ``log Z - score(gold path)``."""
        return self.sequence_neg_log_likelihood(emissions, tags, mask).mean()

    def sequence_neg_log_likelihood(self, emissions: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        """``log Z - score(gold path)`` of each sequence, shape ``(B,)``.

        Padding positions (mask False) contribute nothing, and their tags may be
        arbitrary (e.g. -100); they are replaced before indexing so that
        gathering never goes out of range. An empty batch gives an empty result
        that still depends on every CRF parameter (DDP needs them all in backward).
        """
        mask = self._check(emissions, mask, tags)
        if emissions.size(1) == 0:
            return emissions.new_zeros(emissions.size(0))
        # Padding emissions may be inf/NaN; neutralise them so 0 * inf never
        # turns into NaN in the forward pass or the gradient.
        emissions = emissions.masked_fill(~mask.unsqueeze(2), 0.0)
        log_z = self._log_partition(emissions, mask)
        gold = self._gold_score(emissions, tags, mask)
        return log_z - gold

    def forward(self, emissions: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        """Alias of :meth:`neg_log_likelihood` so the module is callable as a loss."""
        return self.neg_log_likelihood(emissions, tags, mask)

    def _gold_score(self, emissions: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        """Unnormalised score of the given tag sequence, shape ``(B,)``."""
        seq_len = emissions.size(1)
        # Padding tags may be garbage; map them to 0 and zero out their terms.
        safe_tags = torch.where(mask, tags, torch.zeros_like(tags)).long()
        safe_tags = safe_tags.clamp(0, self.num_tags - 1)
        maskf = mask.to(emissions.dtype)

        emit = emissions.gather(2, safe_tags.unsqueeze(2)).squeeze(2)  # (B, T)
        score = (emit * maskf).sum(dim=1)
        score = score + self.start_transitions[safe_tags[:, 0]] * maskf[:, 0]
        if seq_len > 1:
            trans = self.transitions[safe_tags[:, :-1], safe_tags[:, 1:]]  # (B, T-1)
            # A transition into position t is real only if position t is real.
            score = score + (trans * maskf[:, 1:]).sum(dim=1)

        # End transition from each sequence's own last real position.
        lengths = mask.long().sum(dim=1)
        last_idx = (lengths - 1).clamp(min=0)
        last_tags = safe_tags.gather(1, last_idx.unsqueeze(1)).squeeze(1)
        score = score + self.end_transitions[last_tags] * (lengths > 0).to(emissions.dtype)
        return score

    def _log_partition(self, emissions: Tensor, mask: Tensor) -> Tensor:
        """Forward algorithm in log space, shape ``(B,)``.

        Finished sequences keep their alpha frozen (via ``torch.where``), so
        adding the end transitions once at the end applies them at each
        sequence's own last real position.
        """
        seq_len = emissions.size(1)
        alpha = self.start_transitions.unsqueeze(0) + emissions[:, 0]  # (B, K)
        trans = self.transitions.unsqueeze(0)  # (1, K_from, K_to)
        for t in range(1, seq_len):
            # (B, K_from, 1) + (1, K_from, K_to) + (B, 1, K_to)
            nxt = torch.logsumexp(
                alpha.unsqueeze(2) + trans + emissions[:, t].unsqueeze(1), dim=1
            )
            alpha = torch.where(mask[:, t].unsqueeze(1), nxt, alpha)
        log_z = torch.logsumexp(alpha + self.end_transitions.unsqueeze(0), dim=1)
        # Empty sequences have no paths to normalise; define their loss as 0.
        return torch.where(mask[:, 0], log_z, torch.zeros_like(log_z))

    def marginals(self, emissions: Tensor, mask: Tensor) -> Tensor:
        """Per-position tag marginals ``p(tag_t = k | sentence)``, shape ``(B, T, K)``.

        The partial derivative of ``log Z`` with respect to the emission score of tag k at
        position t is the total probability of the paths through (t, k), i.e. that marginal; so
        autograd over the forward algorithm gives the forward-backward result without a separate
        backward recursion. Each real position's row sums to 1; padding positions (mask False)
        and empty sequences are 0. Works under ``no_grad`` and ``inference_mode`` (the result is
        a plain tensor, detached from the CRF's parameters and from ``emissions``).
        """
        mask = self._check(emissions, mask)
        if emissions.size(1) == 0:
            return torch.zeros(emissions.shape, dtype=emissions.dtype, device=emissions.device)
        with torch.inference_mode(False), torch.enable_grad():
            # A fresh leaf outside inference mode: inference tensors cannot enter autograd.
            # Padding emissions may be inf/NaN, neutralised as in the NLL.
            leaf = emissions.detach().clone().masked_fill(~mask.unsqueeze(2), 0.0).requires_grad_(True)
            log_z = self._log_partition(leaf, mask.clone())
            (grad,) = torch.autograd.grad(log_z.sum(), leaf)
        return grad.detach()

    @torch.no_grad()
    def decode(self, emissions: Tensor, mask: Tensor) -> list[list[int]]:
        """Viterbi best tag path per sequence, truncated to its real length."""
        mask = self._check(emissions, mask)
        batch, seq_len, _ = emissions.shape
        lengths = mask.long().sum(dim=1).tolist()
        if seq_len == 0:
            return [[] for _ in range(batch)]
        emissions = emissions.masked_fill(~mask.unsqueeze(2), 0.0)
        # On the emissions' device: inference gathers a GPU model's logits on the CPU before it decodes them.
        start, trans, end = (p.to(emissions.device) for p in (self.start_transitions, self.transitions,
                                                             self.end_transitions))
        score = start.unsqueeze(0) + emissions[:, 0]  # (B, K)
        trans = trans.unsqueeze(0)
        backpointers: list[Tensor] = []
        for t in range(1, seq_len):
            cand = score.unsqueeze(2) + trans  # (B, K_from, K_to)
            best_prev, idx = cand.max(dim=1)
            nxt = best_prev + emissions[:, t]
            step_mask = mask[:, t].unsqueeze(1)
            score = torch.where(step_mask, nxt, score)
            backpointers.append(idx)
        score = score + end.unsqueeze(0)

        # Backtrack for the whole batch at once. Past a sequence's end the
        # current tag is held fixed, so it is still its best final tag when the
        # walk reaches that sequence's last real position.
        cur = score.argmax(dim=1)  # (B,)
        best = torch.empty(batch, seq_len, dtype=torch.long, device=emissions.device)
        best[:, seq_len - 1] = cur
        for t in range(seq_len - 1, 0, -1):
            prev = backpointers[t - 1].gather(1, cur.unsqueeze(1)).squeeze(1)
            cur = torch.where(mask[:, t], prev, cur)
            best[:, t - 1] = cur

        rows = best.tolist()
        return [row[:length] for row, length in zip(rows, lengths)]
