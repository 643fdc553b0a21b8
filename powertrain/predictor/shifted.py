"""The reference network at a new device's clocks: each varied input mapped by its own
scale and shift, fitted on the samples, before the frozen network sees it.

Why: a Jetson the reference never saw is, to a first approximation, the reference's
device with each clock domain faster or slower. Time goes as 1/f per domain, so a CPU k
times faster looks like the reference at k times the CPU clock: a shift of that log
input. Shifting the inputs moves where the network's CPU-, GPU- and memory-bound regions
meet, which a linear correction of its output cannot do, and with two numbers per knob
it carries to modes the samples did not cover. The transferred time model was biased
slow at the low-power end of new devices (issue 40, ``docs/method-notes.md``); this is
the lever that answered it.

The map is folded into a copy of the network's first layer and the output's affine
into its target mean and scale, so a model file stores an ordinary network and two
numbers (no new format).
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from .mlp import MLP

#: ridge strength pulling the map towards the identity (squared scales and shifts, in
#: scaled-input units, and the output's affine). Chosen on the tuning devices (Orin Nano,
#: Nano, TX2 NX; saved decision histories, docs/method-notes.md): 1e-3 followed the
#: samples too closely, 1e-1 left most of the bias. A choice on the tuning set, not a fit.
PENALTY = 1e-2
#: L-BFGS iterations: the map has two numbers per input, so it settles in tens
MAX_ITER = 20


def fit(
    net: MLP, xs: np.ndarray, t: np.ndarray, y_mean: float, y_scale: float
) -> tuple[MLP, float, float]:
    """A copy of ``net`` whose first layer reads each varied input of ``xs`` (scaled,
    as the network reads them) through a fitted ``x * (1 + a) + b``, and the target mean
    and scale (transformed units) that map its output onto ``t``.

    Inputs constant in ``xs`` (batch size, a device's spec figures) are left alone: a
    shift of them cannot be told from the output's offset. A network with monotone
    inputs is returned unchanged, since its signed first layer cannot absorb a map.
    """
    if net.monotone is not None:
        return net, y_mean, y_scale
    x = torch.as_tensor(xs, dtype=torch.float32)
    target = torch.as_tensor(t, dtype=torch.float32)
    free = torch.as_tensor(np.ptp(xs, axis=0) > 0, dtype=torch.float32)
    a = torch.zeros(x.shape[1], requires_grad=True)
    b = torch.zeros(x.shape[1], requires_grad=True)
    c = torch.zeros(2, requires_grad=True)
    frozen = copy.deepcopy(net).eval()
    for p in frozen.parameters():
        p.requires_grad_(False)

    def loss() -> torch.Tensor:
        z = frozen(x * (1 + a * free) + b * free).reshape(-1)
        pred = (z * y_scale + y_mean) * (1 + c[0]) + c[1]
        reg = (a * free).square().sum() + (b * free).square().sum() + c.square().sum()
        return (pred - target).square().mean() + PENALTY * reg

    opt = torch.optim.LBFGS([a, b, c], max_iter=MAX_ITER, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        value = loss()
        value.backward()
        return value

    with torch.enable_grad():
        opt.step(closure)
    scale, shift = (1 + a * free).detach(), (b * free).detach()
    first = frozen.linears()[0]
    with torch.no_grad():  # W (x s + b) + c = (W diag(s)) x + (W b + c)
        first.bias.add_(first.weight @ shift)
        first.weight.mul_(scale)
    gain, offset = 1 + float(c[0].detach()), float(c[1].detach())
    return frozen, y_mean * gain + offset, y_scale * gain
