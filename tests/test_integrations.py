"""The Lightning and Hugging Face callbacks: a tiny real model trains on CPU while the
tuner decides on the twin board, the framework's logs and reporters show each decision
once, the board is restored at the end and after an error, and what a run measured is
reused by the next. Each run takes a few seconds: these are in the fast set."""

from __future__ import annotations

import logging
import signal
import time
import warnings

import pytest
import torch
from test_profiling_nvml import START_MW, FakeNvml
from test_tuner import QUICK, Recording, gpu_reference, nvml_board

import powertrain as pt
from powertrain.decisions.safe_set import over_cap_share
from powertrain.errors import DataError


@pytest.fixture(scope="module")
def reference():
    return pt.Predictor.from_pretrained("orin-agx/resnet18")


def board() -> Recording:
    return Recording(pt.Twin("orin-agx", "mobilenetv3", seed=0))


class Pairs(torch.utils.data.Dataset):
    """x -> 2 * sum(x): 4,096 pairs; ``wait_s`` per item stands for a slow loader."""

    def __init__(self, n: int = 4096, wait_s: float = 0.0):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 4, generator=g)
        self.y = 2 * self.x.sum(1, keepdim=True)
        self.wait_s = wait_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict:
        if self.wait_s:
            time.sleep(self.wait_s)
        return {"x": self.x[i], "labels": self.y[i]}


class Logged:
    """Every ``log_metrics`` call a Lightning logger received."""

    def __init__(self):
        self.calls: list[tuple[dict, int]] = []


def decision_rows(calls, key="powertrain/power_w"):
    return [(m, step) for m, step in calls if key in m]


# -------------------------------------------------------------------- Lightning --
def lightning_run(tmp_path, callback, steps=300, fail_at=None, seen=None, every=1, wait_s=0.0):
    """Train a tiny model; ``fail_at``: the training step raises at that batch;
    ``seen``: a :class:`Logged` that records what the logger was given."""
    L = pytest.importorskip("lightning.pytorch")
    from lightning.pytorch.loggers import CSVLogger

    class Recorded(CSVLogger):
        def log_metrics(self, metrics, step=None):
            if seen is not None:
                seen.calls.append((dict(metrics), step))
            super().log_metrics(metrics, step)

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            if fail_at is not None and self.global_step >= fail_at:
                raise RuntimeError("the model failed")
            loss = (self.net(batch["x"]) - batch["labels"]).pow(2).mean()
            self.log("train_loss", loss, on_step=True)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    trainer = L.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=Recorded(tmp_path),
        callbacks=[callback],
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        log_every_n_steps=every,
    )
    loader = torch.utils.data.DataLoader(Pairs(wait_s=wait_s), batch_size=16, shuffle=True)
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


def cb_lightning(b, reference, **kw):
    from powertrain.integrations.lightning import PowerTrainCallback

    opts = {"budget": 8, "minibatches": 5, "transfer_options": QUICK, **kw}
    return PowerTrainCallback(b, reference, 30.0, **opts)


def test_each_decision_reaches_the_lightning_logger_once(tmp_path, reference):
    # through LightningModule.log the value stayed in the results and was logged again at
    # every logging step until the epoch ended, or never after the epoch's last one
    for every in (1, 50):
        seen, cb = Logged(), cb_lightning(board(), reference)
        lightning_run(tmp_path / str(every), cb, seen=seen, every=every)
        rows = decision_rows(seen.calls)
        assert len(rows) == len(cb.summary.decisions) == 1
        assert rows[0][0]["powertrain/power_w"] == cb.summary.power_w
        assert rows[0][1] == cb.summary.decisions[0]["minibatch"]  # the step it was made
        # beside it, the measured share of exploring time and energy over the cap
        t, e = over_cap_share(cb.tuner.measurements(), 30.0)
        assert rows[0][0]["powertrain/over_cap_time_share"] == pytest.approx(t)
        assert rows[0][0]["powertrain/over_cap_energy_share"] == pytest.approx(e)
        assert 0 <= t <= e <= 1  # over the cap, a second costs more energy
        assert len(decision_rows(seen.calls, "powertrain/minibatches_to_pick")) == 1


def test_a_lightning_model_that_fails_restores_the_board_and_the_handlers(tmp_path, reference):
    # the error is the model's, not the tuner's: only on_exception can restore
    before = signal.getsignal(signal.SIGINT)
    b = board()
    cb = cb_lightning(b, reference)
    with pytest.raises(RuntimeError, match="the model failed"):
        lightning_run(tmp_path, cb, fail_at=40)
    assert len(b.configured) >= 2  # it had changed the board
    assert b.errored == 1 and b.closed == 1
    assert signal.getsignal(signal.SIGINT) is before


def test_an_interrupted_lightning_run_says_what_it_measured(tmp_path, reference, caplog):
    b = board()
    cb = cb_lightning(b, reference, budget=20)
    with caplog.at_level(logging.INFO), pytest.raises(RuntimeError):
        lightning_run(tmp_path, cb, fail_at=70)
    n = cb.summary.n_measured
    assert n >= 2 and cb.summary.config is None
    assert f"no pick (interrupted); {n} configurations measured" in caplog.text
    assert f"interrupted after measuring {n} configurations; best so far under 30 W" in caplog.text


