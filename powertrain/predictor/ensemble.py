"""Several fine-tunes of one network trained as one batched network.

Why: a transfer fine-tunes the reference once on every k-fold training split (their
out-of-fold errors choose the model and set the predicted spread) and once on all
samples. Trained one after another that is six small fits, each too small to use the
cores; stacked, every layer is one batched matrix product for all of them, so the
whole set costs about one fit. Full-batch Adam is element-wise and each member's loss
depends only on its own weights, so a member ends where its own sequential fit would
(up to float rounding; ``tests/test_predictor_sklearn.py`` checks it).

Why the gradients are written out instead of left to autograd: the products are small
(tens of rows), so a step's time went to everything around them -- a fresh tensor for
every intermediate (each a page-faulted allocation), ``torch.where`` and ``sgn`` for the
sign-constrained weights, one Adam kernel per parameter. Here every buffer is allocated
once, every element-wise step is in place, and fused Adam runs over one flat buffer: the
monotone network's fine-tune went from about 2x the unconstrained one's time to the same.
"""

from __future__ import annotations

import numpy as np
import torch

from . import mlp


class _Layer:
    """One linear layer of every member: raw weights (views into the flat parameter
    buffer), the weights it multiplies by (sign constraints applied), its activations
    and gradients, and every view of them a step uses (set up once, not per step)."""

    def __init__(self, lin, inputs: torch.Tensor, params, grads, offset: int, train: bool):
        members, rows, inp = inputs.shape
        out = lin.out_features
        size = members * out * inp
        self.v = params[offset : offset + size].view(members, out, inp)
        self.gv = grads[offset : offset + size].view(members, out, inp)
        self.b = params[offset + size : offset + size + members * out].view(members, out)
        self.gb = grads[offset + size : offset + size + members * out].view(members, out)
        self.end = offset + size + members * out
        self.v.copy_(lin.weight.detach().expand(members, -1, -1))
        self.b.copy_(lin.bias.detach().expand(members, -1))
        self.train = train
        signs = lin.signs if isinstance(lin, mlp.SignedLinear) else torch.zeros(inp)
        self.signs = signs.view(1, 1, inp)
        self.free = (signs == 0).float().view(1, 1, inp)
        self.mode = "free"
        if bool((signs != 0).any()):
            self.mode = "abs" if bool((signs == 1).all()) else "signed"
        free = self.mode == "free"
        self.w = self.v if free else torch.empty_like(self.v)  # free: no copy
        self.dw = torch.empty(0) if free else torch.empty_like(self.v)  # d(w used) / d(raw w)
        self.narrow = inp < out  # the first layer: few inputs, many units
        self.grad_w = torch.empty(0) if free else torch.empty_like(self.v)
        self.grad_t = torch.empty(members, inp, out) if self.narrow else torch.empty(0)
        self.inputs, self.inputs_t = inputs, inputs.transpose(1, 2)
        self.h = torch.empty(members, rows, out)  # activations (pre-activations of the head)
        self.mask = torch.empty(members, rows, out)  # 1 where they pass, else 0
        self.g = torch.empty(members, rows, out)  # d(loss) / d(pre-activations)
        self.g_t = self.g.transpose(1, 2)
        self.b_rows, self.w_t = self.b.unsqueeze(1), self.w.transpose(1, 2)
        self.weights_fresh = False

    def refresh_weights(self) -> None:
        """The weights used (and their derivative by the raw ones) from the raw weights."""
        if self.mode == "free" or (self.weights_fresh and not self.train):
            return
        torch.abs(self.v, out=self.w)
        if self.mode == "signed":  # free * v + signs * |v|
            self.w.mul_(self.signs).addcmul_(self.v, self.free)
        if self.train:
            torch.sign(self.v, out=self.dw)
            if self.mode == "signed":  # free + signs * sign(v)
                self.dw.mul_(self.signs).add_(self.free)
        self.weights_fresh = True

    def weight_grad(self) -> None:
        """Gradients of the raw weights and biases from the output gradient ``g``."""
        free = self.mode == "free"
        if self.narrow:  # inputs^T g: a (5, 256) product runs 5x faster than g^T inputs
            torch.bmm(self.inputs_t, self.g, out=self.grad_t)
            grad_w = self.grad_t.transpose(1, 2)
        else:
            grad_w = torch.bmm(self.g_t, self.inputs, out=self.gv if free else self.grad_w)
        if not free:
            torch.mul(grad_w, self.dw, out=self.gv)
        elif self.narrow:
            self.gv.copy_(grad_w)
        torch.sum(self.g, dim=1, out=self.gb)


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
    members, n = z.shape
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as mlp.train: small products, and robust beside other jobs
    try:
        with torch.no_grad():
            stack = _train(net, xs, z, rows, loss, y_mean, y_scale, log_target, epochs, lr, layers)
    finally:
        torch.set_num_threads(threads)
    names = [name for name, _ in _named_linears(net)]
    states = []
    for m in range(members):
        state = {k: v.clone() for k, v in net.state_dict().items()}
        for name, layer in zip(names, stack):
            state[f"{name}.weight"] = layer.v[m].clone()
            state[f"{name}.bias"] = layer.b[m].clone()
        states.append(state)
    return states


