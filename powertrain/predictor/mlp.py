"""The PowerTrain MLP (paper Table 4) and its training loop.

Why a module of its own: the network, the loop that keeps the best-validation weights
and the fast inference path are the only torch-specific code; everything above them
(scaling, transfer, DataFrames, files) works with plain arrays and state dicts.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Callable, Iterator, Sequence

import numpy as np
import torch
from torch import nn

#: rows per chunk at inference: keeps the 256-wide activations (1 MB) in a core's L2
#: cache (measured 2x faster than one 108k-row matmul on the 2-core reference machine,
#: and 10-15 % faster than 4096 rows when other processes share the caches; same bits)
INFERENCE_CHUNK = 1024


class SignedLinear(nn.Linear):
    """A linear layer whose weights on some inputs have a fixed sign.

    ``signs[j]`` is +1 (weight ``|w|``), -1 (``-|w|``) or 0 (free). With non-negative
    weights after the first layer and increasing activations, the network's output is
    non-decreasing in every +1 input and non-increasing in every -1 input, whatever the
    weights: the monotone contract holds by construction, also after a transfer.
    """

    def __init__(self, n_in: int, n_out: int, signs: Sequence[int]):
        super().__init__(n_in, n_out)
        self.register_buffer("signs", torch.as_tensor(list(signs), dtype=torch.float32))

    signs: torch.Tensor

    def effective_weight(self) -> torch.Tensor:
        return torch.where(self.signs == 0, self.weight, self.signs * self.weight.abs())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x, self.effective_weight(), self.bias)


class ConvexConcaveReLU(nn.Module):
    """ReLU on the first half of the units, its point reflection ``min(x, 0)`` on the
    rest: with non-negative weights, ReLU alone can only build convex functions (no
    saturation, e.g. power flattening at a limit); the concave half restores that."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return torch.cat([x[..., :half].relu(), x[..., half:].clamp_max(0)], dim=-1)


def weight_of(lin: nn.Linear) -> torch.Tensor:
    """The weight a layer multiplies by (sign constraints applied)."""
    return lin.effective_weight() if isinstance(lin, SignedLinear) else lin.weight


class MLP(nn.Module):
    """Dense ReLU network ``n_in -> hidden... -> 1`` with dropout after the first layers.

    ``body`` (every hidden layer) is what transfer learning keeps; ``head`` (the linear
    output layer) is what it replaces. ``monotone`` (one of +1, -1, 0 per input, or None)
    makes the output monotone in the marked inputs by construction (:class:`SignedLinear`
    and :class:`ConvexConcaveReLU`).
    """

    def __init__(
        self,
        n_in: int,
        hidden: Sequence[int] = (256, 128, 64),
        dropout: float = 0.1,
        n_dropout: int = 2,
        monotone: Sequence[int] | None = None,
    ):
        super().__init__()
        signs = tuple(int(m) for m in monotone) if monotone is not None else ()
        self.monotone = signs if any(signs) else None
        layers: list[nn.Module] = []
        width = n_in
        for i, h in enumerate(hidden):
            if self.monotone is None:
                layers += [nn.Linear(width, h), nn.ReLU()]
            else:
                signs = self.monotone if i == 0 else (1,) * width
                layers += [SignedLinear(width, h, signs), ConvexConcaveReLU()]
            if i < n_dropout and dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = h
        self.body = nn.Sequential(*layers)
        self.head = (
            nn.Linear(width, 1) if self.monotone is None else SignedLinear(width, 1, (1,) * width)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x)).squeeze(-1)

    def linears(self) -> list[nn.Linear]:
        return [m for m in self.body if isinstance(m, nn.Linear)] + [self.head]


