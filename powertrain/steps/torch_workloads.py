"""Ready-made training steps for the examples: ResNet-18 and MobileNetV3 on synthetic images.

Why: time and power do not depend on the data's values, only on its shape (second
paper, §4.1), so synthetic tensors profile exactly like ImageNet would, with nothing to
download. The models are written in plain torch (torchvision is not a dependency) and
follow the published layer layouts; ``width`` shrinks them for fast CPU tests.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .model_step import ModelStep
from .step import TrainingStep


class _Basic(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
            nn.BatchNorm2d(cout),
        )
        self.skip = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.skip(x))


def resnet18(num_classes: int = 1000, width: int = 64) -> nn.Module:
    """ResNet-18 (He et al.): stem, 4 stages of 2 basic blocks, widths w, 2w, 4w, 8w."""
    layers: list[nn.Module] = [
        nn.Conv2d(3, width, 7, 2, 3, bias=False),
        nn.BatchNorm2d(width),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
    ]
    cin = width
    for i, cout in enumerate((width, 2 * width, 4 * width, 8 * width)):
        layers += [_Basic(cin, cout, 1 if i == 0 else 2), _Basic(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    return nn.Sequential(*layers)


class _SE(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        mid = max(8, c // 4)
        self.f = nn.Sequential(
            nn.AdaptiveAvgPool2d(1),
            nn.Conv2d(c, mid, 1),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, c, 1),
            nn.Hardsigmoid(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.f(x)


class _InvertedResidual(nn.Module):
    def __init__(self, cin: int, k: int, exp: int, cout: int, se: bool, hs: bool, stride: int):
        super().__init__()
        act = nn.Hardswish if hs else nn.ReLU
        layers: list[nn.Module] = []
        if exp != cin:
            layers += [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), act()]
        layers += [
            nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False),
            nn.BatchNorm2d(exp),
            act(),
        ]
        if se:
            layers.append(_SE(exp))
        layers += [nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.f = nn.Sequential(*layers)
        self.res = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.f(x)
        return x + y if self.res else y


# MobileNetV3-Large (Howard et al., Table 1): kernel, expansion, out, SE, hard-swish, stride
_MNV3_LARGE = (
    (3, 16, 16, False, False, 1),
    (3, 64, 24, False, False, 2),
    (3, 72, 24, False, False, 1),
    (5, 72, 40, True, False, 2),
    (5, 120, 40, True, False, 1),
    (5, 120, 40, True, False, 1),
    (3, 240, 80, False, True, 2),
    (3, 200, 80, False, True, 1),
    (3, 184, 80, False, True, 1),
    (3, 184, 80, False, True, 1),
    (3, 480, 112, True, True, 1),
    (3, 672, 112, True, True, 1),
    (5, 672, 160, True, True, 2),
    (5, 960, 160, True, True, 1),
    (5, 960, 160, True, True, 1),
)


def mobilenetv3(num_classes: int = 1000, width_mult: float = 1.0) -> nn.Module:
    """MobileNetV3-Large; ``width_mult`` scales every channel count (min 8)."""

    def c(n: int) -> int:
        return max(8, int(round(n * width_mult / 8)) * 8)

    layers: list[nn.Module] = [
        nn.Conv2d(3, c(16), 3, 2, 1, bias=False),
        nn.BatchNorm2d(c(16)),
        nn.Hardswish(),
    ]
    cin = c(16)
    for k, exp, out, se, hs, s in _MNV3_LARGE:
        layers.append(_InvertedResidual(cin, k, c(exp), c(out), se, hs, s))
        cin = c(out)
    last = c(960)
    layers += [
        nn.Conv2d(cin, last, 1, bias=False),
        nn.BatchNorm2d(last),
        nn.Hardswish(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(last, c(1280)),
        nn.Hardswish(),
        nn.Dropout(0.2),
        nn.Linear(c(1280), num_classes),
    ]
    return nn.Sequential(*layers)


class SyntheticImages(torch.utils.data.Dataset):
    """``n`` random images and labels of a fixed shape, drawn from a small seeded pool
    (generating a fresh 224x224 tensor per sample would measure the RNG, not training)."""

    def __init__(
        self,
        n: int = 50_000,
        image_size: int = 224,
        num_classes: int = 1000,
        seed: int = 0,
        pool: int = 64,
    ):
        g = torch.Generator().manual_seed(seed)
        self.n = int(n)
        self.x = torch.randn(pool, 3, image_size, image_size, generator=g)
        self.y = torch.randint(0, num_classes, (pool,), generator=g)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        j = i % len(self.x)
        return self.x[j], self.y[j]


#: name -> (model builder, default image size, default dataset size: the papers' sets)
WORKLOADS: dict[str, tuple[Any, int, int]] = {
    "resnet18": (resnet18, 224, 50_000),  # ImageNet validation, 50k
    "mobilenetv3": (mobilenetv3, 224, 23_000),  # Google Landmarks GLD-23k
}


def make_step(
    name: str,
    image_size: int | None = None,
    num_classes: int = 1000,
    width: float | None = None,
    n_samples: int | None = None,
    device: Any = None,
    seed: int = 0,
) -> TrainingStep:
    """A ready-made training step. ``width``: ResNet base width (64) or MobileNet
    multiplier (1.0); tests pass tiny values with a small ``image_size``."""
    build, size, n = WORKLOADS[name]
    torch.manual_seed(seed)
    if name == "resnet18":
        model = build(num_classes, int(width) if width else 64)
    else:
        model = build(num_classes, float(width) if width else 1.0)
    data = SyntheticImages(n_samples or n, image_size or size, num_classes, seed)
    step = ModelStep(model, data, device=device)
    return TrainingStep(step, name=name, device=step.device)
