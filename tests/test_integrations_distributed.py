"""The callbacks under torch.distributed: two CPU processes (gloo) train one DDP model;
rank 0 decides, and every rank runs the same configuration at every step."""

from __future__ import annotations

import json

import pytest
import torch
from test_integrations import Pairs
from test_tuner import QUICK, Recording

import powertrain as pt

pytestmark = [pytest.mark.system, pytest.mark.slow]

L = pytest.importorskip("lightning.pytorch")


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        return (self.net(batch["x"]) - batch["labels"]).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


class StepLog(L.Callback):
    """The configuration this rank's board is in at each step (logged at the step's
    end, after the tuner's hook set it at the start)."""

    def __init__(self, board, out):
        self.board, self.out, self.steps = board, out, []

    def setup(self, trainer, pl_module, stage):
        # each process's board its own noise: ranks tuning alone would disagree
        self.board.twin = pt.Twin("orin-agx", "mobilenetv3", seed=trainer.global_rank)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        last = self.board.configured[-1] if self.board.configured else {}
        self.steps.append({k: float(v) for k, v in last.items()})

    def teardown(self, trainer, pl_module, stage):
        path = self.out / f"rank{trainer.global_rank}.json"
        path.write_text(json.dumps({"steps": self.steps, "closed": self.board.closed}))


def test_two_ranks_run_rank_zeros_configuration_at_every_step(tmp_path):
    from powertrain.integrations.lightning import PowerTrainCallback

    reference = pt.Predictor.from_pretrained("orin-agx/resnet18")
    board = Recording(pt.Twin("orin-agx", "mobilenetv3", seed=0))
    cb = PowerTrainCallback(board, reference, 30.0, budget=6, minibatches=3, transfer_options=QUICK)
    trainer = L.Trainer(
        max_steps=120,
        accelerator="cpu",
        devices=2,
        strategy="ddp_spawn",
        logger=False,
        callbacks=[StepLog(board, tmp_path), cb],
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
    )
    loader = torch.utils.data.DataLoader(Pairs(n=4096), batch_size=16)
    trainer.fit(Tiny(), loader)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    zero, one = (r["steps"] for r in ranks)
    assert len(zero) == len(one) == 120
    assert len({json.dumps(s, sort_keys=True) for s in zero}) >= 3  # it explored
    assert zero == one  # the same configuration at every step, on both ranks
    assert all(r["closed"] == 1 for r in ranks)  # each rank restored the board it set
