"""Timing a user's step, the ready-made torch workloads, loading steps, and the twin CLI."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from powertrain.cli import main
from powertrain.errors import ProfilingError
from powertrain.steps.loader import as_step, load_step
from powertrain.steps.model_step import from_model
from powertrain.steps.step import TrainingStep
from powertrain.steps.torch_workloads import SyntheticImages, make_step, mobilenetv3, resnet18


def test_callable_step_times_and_checks_loss():
    seen = {}

    def step(batch_size, num_workers=0):
        seen["bs"], seen["w"] = batch_size, num_workers
        return torch.tensor(0.7)

    s = TrainingStep(step, device="cpu")
    s.configure(batch_size=32, num_workers=2)
    assert s.run() > 0 and seen == {"bs": 32, "w": 2} and s.last_loss == pytest.approx(0.7)


@pytest.mark.parametrize("loss", [math.nan, math.inf, torch.tensor(float("nan"))])
def test_nan_loss_is_an_error(loss):
    with pytest.raises(ProfilingError, match="loss at batch size 16.*learning rate"):
        TrainingStep(lambda bs: loss, device="cpu").run()


def test_raising_step_is_an_error_that_keeps_the_cause():
    def step(bs):
        raise RuntimeError("CUDA out of memory")

    with pytest.raises(ProfilingError, match="raised RuntimeError: CUDA out of memory") as e:
        TrainingStep(step, device="cpu").run()
    assert isinstance(e.value.__cause__, RuntimeError)


def test_from_model_rebuilds_loader_per_batch_size():
    data = torch.utils.data.TensorDataset(torch.randn(64, 10), torch.randint(0, 3, (64,)))
    s = from_model(torch.nn.Linear(10, 3), data, device="cpu")
    for bs in (4, 16):
        s.configure(batch_size=bs)
        for _ in range(6):  # cycles through the data past one epoch at bs=16
            assert s.run() > 0
        assert math.isfinite(s.last_loss)
    s.close()


@pytest.mark.parametrize(
    "name, build, width", [("resnet18", resnet18, 4), ("mobilenetv3", mobilenetv3, 0.25)]
)
def test_ready_made_workloads_train_on_cpu(name, build, width):
    model = build(
        num_classes=10, **({"width": width} if name == "resnet18" else {"width_mult": width})
    )
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    step = make_step(name, image_size=32, num_classes=10, width=width, n_samples=64, device="cpu")
    step.configure(batch_size=4)
    assert step.run() > 0 and math.isfinite(step.last_loss) and step.name == name


def test_full_size_resnet18_has_resnet18_parameters():
    n = sum(p.numel() for p in resnet18().parameters())
    assert 11.6e6 < n < 11.8e6  # torchvision's resnet18: 11,689,512


def test_synthetic_images_shape():
    ds = SyntheticImages(n=10, image_size=16, num_classes=5, pool=4)
    x, y = ds[7]
    assert len(ds) == 10 and x.shape == (3, 16, 16) and 0 <= int(y) < 5


def test_load_step_names(tmp_path, monkeypatch):
    assert (
        load_step("resnet18", image_size=32, width=4, n_samples=8, device="cpu").name == "resnet18"
    )
    with pytest.raises(ProfilingError, match="not a ready-made workload"):
        load_step("vgg")
    f = tmp_path / "job.py"
    f.write_text("def step(batch_size):\n    return 0.0\n\ndef factory():\n    return step\n")
    assert load_step(f"{f}:step").name == "step"
    assert load_step(f"{f}:factory").run() > 0
    with pytest.raises(ProfilingError, match="has no attribute 'nope'"):
        load_step(f"{f}:nope")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_step("job:step").name == "step"
    with pytest.raises(ProfilingError, match="cannot import"):
        load_step("no_such_module_xyz:step")
    assert as_step(lambda bs: None).run() > 0


def test_cli_profile_twin(tmp_path):
    out = tmp_path / "t.csv"
    argv = [
        "profile",
        "--backend",
        "twin",
        "--device",
        "orin-agx",
        "--workload",
        "resnet18",
        "--modes",
        "5",
        "--batch-size",
        "16",
        "--out",
        str(out),
        "--quiet",
    ]
    assert main(argv) == 0
    df = pd.read_csv(out)
    assert len(df) == 5 and (df["power_w"] > 0).all() and (df["device"] == "orin-agx").all()
    assert main(argv) == 0 and len(pd.read_csv(out)) == 5
    modes = tmp_path / "m.csv"
    df[["cores", "cpu_mhz", "gpu_mhz", "mem_mhz"]].head(2).to_csv(modes, index=False)
    assert (
        main(
            [
                "profile",
                "--device",
                "orin-agx",
                "--workload",
                "resnet18",
                "--modes",
                str(modes),
                "--batch-size",
                "32",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    assert len(pd.read_csv(out)) == 7


def test_cli_profile_bad_input(tmp_path, capsys):
    assert (
        main(
            [
                "profile",
                "--device",
                "orin-agx",
                "--workload",
                "resnet18",
                "--modes",
                "5",
                "--out",
                str(tmp_path / "nope" / "x.csv"),
            ]
        )
        == 1
    )
    assert "does not exist" in capsys.readouterr().err
