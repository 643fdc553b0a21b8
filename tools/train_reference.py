"""Train a shipped reference model from a twin corpus and write its model card.

Why: the reference models in ``reference_models/`` must be reproducible by anyone with
one command, and their cards must state figures measured by that same run:

    python tools/train_reference.py orin-agx/resnet18
    python tools/train_reference.py jetson/resnet18   # the family reference (5 Jetsons)
    python tools/train_reference.py --resave   # new file format, same weights

The model is trained on the whole grid corpus at batch 16 (paper §3.2: 90 % to train,
10 % to pick the best epoch); the card reports the MAPE on those held-out 10 %. A family
reference (``FAMILIES``) is trained the same way on several devices' corpora at once, with
each device's spec figures (``powertrain.predictor.spec_features``) beside its knobs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
import torch

from powertrain.data.corpora import load_corpus, provenance
from powertrain.predictor import TARGETS, Predictor
from powertrain.predictor.predictor import MONOTONE_CHOICES
from powertrain.predictor.spec_features import SPEC_FEATURES
from powertrain.schema import CONFIG_COLUMNS

#: shipped reference name -> corpus it is trained on
REFERENCES = {
    "orin-agx/resnet18": "orin-agx_resnet18_bs16",
    "orin-agx/mobilenetv3": "orin-agx_mobilenetv3_bs16",
}
#: family reference name -> the corpora of the devices it is trained on (issue 40: the
#: Orin AGX, Xavier AGX and Orin Nano corpora of the tuning set plus the Nano and TX2 NX,
#: so the spec figures take five values; no held-out device is among them)
FAMILIES = {
    "jetson/resnet18": (
        "orin-agx_resnet18_bs16",
        "xavier-agx_resnet18_bs16",
        "orin-nano_resnet18_bs16",
        "nano_resnet18_bs16",
        "tx2-nx_resnet18_bs16",
    ),
}

_REPO_MODELS = Path(__file__).resolve().parents[1] / "reference_models"


def train_reference(
    name: str, out_root: str | Path = _REPO_MODELS, progress: bool = True, monotone: str = "none"
) -> Path:
    """Fit the reference ``name`` on its corpus, save it under ``out_root``, write README.
    ``monotone``: a name in ``MONOTONE_CHOICES`` (the shipped ones: ``"none"``)."""
    if name in FAMILIES:
        return train_family(name, out_root, progress)
    if name not in REFERENCES:
        known = ", ".join([*REFERENCES, *FAMILIES])
        raise SystemExit(f"unknown reference {name!r}; known: {known}")
    corpus_name = REFERENCES[name]
    corpus = load_corpus(corpus_name)
    t0 = time.perf_counter()
    model = Predictor(progress=progress, monotone=MONOTONE_CHOICES[monotone])
    model.fit(corpus, source=corpus_name)
    seconds = time.perf_counter() - t0
    model.info_["corpus"] = corpus_name
    out = Path(out_root) / name
    model.save(out)
    (out / "README.md").write_text(model_card(name, corpus_name, model, seconds))
    return out


def train_family(
    name: str, out_root: str | Path = _REPO_MODELS, progress: bool = True, leave_out: str = ""
) -> Path:
    """Fit the family reference ``name`` on its devices' corpora together, the spec
    features filled from each row's device; save it and its card under ``out_root``.
    ``leave_out``: a device whose corpora are left out (a leave-one-device-out check of
    the family on the tuning set, benchmarks/cross_device.py ``--references``)."""
    names = tuple(c for c in FAMILIES[name] if not leave_out or c.split("_")[0] != leave_out)
    corpus = pd.concat([load_corpus(c) for c in names], ignore_index=True)
    t0 = time.perf_counter()
    model = Predictor(progress=progress, inputs=(*CONFIG_COLUMNS, *SPEC_FEATURES))
    model.fit(corpus, source=name)
    seconds = time.perf_counter() - t0
    model.info_["corpus"] = list(names)
    out = Path(out_root) / name
    model.save(out)
    (out / "README.md").write_text(family_card(name, names, model, seconds))
    return out


def family_card(name: str, names: tuple[str, ...], model: Predictor, seconds: float) -> str:
    """The model card of a family reference: its corpora, inputs and validation MAPE."""
    val = {t: model.heads_[t].validation_mape_ for t in TARGETS}
    rows = "\n".join(
        f"| `{c}` | {provenance(c).get('device')} | {provenance(c).get('rows')} |" for c in names
    )
    return f"""# Family reference predictor `{name}`