def test_lightning_times_whole_iterations_the_loader_wait_included(tmp_path):
    from powertrain.integrations.lightning import PowerTrainCallback

    fake = FakeNvml(setters=True)
    cb = PowerTrainCallback(
        nvml_board(fake), gpu_reference(), 200.0, budget=3, minibatches=3, transfer_options=QUICK
    )
    lightning_run(tmp_path, cb, steps=40, wait_s=0.001)  # 16 items: >= 16 ms a batch
    rows = cb.tuner.measurements()
    assert len(rows) and (rows.time_ms >= 16.0).all()


@pytest.mark.parametrize("framework", ["lightning", "transformers"])
def test_arguments_are_checked_when_the_callback_is_built(framework, reference):
    mod = pytest.importorskip(f"powertrain.integrations.{framework}")
    make = mod.PowerTrainCallback
    with pytest.raises(DataError, match=r"batch_size: .*one batch size.*\[16, 32\]"):
        make(board(), reference, 30.0, batch_size=[16, 32])
    with pytest.raises(DataError, match="power_cap_w must be positive watts"):
        make(board(), reference, -5)
    with pytest.raises(DataError, match="unknown option.*budjet"):
        make(board(), reference, 30.0, budjet=8)
    with pytest.raises(DataError, match="budget must be an integer >= 1"):
        make(board(), reference, 30.0, budget=0)
    with pytest.raises(DataError, match="profile must be a CSV path"):
        make(board(), reference, 30.0, profile=3)


# ----------------------------------------------------------------- transformers --
def hf_run(tmp_path, monkeypatch, callback, steps=300, fail_at=None, also=()):
    """Train a tiny model with the Trainer; ``fail_at``: its forward raises from that
    step on; ``also``: callbacks put before ours (a reporter)."""
    tr = pytest.importorskip("transformers")
    import transformers.trainer

    # run from a checkout, the repository's top-level datasets/ folder shadows Hugging
    # Face's `datasets` package (not installed here), which the Trainer would then probe
    monkeypatch.setattr(transformers.trainer, "is_datasets_available", lambda: False)

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(4, 1)
            self.calls = 0

        def forward(self, x, labels=None):
            self.calls += 1
            if fail_at is not None and self.calls > fail_at:
                raise RuntimeError("the model failed")
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
    trainer = tr.Trainer(
        model=Tiny(), args=args, train_dataset=Pairs(), callbacks=[*also, callback]
    )
    trainer.train()
    return trainer


def reporter():
    """A reporter as ``report_to`` installs them: it sees what ``on_log`` hands it."""
    from transformers import TrainerCallback

    class Reporter(TrainerCallback):
        def __init__(self):
            self.logs: list[dict] = []

        def on_log(self, args, state, control, logs=None, **kw):
            self.logs.append(dict(logs or {}))

    return Reporter()


def cb_hf(b, reference, **kw):
    from powertrain.integrations.transformers import PowerTrainCallback

    opts = {"budget": 8, "minibatches": 5, "transfer_options": QUICK, **kw}
    return PowerTrainCallback(b, reference, 30.0, **opts)


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


def test_transformers_shows_the_decision_and_reports_it_once(tmp_path, monkeypatch, reference):
    import logging as std

    seen = []

    class Keep(std.Handler):
        def emit(self, record):
            seen.append(record)

    log = std.getLogger("powertrain.integrations.transformers")
    handler = Keep()
    log.addHandler(handler)
    try:  # the default level: nothing set by the test
        rep, cb = reporter(), cb_hf(board(), reference)
        trainer = hf_run(tmp_path, monkeypatch, cb, also=[rep])
    finally:
        log.removeHandler(handler)
    shown = [r.getMessage() for r in seen if r.levelno >= std.WARNING]
    assert any(m.startswith("decided under 30 W") for m in shown)
    assert any(m.startswith("powertrain tuner: pick") for m in shown)
    assert not any(m.startswith("measured") for m in shown)  # detail: info
    decided = [h for h in rep.logs if "powertrain/power_w" in h]
    assert len(decided) == len(cb.summary.decisions) == 1  # the reporters got it once
    assert decided[0]["powertrain/power_w"] == cb.summary.power_w
    assert sum("powertrain/minibatches_to_pick" in h for h in rep.logs) == 1
    history = [h for h in trainer.state.log_history if "powertrain/power_w" in h]
    assert len(history) == 1


def test_a_transformers_run_that_fails_without_with_restores_at_once(
    tmp_path, monkeypatch, reference
):
    before = signal.getsignal(signal.SIGINT)
    b = board()
    with pytest.raises(RuntimeError, match="the model failed"):
        hf_run(tmp_path, monkeypatch, cb_hf(b, reference), fail_at=40)
    assert len(b.configured) >= 2
    assert b.errored == 1 and b.closed == 1
    assert signal.getsignal(signal.SIGINT) is before  # the next Ctrl-C acts as usual


def test_with_callback_restores_where_the_trainer_cannot_be_wrapped(
    tmp_path, monkeypatch, reference
):
    import powertrain.integrations.transformers as hf

    monkeypatch.setattr(hf, "_running_trainer", lambda: None)  # e.g. a Trainer not found
    before = signal.getsignal(signal.SIGINT)
    b = board()
    cb = cb_hf(b, reference)
    with pytest.raises(RuntimeError, match="the model failed"), cb:
        hf_run(tmp_path, monkeypatch, cb, fail_at=40)
    assert b.errored == 1 and b.closed == 1
    assert signal.getsignal(signal.SIGINT) is before