def init_mlp(net: MLP, generator: torch.Generator) -> None:
    """Seeded PyTorch-default (Kaiming-uniform) initialisation, independent of global RNG.

    A layer whose every weight is non-negative (a monotone network after its first
    layer) draws them from ``U(0, 1/n_in)`` instead: the default's ``|U(-b, b)|`` adds up
    the same-signed, strongly correlated inputs coherently, so the activations' spread
    grew about 3x a layer (output std 10 on standardised targets) and Adam's 200 steps on
    50 rows ended far from a fit (power MAPE 17-20 % against 5-6 % unconstrained,
    MobileNetV3 on the twin, 3 draws; 5.8-8.1 % with this start).
    """
    for lin in net.linears():
        bound = 1.0 / np.sqrt(lin.in_features)
        with torch.no_grad():
            lin.weight.uniform_(-bound, bound, generator=generator)
            lin.bias.uniform_(-bound, bound, generator=generator)
            if isinstance(lin, SignedLinear) and bool((lin.signs > 0).all()):
                lin.weight.uniform_(0.0, 1.0 / lin.in_features, generator=generator)


def _activate(h: torch.Tensor, monotone: bool) -> torch.Tensor:
    if not monotone:
        return h.relu_()
    half = h.shape[1] // 2
    h[:, :half].relu_()
    h[:, half:].clamp_max_(0)
    return h


#: maps a chunk's last hidden activations (rows, width) to one number per row
RowStat = Callable[[torch.Tensor], torch.Tensor]