One PowerTrain reference (time and power heads, the network of the single-device
references) trained on the twin corpora of several Jetsons at once, with each device's
spec figures ({", ".join(f"`{f}`" for f in SPEC_FEATURES)}, from the spec's `hardware`)
as inputs beside its knobs and `batch_size`. A transfer fills them from the samples'
`device` column, so a new Jetson needs only a spec with those figures:

```python
import powertrain as pt
ref = pt.Predictor.from_pretrained("{name}")
model = ref.transfer(samples)          # ~50 profiled modes, with their `device` column
est = model.predict(pt.get_device("orin-nano").power_modes(), batch_size=16)
```

## Data

| corpus | device | modes |
|---|---|---|
{rows}

## Metrics (this training run)

| target | MAPE % on the 10 % validation rows |
|---|---|
| time_ms | {val["time_ms"]:.2f} |
| power_w | {val["power_w"]:.2f} |

Transfer accuracy on tuning and held-out devices: `benchmarks/results/cross_device.txt`
(`python benchmarks/cross_device.py`). Trained in {seconds:.1f} s on
{torch.get_num_threads()} CPU thread(s).

## Retrain

```
python tools/train_reference.py {name}
```
"""


def model_card(name: str, corpus_name: str, model: Predictor, seconds: float) -> str:
    prov = provenance(corpus_name)
    p = model.heads_["time_ms"].get_params()  # both heads are clones of one estimator
    layers = "-".join(map(str, p["hidden_layer_sizes"]))
    val = {t: model.heads_[t].validation_mape_ for t in TARGETS}
    best = {t: model.heads_[t].best_epoch_ + 1 for t in TARGETS}
    physics = _physics(model.constraints_["monotone"])
    ranges = "\n".join(
        f"| `{c}` | {lo:g} | {hi:g} |" for c, (lo, hi) in model.feature_ranges_.items()
    )
    return f"""# Reference predictor `{name}`

PowerTrain reference model (FGCS 2024, §3.2): one MLP for minibatch time and one for
module power, to be transferred to a new workload or device with ~50 profiled modes:

```python
import powertrain as pt
ref = pt.Predictor.from_pretrained("{name}")
model = ref.transfer(samples)          # samples: ~50 profiled modes of your workload
est = model.predict(pt.get_device("orin-agx").power_modes(), batch_size=16)
```

## Data

- Corpus `{corpus_name}` ({model.n_samples_:,} modes; device
  `{prov.get("device")}`, workload `{prov.get("workload")}`, batch sizes
  {prov.get("batch_sizes")}), made by `{prov.get("generator")}` with seed
  {prov.get("seed")}, {prov.get("n_minibatches")} minibatches per mode; the same sweep on
  the board would take {prov.get("board_hours")} h. Provenance:
  `datasets/{corpus_name}.provenance.json`.
- Training ranges (predictions outside warn `ExtrapolationWarning`). A column that
  never varied (here usually `batch_size`) starts with zero input weights, so the
  reference is neutral about it: transfer with samples at every batch size you want to
  predict, or expect the warning. Measured (`benchmarks/batch_selection.py`, Orin AGX
  MobileNetV3 on the twin): one transfer from 25 modes at batch 8 and 25 at batch 32
  predicts time per minibatch over all 18,096 modes with 13.9 % / 11.0 % MAPE at the
  sampled sizes, 12.1 % at batch 16 (between them), 12.6 % at 64 and 20.0 % at 4
  (outside them); the joint batch-size pick it makes under 20-40 W is 5-17 % slower than
  the true fastest.

| input | min | max |
|---|---|---|
{ranges}

## Model

Per target: MLP {layers}-1, ReLU x3, dropout {p["dropout"]} after
layers 1 and 2, Adam lr {p["learning_rate"]}, MSE, {p["epochs"]} epochs, minibatch
{p["batch_size"]}, weights of the best validation epoch (time: epoch {best["time_ms"]},
power: epoch {best["power_w"]}); inputs `{p["input_transform"]}`-transformed then
standardised, targets `{p["target_transform"]}`-transformed then standardised.
Monotone by construction (`Predictor(monotone=...)`, off by default): {physics}.
Uncertainty (`time_ms_std`, `power_w_std`): last-layer Laplace approximation plus the
held-out error (after a transfer: the transfer's own 5-fold error, slightly
conservative). Files: `model.json` (metadata, SHA-256 of the weights) and `weights.pt`
(tensors only, read with `torch.load(weights_only=True)`).

## Metrics (this training run)

| target | MAPE % on the 10 % validation rows |
|---|---|
| time_ms | {val["time_ms"]:.2f} |
| power_w | {val["power_w"]:.2f} |

The validation rows also chose the epoch, so these are mildly optimistic; the
NN-on-all floor with a separate test split, and transfer accuracy to other workloads
and devices, are in `benchmarks/results/accuracy.csv` (`python benchmarks/accuracy.py`).
Paper, Fig. 6 diagonal (real Orin AGX, ResNet-18 9.34 % / 4.06 %, MobileNet 8.12 % /
3.62 %) for comparison. Trained in {seconds:.1f} s on {torch.get_num_threads()} CPU
thread(s).

## Retrain

```
python tools/train_reference.py {name}
```
"""


def _physics(monotone: dict[str, dict[str, int]]) -> str:
    """The monotone constraints in words: ``power_w never falls as cores, ... rise``."""
    said = []
    for target, dirs in monotone.items():
        for sign, verb in ((1, "falls"), (-1, "rises")):
            knobs = [k for k, v in dirs.items() if v == sign]
            if knobs:
                said.append(f"`{target}` never {verb} as {', '.join(knobs)} rise")
    return "; ".join(said) or "none"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "names", nargs="*", default=[*REFERENCES, *FAMILIES], help="references to retrain"
    )
    ap.add_argument(
        "--out", default=str(_REPO_MODELS), help="root folder (default: reference_models/)"
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--leave-out",
        default="",
        metavar="DEVICE",
        help="a family reference without this device's corpora (write it with --out "
        "elsewhere: a leave-one-device-out check, not a shipped model)",
    )
    ap.add_argument(
        "--monotone",
        choices=MONOTONE_CHOICES,
        default="none",
        help="monotone constraints (the shipped references: none; 'power' gave the "
        "benchmarks/results/*_monotone_power* runs)",
    )
    ap.add_argument(
        "--resave",
        action="store_true",
        help="no training: rewrite the models in the current file format (same weights, "
        "same card) after a format change",
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    for name in args.names:
        if args.leave_out:
            out = train_family(name, args.out, leave_out=args.leave_out)
        elif args.resave:
            out = resave(name, args.out)
        else:
            out = train_reference(name, args.out, monotone=args.monotone)
        print(f"wrote {out}", file=sys.stderr)
    return 0


def resave(name: str, out_root: str | Path = _REPO_MODELS) -> Path:
    """Load the model ``name`` under ``out_root`` and save it again (current format)."""
    import warnings

    if name not in REFERENCES and name not in FAMILIES:
        raise SystemExit(f"unknown reference {name!r}; known: {', '.join(REFERENCES)}")
    path = Path(out_root) / name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an older format's warning is why we are here
        model = Predictor.load(path)
    return model.save(path)


if __name__ == "__main__":
    sys.exit(main())
