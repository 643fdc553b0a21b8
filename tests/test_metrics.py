"""The papers' figures of merit, one definition for the whole package."""

import pytest

from powertrain.metrics import excess_power, mape, time_penalty_pct


def test_mape_divides_by_the_true_values():
    # sklearn order: (y_true, y_pred); 50 -> 100 is a 100 % error, 100 -> 50 a 50 % error
    assert mape([50.0], [100.0]) == pytest.approx(100.0)
    assert mape([100.0], [50.0]) == pytest.approx(50.0)
    with pytest.raises(ValueError, match="shapes differ"):
        mape([1.0, 2.0], [1.0])


def test_time_penalty_and_excess_power():
    assert time_penalty_pct(110.0, 100.0) == pytest.approx(10.0)
    out = excess_power([29.0, 31.5, 30.5], [30.0, 30.0, 30.0])
    assert out["above_limit_pct"] == pytest.approx(200 / 3)
    assert out["above_limit_1w_pct"] == pytest.approx(100 / 3)
    assert out["excess_auc_w"] == pytest.approx((1.5 + 0.5) / 3)