@torch.inference_mode()
def predict(
    net: MLP, x: np.ndarray | torch.Tensor, pad: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Last hidden activations and output for every row (dropout off).

    Why not ``net(x)``: fixed-size chunks of ``addmm`` + in-place ReLU are ~2x faster on
    CPU, and padding the last chunk to the same shape makes every row take the same GEMM
    code path, so a row's prediction has the same bits whatever it is batched with.
    ``pad=False`` skips the padding for the few rows a transfer evaluates internally
    (padding 50 rows to a full chunk was most of a transfer's time).
    """
    out, feats, _ = _forward(net, x, pad, keep_features=True)
    assert feats is not None
    return feats, out


@torch.inference_mode()
def predict_with(
    net: MLP, x: np.ndarray | torch.Tensor, per_row: RowStat | None = None, pad: bool = True
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Output for every row and, with ``per_row``, a statistic of each row's last hidden
    activations (e.g. the spread's quadratic form), computed chunk by chunk while they
    are in cache instead of from a copy of all of them (28 MB per 108k rows)."""
    out, _, stat = _forward(net, x, pad, keep_features=False, per_row=per_row)
    return out, stat


def _forward(
    net: MLP,
    x: np.ndarray | torch.Tensor,
    pad: bool,
    keep_features: bool,
    per_row: RowStat | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Chunked forward pass into buffers allocated once: output, last hidden activations
    (``keep_features``) and ``per_row`` of them."""
    x = torch.as_tensor(x, dtype=torch.float32)
    x = x if x.ndim == 2 else x.reshape(len(x), -1)
    lins = net.linears()
    weights = [(lin.bias, weight_of(lin).t()) for lin in lins]
    mono = net.monotone is not None
    n = len(x)
    rows_max = INFERENCE_CHUNK if pad else min(n, INFERENCE_CHUNK)
    hidden = [torch.empty(rows_max, lin.out_features) for lin in lins[:-1]]
    head = torch.empty(rows_max, 1)
    padded = torch.zeros(rows_max, x.shape[1])
    out = torch.empty(n)
    feats = torch.empty(n, lins[-1].in_features) if keep_features else None
    stat = torch.empty(n) if per_row is not None else None
    for start in range(0, n, INFERENCE_CHUNK):
        chunk = x[start : start + INFERENCE_CHUNK]
        rows = len(chunk)
        if pad and rows < INFERENCE_CHUNK:
            padded[:rows] = chunk
            chunk = padded
        used = len(chunk)
        h = chunk
        for (bias, wt), buf in zip(weights[:-1], hidden):
            h = _activate(torch.addmm(bias, h, wt, out=buf[:used]), mono)
        torch.addmm(weights[-1][0], h, weights[-1][1], out=head[:used])
        out[start : start + rows] = head[:rows, 0]
        if feats is not None:
            feats[start : start + rows] = h[:rows]
        if per_row is not None and stat is not None:
            stat[start : start + rows] = per_row(h)[:rows]
    return out, feats, stat


@contextlib.contextmanager
def single_threaded() -> Iterator[int]:
    """torch on one intra-op thread inside the block; yields how many it had (what
    the caller may use as worker threads instead). Restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield max(1, threads)
    finally:
        torch.set_num_threads(threads)


LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def train(
    net: MLP,
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_val: np.ndarray | None,
    y_val: np.ndarray | None,
    *,
    loss_fn: LossFn,
    epochs: int,
    lr: float,
    batch_size: int,
    generator: torch.Generator,
    params: list | None = None,
    progress: bool = False,
    desc: str = "training",
) -> dict:
    """Adam on minibatches; keep the weights with the lowest validation loss (paper §3.1).

    Without validation rows the last epoch's weights are kept. ``params`` (parameters or
    Adam parameter groups) restricts what is trained and at which rate.
    Returns the loss history and the best epoch.
    Dropout masks and shuffling draw from ``generator`` so a fit is reproducible without
    touching torch's global RNG.
    """
    xt = torch.as_tensor(x_train, dtype=torch.float32)
    yt = torch.as_tensor(y_train, dtype=torch.float32)
    has_val = x_val is not None and len(x_val) > 0
    if has_val:
        xv = torch.as_tensor(x_val, dtype=torch.float32)
        yv = torch.as_tensor(y_val, dtype=torch.float32)
    trainable = list(net.parameters()) if params is None else params
    opt = torch.optim.Adam(trainable, lr=lr)
    n = len(xt)
    bs = max(1, min(batch_size, n))
    bar = None
    if progress:  # shown on a terminal or in a notebook only, never into a log file
        from ..utils.progress import progress_bar

        bar = progress_bar(total=epochs, desc=desc, leave=False, unit="epoch")
    # minibatches of 32-4k rows are too small to split across threads: the OpenMP hand-off
    # costs more than it saves, and on a busy machine it stalls badly (measured: a 10x
    # slower reference fit with 2 threads beside another job), so train single-threaded
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train_loop(
            net,
            xt,
            yt,
            xv if has_val else None,
            yv if has_val else None,
            loss_fn,
            epochs,
            bs,
            opt,
            generator,
            bar,
            n,
        )
    finally:
        torch.set_num_threads(threads)
        if bar is not None:
            bar.close()


def _train_loop(net, xt, yt, xv, yv, loss_fn, epochs, bs, opt, generator, bar, n) -> dict:
    has_val = xv is not None
    best = (float("inf"), -1, None)
    history: dict[str, list[float]] = {"train": [], "val": []}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
        for epoch in range(epochs):
            net.train()
            order = torch.randperm(n, generator=generator) if bs < n else None
            total = 0.0
            for start in range(0, n, bs):
                if order is None:
                    xb, yb = xt, yt
                else:
                    idx = order[start : start + bs]
                    xb, yb = xt[idx], yt[idx]
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(net(xb), yb)
                loss.backward()
                opt.step()
                total += loss.item() * len(xb)
            history["train"].append(total / n)
            if has_val:
                net.eval()
                with torch.no_grad():
                    val = float(loss_fn(net(xv), yv))
                history["val"].append(val)
                if val < best[0]:
                    best = (val, epoch, copy.deepcopy(net.state_dict()))
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{history['train'][-1]:.4g}")
    net.eval()
    if best[2] is not None:
        net.load_state_dict(best[2])
    return {
        "history": history,
        "best_epoch": best[1] if has_val else epochs - 1,
        "best_val_loss": best[0] if has_val else None,
    }
