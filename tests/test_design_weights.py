"""``fit/predict.design(weights=)`` refuses weights that are not one number in [0, 1] a candidate in one
line that names the Python argument, the bad value and what is allowed (review of 2026-12-05: "bad
value for weights: 3 of them (allowed: one in [0, 1] a candidate, 12)" named neither the argument nor
which value was bad)."""

import numpy as np
import pytest

from depthwidth.core.errors import BadInput
from depthwidth.fit.laws import get_law
from depthwidth.fit.predict import design, parse_target
from depthwidth.fit.prior import prior

ALLOWED = "(allowed: one number in [0, 1] per candidate, 12 of them: the weight the fit gives its loss)"


@pytest.mark.parametrize(
    "weights, said",
    [
        (np.ones(3), "3 weights for 12 candidates"),
        (np.ones((2, 6)), "an array of shape (2, 6) for 12 candidates"),
        ([1.0] * 4 + [1.5] + [1.0] * 7, "weights[4] = 1.5"),
        ([1.0] * 11 + [-0.25], "weights[11] = -0.25"),
        ([float("nan")] + [1.0] * 11, "weights[0] = nan"),
        ([1.0, "a"] + [1.0] * 10, "weights[1] = 'a' (not a number)"),
    ],
)
def test_bad_design_weights_are_one_line_naming_the_argument_and_the_value(weights, said):
    law = get_law("chinchilla")
    ens = prior(law, "published")
    rows = [{"params": float(p), "tokens": float(20 * p)} for p in np.geomspace(1e7, 1e9, 12)]
    with pytest.raises(BadInput) as e:
        design(ens, parse_target("alpha", law), rows, np.ones(12), k=2, weights=weights)
    msg = str(e.value)
    assert msg == f"bad value for design(weights=): {said} {ALLOWED}", msg
    assert "\n" not in msg
