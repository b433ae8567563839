"""The per-round counts of transformers' assisted generation, read from its own candidate generator.

`observe_rounds(model, counts)` is a context manager around one `model.generate(...)` call. It gives the model
*instance* (never its class or a module) a `_get_candidate_generator` that calls the class's own and wraps two
methods on the generator it returns:

- `get_candidates(input_ids, ...)` returns the candidate sequence; drafted this round = its length minus
  input_ids' length (0 when the draft proposed nothing);
- `update_candidate_strategy(input_ids, scores, num_matches)` is called once per round after the target's
  verify pass, with the accepted count (already cut to the tokens the round may emit).

A forward hook on the model counts target passes. On exit the hook is removed and the instance attribute
deleted, so the class's method is what every later call sees. See `hf_assisted` for why this hook and how its
counts are checked.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from specdec.engines.base import Spec


class HookError(RuntimeError):
    """The counts seen through the hook do not add up: the installed transformers runs its loop differently
    from the release the hook was written against. A bug to report, not bad input."""


@dataclass
class RoundCounts:
    """What one generate call did, round by round."""

    k: int
    rounds: int = 0  # verify passes seen by update_candidate_strategy
    drafted: int = 0
    accepted: int = 0
    passes: int = 0  # target forward passes (prefill included)
    per_position: list[int] = field(default_factory=list)  # drafting rounds by accepted count 0..k
    _pending: int | None = None  # drafted in the round whose verify pass has not been settled yet

    def __post_init__(self) -> None:
        self.per_position = [0] * (self.k + 1)

    def drafted_round(self, n: int) -> None:
        self._pending = n

    def settled_round(self, n_matches: int) -> None:
        if self._pending is None:
            raise HookError("update_candidate_strategy was called without get_candidates before it")
        drafted, self._pending = self._pending, None
        if not 0 <= n_matches <= drafted <= self.k:
            raise HookError(f"a round drafted {drafted} and accepted {n_matches} with k={self.k}")
        self.rounds += 1
        self.drafted += drafted
        self.accepted += n_matches
        if drafted:  # a round that drafted nothing is a plain step, as in specdec's own loop
            self.per_position[n_matches] += 1

    def check(self, emitted: int, spec: Spec) -> None:
        """Each round emits its accepted tokens plus one, in one target pass: anything else means the hook
        did not see the loop it was written for."""
        if self.rounds == 0 or self.accepted + self.rounds != emitted or self.passes != self.rounds:
            import transformers

            raise HookError(
                f"transformers {transformers.__version__} with draft {spec.draft!r}: the candidate-generator hook "
                f"saw {self.rounds} rounds, {self.accepted} accepted and {self.passes} target passes for "
                f"{emitted} tokens; the counts do not add up (each round must emit accepted + 1 in one pass)")


@contextlib.contextmanager
def observe_rounds(model, counts: RoundCounts, speculative: bool = True):
    """Count `model`'s forward passes, and (speculative) each round of its candidate generator, into counts."""

    def count_pass(_module, _args, _output):
        counts.passes += 1

    handle = model.register_forward_hook(count_pass)
    if speculative:
        make = type(model)._get_candidate_generator

        def observed_generator(*args, **kwargs):
            generator = make(model, *args, **kwargs)
            _wrap(generator, counts)
            return generator

        model._get_candidate_generator = observed_generator
    try:
        yield counts
    finally:
        handle.remove()
        if speculative:
            del model._get_candidate_generator


def _wrap(generator, counts: RoundCounts) -> None:
    """Wrap the two per-round methods on this generator instance (it lives for one generate call)."""
    get_candidates = generator.get_candidates
    update = generator.update_candidate_strategy

    def observed_get_candidates(input_ids, *args, **kwargs):
        candidate_ids, candidate_logits = get_candidates(input_ids, *args, **kwargs)
        counts.drafted_round(int(candidate_ids.shape[-1]) - int(input_ids.shape[-1]))
        return candidate_ids, candidate_logits

    def observed_update(input_ids, scores, num_matches):
        counts.settled_round(int(num_matches))
        return update(input_ids, scores, num_matches)

    generator.get_candidates = observed_get_candidates
    generator.update_candidate_strategy = observed_update
