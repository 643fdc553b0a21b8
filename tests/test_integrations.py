"""The Lightning and Hugging Face callbacks: a tiny real model trains on CPU while the
tuner decides on the twin board, the framework's logs show the decision, and the board
is restored at the end."""

from __future__ import annotations

import logging
import warnings

import pytest
import torch
from test_profiling_nvml import START_MW, FakeNvml
from test_tuner import QUICK, Recording, gpu_reference, nvml_board

import powertrain as pt

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reference():
    return pt.Predictor.from_pretrained("orin-agx/resnet18")


def board() -> Recording:
    return Recording(pt.Twin("orin-agx", "mobilenetv3", seed=0))


class Pairs(torch.utils.data.Dataset):
    """x -> 2 * sum(x): 4,096 pairs."""

    def __init__(self, n: int = 4096):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 4, generator=g)
        self.y = 2 * self.x.sum(1, keepdim=True)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict:
        return {"x": self.x[i], "labels": self.y[i]}


# -------------------------------------------------------------------- Lightning --
def lightning_run(tmp_path, callback, steps=300):
    L = pytest.importorskip("lightning.pytorch")
    from lightning.pytorch.loggers import CSVLogger

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            loss = (self.net(batch["x"]) - batch["labels"]).pow(2).mean()
            self.log("train_loss", loss, on_step=True)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    trainer = L.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=CSVLogger(tmp_path),
        callbacks=[callback],
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        log_every_n_steps=1,
    )
    loader = torch.utils.data.DataLoader(Pairs(), batch_size=16, shuffle=True)
    trainer.fit(Tiny(), loader)
    return trainer


def test_a_lightning_run_decides_logs_and_restores(tmp_path, reference, caplog):
    from powertrain.integrations.lightning import PowerTrainCallback

    b = board()
    cb = PowerTrainCallback(b, reference, 30.0, budget=8, minibatches=5, transfer_options=QUICK)
    with caplog.at_level(logging.INFO):
        trainer = lightning_run(tmp_path, cb)
    assert trainer.global_step == 300
    s = cb.summary
    assert s is not None and s.active and s.power_w <= 30.0
    assert s.config["batch_size"] == 16  # the dataloader's
    assert b.closed == 1  # restored at the end of training
    assert "decided under 30 W" in caplog.text and "powertrain tuner: pick" in caplog.text
    metrics = (tmp_path / "lightning_logs" / "version_0" / "metrics.csv").read_text()
    assert "powertrain/power_w" in metrics and "powertrain/minibatches_to_pick" in metrics


def test_a_lightning_run_that_fails_restores_the_board(tmp_path, reference):
    from powertrain.integrations.lightning import PowerTrainCallback

    class Boom(Recording):
        def run_minibatch(self):
            if len(self.configured) >= 3:
                raise RuntimeError("sensor gone")
            return super().run_minibatch()

    b = Boom(pt.Twin("orin-agx", "mobilenetv3", seed=0))
    cb = PowerTrainCallback(b, reference, 30.0, budget=8, minibatches=5, transfer_options=QUICK)
    with pytest.raises(RuntimeError, match="sensor gone"):
        lightning_run(tmp_path, cb)
    assert b.errored >= 1 and b.closed == 1


def test_a_lightning_run_on_the_fake_nvml_sets_limits_and_restores(tmp_path):
    from powertrain.integrations.lightning import PowerTrainCallback

    fake = FakeNvml(setters=True)
    cb = PowerTrainCallback(
        nvml_board(fake), gpu_reference(), 200.0, budget=6, minibatches=5, transfer_options=QUICK
    )
    lightning_run(tmp_path, cb, steps=60)
    assert len(fake.sets) >= 2 and fake.limit_mw == START_MW and not fake.up


def test_lightning_on_a_board_it_cannot_control_warns_once(tmp_path):
    from powertrain.integrations.lightning import PowerTrainCallback

    fake = FakeNvml(setters=False)
    cb = PowerTrainCallback(nvml_board(fake, allow=False), gpu_reference(), 200.0)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        trainer = lightning_run(tmp_path, cb, steps=20)
    assert trainer.global_step == 20
    assert sum("Tuner has no effect" in str(w.message) for w in seen) == 1
    assert not cb.summary.active


# ----------------------------------------------------------------- transformers --
def hf_run(tmp_path, monkeypatch, callback, steps=300):
    tr = pytest.importorskip("transformers")
    import transformers.trainer

    # run from a checkout, the repository's top-level datasets/ folder shadows Hugging
    # Face's `datasets` package (not installed here), which the Trainer would then probe
    monkeypatch.setattr(transformers.trainer, "is_datasets_available", lambda: False)

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(4, 1)

        def forward(self, x, labels=None):
            out = self.net(x)
            return {"loss": (out - labels).pow(2).mean(), "logits": out}

    args = tr.TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=steps,
        per_device_train_batch_size=16,
        learning_rate=0.05,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_steps=50,
        remove_unused_columns=False,
        disable_tqdm=True,
    )
    trainer = tr.Trainer(model=Tiny(), args=args, train_dataset=Pairs(), callbacks=[callback])
    trainer.train()
    return trainer


def test_a_transformers_run_decides_logs_and_restores(tmp_path, monkeypatch, reference, caplog):
    from powertrain.integrations.transformers import PowerTrainCallback

    b = board()
    cb = PowerTrainCallback(b, reference, 30.0, budget=8, minibatches=5, transfer_options=QUICK)
    with caplog.at_level(logging.INFO, logger="powertrain.integrations.transformers"):
        trainer = hf_run(tmp_path, monkeypatch, cb)
    assert trainer.state.global_step == 300
    s = cb.summary
    assert s is not None and s.active and s.power_w <= 30.0
    assert b.closed == 1
    assert "decided under 30 W" in caplog.text and "powertrain tuner: pick" in caplog.text
    logged = [h for h in trainer.state.log_history if "powertrain/power_w" in h]
    assert logged and logged[0]["powertrain/power_w"] == s.decisions[0]["power_w"]
    assert any("powertrain/minibatches_to_pick" in h for h in trainer.state.log_history)


def test_a_transformers_run_on_the_fake_nvml_restores_the_limit(tmp_path, monkeypatch):
    from powertrain.integrations.transformers import PowerTrainCallback

    fake = FakeNvml(setters=True)
    cb = PowerTrainCallback(
        nvml_board(fake), gpu_reference(), 200.0, budget=6, minibatches=5, transfer_options=QUICK
    )
    hf_run(tmp_path, monkeypatch, cb, steps=60)
    assert len(fake.sets) >= 2 and fake.limit_mw == START_MW
