"""The float32 numpy copies the drafts that read the target run on and keep (`head_weights`)."""

import numpy as np
import torch

from specdec.decoding import head_weights


def test_last_state_is_a_float32_copy_of_the_last_row_whatever_the_tensor():
    rows = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    for features in (rows, rows.to(torch.bfloat16), rows.clone().requires_grad_(), rows.double()):
        got = head_weights.last_state(features)
        assert got.dtype == np.float32 and got.tolist() == [8.0, 9.0, 10.0, 11.0]
    # a copy: the target writes the next pass's states into the memory it handed
    view = rows[:2]
    kept = head_weights.last_state(view)
    rows[1] = -1.0
    assert kept.tolist() == [4.0, 5.0, 6.0, 7.0]


def test_numpy32_is_a_float32_copy():
    t = torch.ones(2, 2, dtype=torch.float64)
    got = head_weights.numpy32(t)
    t += 1
    assert got.dtype == np.float32 and got.tolist() == [[1.0, 1.0], [1.0, 1.0]]
