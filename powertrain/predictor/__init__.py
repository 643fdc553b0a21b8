"""Time and power prediction in every power mode (PowerTrain, FGCS 2024, §3).

``Predictor`` is what users hold; ``PowerTrainMLP`` is one head as a scikit-learn
estimator; ``baselines`` holds what the benchmarks compare against.
"""

from __future__ import annotations

from .checks import MIN_SAMPLES, CrossDeviceWarning, ExtrapolationWarning
from .estimator import PowerTrainMLP
from .model_io import pretrained_names
from .predictor import TARGETS, Predictor

__all__ = [
    "MIN_SAMPLES",
    "TARGETS",
    "CrossDeviceWarning",
    "ExtrapolationWarning",
    "PowerTrainMLP",
    "Predictor",
    "pretrained_names",
]