def _train(
    net: mlp.MLP,
    xs: np.ndarray,
    z: np.ndarray,
    rows: np.ndarray,
    loss: str,
    y_mean: np.ndarray,
    y_scale: np.ndarray,
    log_target: bool,
    epochs: int,
    lr: float,
    layers: str,
) -> list[_Layer]:
    """The members' layers after ``epochs`` full-batch Adam steps (gradients by hand)."""
    members, n = z.shape
    lins = net.linears()
    total = sum(m.weight.numel() + m.bias.numel() for m in lins) * members
    params, grads = torch.empty(total), torch.zeros(total)
    x = torch.as_tensor(xs, dtype=torch.float32).expand(members, -1, -1).contiguous()
    stack: list[_Layer] = []
    offset, inputs = 0, x
    for i, lin in enumerate(lins):
        train = layers == "all" or i == len(lins) - 1
        stack.append(_Layer(lin, inputs, params, grads, offset, train))
        offset, inputs = stack[-1].end, stack[-1].h
    first = next(i for i, layer in enumerate(stack) if layer.train)
    start = stack[first - 1].end if first else 0  # the trained parameters: a suffix
    trained = params[start:]  # Adam over every trained parameter at once: one tensor
    trained.grad = grads[start:]
    opt = torch.optim.Adam([trained], lr=lr, fused=True)

    zt = torch.as_tensor(z, dtype=torch.float32)
    mask = torch.as_tensor(rows, dtype=torch.float32)
    weight = mask / mask.sum(dim=1, keepdim=True)  # each member: the mean over its rows
    scale = torch.as_tensor(y_scale, dtype=torch.float32).unsqueeze(1)
    mean = torch.as_tensor(y_mean, dtype=torch.float32).unsqueeze(1)
    if loss == "mse":
        weight = 2 * weight
    else:
        weight = weight * scale
        if not log_target:
            weight = weight / (zt * scale + mean).abs().clamp_min(1e-12)
    # monotone nets: ReLU on the first half of each hidden layer, min(x, 0) on the rest
    concave: list[torch.Tensor | None] = []
    for layer in stack[:-1]:
        width = layer.h.shape[-1]
        c = torch.zeros(1, 1, width)
        if net.monotone is not None:
            c[..., width // 2 :] = 1.0
        concave.append(c if bool(c.any()) else None)
    out, err, sign = stack[-1].h.squeeze(-1), stack[-1].g.squeeze(-1), torch.empty(members, n)

    for _ in range(epochs):
        for i, layer in enumerate(stack):
            layer.refresh_weights()
            torch.baddbmm(layer.b_rows, layer.inputs, layer.w_t, out=layer.h)
            if i < len(concave):  # float masks: a bool one is converted at every use
                torch.gt(layer.h, 0, out=layer.mask)
                half = concave[i]
                if half is not None:  # the concave half passes x <= 0: |mask - 1|
                    layer.mask.sub_(half).abs_()
                layer.h.mul_(layer.mask)
        # d(loss)/d(output), each member's mean over its own rows
        torch.sub(out, zt, out=err)
        if loss == "mse":
            err.mul_(weight)
        else:  # d|expm1(diff)| = sign(diff) exp(diff); d|diff| = sign(diff)
            err.mul_(scale)
            torch.sign(err, out=sign)
            if log_target:
                sign.mul_(err.exp_())
            err.copy_(sign.mul_(weight))
        for i in range(len(stack) - 1, first - 1, -1):
            layer = stack[i]
            layer.weight_grad()
            if i > first:
                below = stack[i - 1]
                torch.bmm(layer.g, layer.w, out=below.g).mul_(below.mask)
        opt.step()
    return stack


@torch.inference_mode()
def predict(net: mlp.MLP, states: list[dict[str, torch.Tensor]], xs: np.ndarray) -> np.ndarray:
    """Each member's standardised output on every row of ``xs``: (members, n), in one
    batched pass (what the k-fold errors need from every fold's fine-tune at once)."""
    x = torch.as_tensor(xs, dtype=torch.float32).expand(len(states), -1, -1)
    lins = _named_linears(net)
    h = x
    for i, (name, lin) in enumerate(lins):
        w = torch.stack([s[f"{name}.weight"] for s in states])
        b = torch.stack([s[f"{name}.bias"] for s in states])
        if isinstance(lin, mlp.SignedLinear):
            w = torch.where(lin.signs == 0, w, lin.signs * w.abs())
        h = torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2))
        if i < len(lins) - 1:
            if net.monotone is None:
                h = h.relu()
            else:
                half = h.shape[-1] // 2
                h = torch.cat([h[..., :half].relu(), h[..., half:].clamp_max(0)], dim=-1)
    return h.squeeze(-1).numpy().astype(np.float64)


def _named_linears(net: mlp.MLP) -> list[tuple[str, torch.nn.Linear]]:
    named = [(f"body.{i}", m) for i, m in enumerate(net.body) if isinstance(m, torch.nn.Linear)]
    return named + [("head", net.head)]
