"""What generation returns: the text and ids of a sequence with its counts, and a batch of them.

Every count is the sequence's own (`GenerationStats`); a batch (`BatchGeneration`, a list of `Generation`) adds
how many batched target passes it took, which is what a batch pays: one pass verifies every row at once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class GenerationStats:
    chars: int = 0  # characters generated
    target_passes: int = 0  # forward calls of the target (the prefill included)
    draft_calls: int = 0  # rounds in which the draft was asked to propose
    drafted: int = 0  # characters the draft proposed (one draft step each)
    accepted: int = 0  # drafted characters the rule kept
    k: int = 0  # characters drafted per full round (0 for target-only generation; the first k if adaptive)
    adaptive: bool = False  # k followed the +2 / -1 schedule
    accepted_per_position: list[int] = field(default_factory=list)  # rounds by accepted count, 0..k (0..k_max)
    tree: str | None = None  # the tree shape (None for chains); then drafted counts tree nodes, k is its depth
    tried_per_depth: list[int] = field(default_factory=list)  # tree rounds whose walk tried children at depth d
    accepted_per_depth: list[int] = field(default_factory=list)  # ... and accepted one of them

    @property
    def acceptance(self) -> float:
        """Accepted / drafted characters (vLLM's and llama.cpp's convention); 0 when nothing was drafted."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def chars_per_pass(self) -> float:
        """Generated characters per target pass: 1 + k * acceptance when every round drafts k."""
        return self.chars / self.target_passes if self.target_passes else 0.0

    @property
    def mean_k(self) -> float:
        """Characters drafted per round that drafted (k itself unless adaptive or the last round was cut)."""
        return self.drafted / self.draft_calls if self.draft_calls else 0.0

    @property
    def depth_acceptance(self) -> list[float]:
        """Per tree depth: rounds that accepted a node there / rounds whose walk tried that depth."""
        return [a / t if t else 0.0 for a, t in zip(self.accepted_per_depth, self.tried_per_depth)]

    def to_dict(self) -> dict:
        return {**asdict(self), "acceptance": self.acceptance, "chars_per_pass": self.chars_per_pass,
                "mean_k": self.mean_k, "depth_acceptance": self.depth_acceptance}


@dataclass
class Generation:
    text: str  # the generated characters only (the prompt excluded)
    stats: GenerationStats
    prompt: str = ""
    ids: tuple[int, ...] = ()  # the generated tokens' ids (a subword text need not re-tokenize to them)



class BatchGeneration(list):
    """A batch's generations, in the order of its prompts (a plain list of `Generation`), and what the batch
    paid as a whole: `passes` batched target passes (each verifies every sequence still generating) and
    `rows` the row-passes summed over them (a sequence that has finished no longer takes part)."""

    def __init__(self, items=(), passes: int = 0, rows: int = 0):
        super().__init__(items)
        self.passes = passes
        self.rows = rows

    @property
    def texts(self) -> list[str]:
        return [g.text for g in self]
