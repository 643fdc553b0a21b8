"""Several fine-tunes of one network trained as one batched network.

Why: a transfer fine-tunes the reference once on every k-fold training split (their
out-of-fold errors choose the model and set the predicted spread) and once on all
samples. Trained one after another that is six small fits, each too small to use the
cores; stacked, every layer is one batched matrix product for all of them, so the
whole set costs about one fit. Full-batch Adam is element-wise and each member's loss
depends only on its own weights, so a member ends where its own sequential fit would
(up to float rounding; ``tests/test_predictor_sklearn.py`` checks it).
"""

from __future__ import annotations

import numpy as np
import torch

from . import mlp


def _stack(net: mlp.MLP, members: int, trainable: str) -> list[dict]:
    layers = []
    lins = net.linears()
    for i, lin in enumerate(lins):
        train = trainable == "all" or i == len(lins) - 1
        w = lin.weight.detach().unsqueeze(0).repeat(members, 1, 1).requires_grad_(train)
        b = lin.bias.detach().unsqueeze(0).repeat(members, 1).requires_grad_(train)
        signs = lin.signs if isinstance(lin, mlp.SignedLinear) else None
        layers.append({"w": w, "b": b, "signs": signs})
    return layers


def _forward(layers: list[dict], x: torch.Tensor, monotone: bool) -> torch.Tensor:
    h = x.unsqueeze(0).expand(layers[0]["w"].shape[0], -1, -1)
    for i, layer in enumerate(layers):
        w, signs = layer["w"], layer["signs"]
        if signs is not None:
            w = torch.where(signs == 0, w, signs * w.abs())
        h = torch.baddbmm(layer["b"].unsqueeze(1), h, w.transpose(1, 2))
        if i < len(layers) - 1:
            if monotone:
                half = h.shape[-1] // 2
                h = torch.cat([h[..., :half].relu(), h[..., half:].clamp_max(0)], dim=-1)
            else:
                h = h.relu()
    return h.squeeze(-1)


def fine_tune(
    net: mlp.MLP,
    xs: np.ndarray,
    z: np.ndarray,
    rows: np.ndarray,
    *,
    loss: str,
    y_mean: np.ndarray,
    y_scale: np.ndarray,
    log_target: bool,
    epochs: int,
    lr: float,
    layers: str = "all",
) -> list[dict[str, torch.Tensor]]:
    """Full-batch fine-tunes of ``net``, one per member, trained together.

    ``xs``: scaled inputs of every row (n, inputs); ``z``: (members, n) each member's
    standardised targets; ``rows``: (members, n) True where a member trains on a row;
    ``y_mean``/``y_scale``: each member's target standardisation (for the MAPE loss).
    Returns each member's state dict for ``net``'s layout (the last epoch's weights).
    """
    n_members = len(z)
    x = torch.as_tensor(xs, dtype=torch.float32)
    zt = torch.as_tensor(z, dtype=torch.float32)
    mask = torch.as_tensor(rows, dtype=torch.float32)
    count = mask.sum(dim=1)
    mean = torch.as_tensor(y_mean, dtype=torch.float32).unsqueeze(1)
    scale = torch.as_tensor(y_scale, dtype=torch.float32).unsqueeze(1)
    stacked = _stack(net, n_members, layers)
    params = [t for layer in stacked for t in (layer["w"], layer["b"]) if t.requires_grad]
    opt = torch.optim.Adam(params, lr=lr, fused=True)  # one kernel per step, not dozens
    monotone = net.monotone is not None
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as mlp.train: small products, and robust beside other jobs
    try:
        for _ in range(epochs):
            opt.zero_grad(set_to_none=True)
            out = _forward(stacked, x, monotone)
            if loss == "mse":
                per_row = (out - zt) ** 2
            else:
                diff = (out - zt) * scale
                if log_target:
                    per_row = torch.expm1(diff).abs()
                else:
                    true = (zt * scale + mean).abs().clamp_min(1e-12)
                    per_row = diff.abs() / true
            ((per_row * mask).sum(dim=1) / count).sum().backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    names = [name for name, _ in _named_linears(net)]
    states = []
    for m in range(n_members):
        state = {k: v.clone() for k, v in net.state_dict().items()}
        for name, layer in zip(names, stacked):
            state[f"{name}.weight"] = layer["w"][m].detach().clone()
            state[f"{name}.bias"] = layer["b"][m].detach().clone()
        states.append(state)
    return states


def _named_linears(net: mlp.MLP) -> list[tuple[str, torch.nn.Linear]]:
    named = [(f"body.{i}", m) for i, m in enumerate(net.body) if isinstance(m, torch.nn.Linear)]
    return named + [("head", net.head)]
