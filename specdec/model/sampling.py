"""Turning logits into distributions, and sampling from them (the accept/reject rule is `decoding.rule`).

Everything here works on small numpy vectors (the vocabulary has 84 characters): at this size a numpy call
costs about a microsecond against several for a torch op, and the rule runs once per round, so it is part of
what the generation loop pays. All randomness comes from the caller's `numpy.random.Generator`, which makes
every generation reproducible from its seed.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from specdec.util.errors import InputError


# The smallest positive temperature: logits / T must stay finite in float64 for any float32 logit (at most
# 3.4e38 in size), and 3.4e38 / 1e-30 is far below float64's 1.8e308. A far smaller one (1e-320, a subnormal)
# overflows the division to inf and the distribution to NaN; any temperature that small is greedy in effect.
MIN_TEMPERATURE = 1e-30


def check_temperature(temperature: float) -> float:
    """temperature itself when it is 0 (greedy) or a finite number >= MIN_TEMPERATURE; else a one-line
    InputError naming it and the allowed values."""
    if not (temperature == 0 or MIN_TEMPERATURE <= temperature < math.inf):  # NaN fails every comparison
        raise InputError(f"temperature must be 0 or a finite number >= {MIN_TEMPERATURE:g}, got {temperature}")
    return temperature


def probs(logits: torch.Tensor, temperature: float) -> np.ndarray:
    """Distributions (..., V) as float64 numpy from logits (..., V); temperature 0 gives the one-hot argmax.

    The same function serves target and draft, so temperature is applied to p and q identically. It runs once
    per target pass, so it is written as few calls as it can be (a step costs the pass plus this):
    a CPU tensor is read as numpy without a copy (no torch conversion op), widened to float64 by numpy (the
    rule compares and subtracts probabilities: double keeps p - q exact enough), and the reductions are the
    ufuncs' own (`x.max()` goes through a Python wrapper first). Values are identical to the plain formula.
    """
    check_temperature(temperature)
    if isinstance(logits, torch.Tensor):
        x = logits.detach()
        x = (x.numpy() if x.device.type == "cpu" else x.cpu().numpy()).astype(np.float64)
    else:
        x = np.array(logits, dtype=np.float64)  # a copy: the steps below work in place
    if temperature == 0:
        out = np.zeros(x.shape, dtype=np.float64)
        np.put_along_axis(out, x.argmax(-1)[..., None], 1.0, axis=-1)
        return out
    if temperature != 1:
        x /= temperature
    x -= np.maximum.reduce(x, axis=-1, keepdims=True)
    np.exp(x, out=x)
    x /= np.add.reduce(x, axis=-1, keepdims=True)
    return x


def temper(p: np.ndarray, temperature: float) -> np.ndarray:
    """Apply temperature to a distribution given as probabilities (p^(1/T) renormalised; T=0 is argmax)."""
    if temperature == 1:
        return p
    with np.errstate(divide="ignore"):
        return probs(np.log(p), temperature)


def sample(p: np.ndarray, rng: np.random.Generator) -> int:
    """One index drawn from the (not necessarily normalised) non-negative vector p by inverse CDF."""
    return pick(p, rng.random())


def pick(p: np.ndarray, u: float) -> int:
    """The index where u in [0, 1) falls on p's cumulative sum: the number of partial sums <= u * total.

    One uniform per sample, whoever computes it: the onnx backend's fused step (`backend_onnx`) does the same
    search inside its graph, so a seed draws the same characters on every backend.
    """
    return pick_summed(p.cumsum(), u)  # the method, not np.cumsum: that adds a Python wrapper per call


def pick_summed(c: np.ndarray, u: float) -> int:
    """`pick` on p's cumulative sums `c`, for a caller that keeps them (a table draft sums each row once)."""
    i = int(c.searchsorted(u * c[-1], side="right"))  # the method, not np.searchsorted (a wrapper per call)
    return min(i, len(c) - 1)  # u * c[-1] can round up to c[-1] itself
