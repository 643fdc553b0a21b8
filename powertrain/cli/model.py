"""``powertrain fit``, ``transfer`` and ``predict``: the predictor from the shell.

Why: profiling happens on the board, prediction anywhere; CSV files and model
directories are what travels between them, so each command reads and writes those.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from ..errors import DataError, ModelFileError
from ..utils.files import refuse_same
from .args import (
    IntListAction,
    command,
    done,
    given,
    nonnegative_int,
    positive_int,
    progress_flag,
)


def read_table(text: str, what: str = ""):
    """A CSV file, or the id of a corpus shipped with the package (``powertrain
    examples`` lists them), e.g. ``orin-agx_mobilenetv3_bs16`` or ``v100_bert-squad``."""
    from ..data.corpora import corpus_names, corpus_path
    from ..data.real_data import load_real_corpus, real_corpus_names
    from ..schema import read_csv

    if Path(text).exists() or text.endswith((".csv", ".csv.gz")):
        from ..profiling.store import register_sidecar_device

        register_sidecar_device(text)  # a device outside the catalog, as simulate wrote it
        return read_csv(text, what)
    if text in corpus_names():
        return read_csv(corpus_path(text), what)
    if text in real_corpus_names():
        return load_real_corpus(text)
    where = f"{what} {text}" if what else text
    raise DataError(
        f"{where}: no such file, and no shipped corpus of that name "
        "(`powertrain examples` lists them)"
    )


def _load_model(spec: str):
    """A model directory, or the name of a shipped reference (``orin-agx/resnet18``)."""
    from ..predictor import Predictor, pretrained_names

    if Path(spec).is_dir():
        return Predictor.load(spec)
    if spec in pretrained_names():
        return Predictor.from_pretrained(spec)
    raise ModelFileError(
        f"{spec}: neither a model directory nor a shipped reference "
        f"({', '.join(pretrained_names()) or 'none shipped'})"
    )


def _check_out(path: str, *, directory: bool) -> None:
    """Refuse an output path that cannot be written, before any training runs."""

    out = Path(path)
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise DataError(f"--out {path}: folder {parent} does not exist")
    if directory and out.exists() and not out.is_dir():
        raise DataError(f"--out {path}: exists and is not a directory (a model is a directory)")
    if not directory and out.is_dir():
        raise DataError(f"--out {path}: is a directory; give a CSV file path")
    if directory:
        from ..predictor.model_io import check_writable

        check_writable(out)  # read-only or forbidden: said now, not after training


def _show_warnings(caught: list, args: argparse.Namespace) -> None:
    for w in caught:  # also with -q: a warning says the result may be off
        print(f"warning: {w.message}", file=sys.stderr)


def cmd_fit(args: argparse.Namespace) -> int:
    from ..predictor import PowerTrainMLP, Predictor

    _check_out(args.out, directory=True)
    corpus = read_table(args.corpus)
    if args.targets is None:  # the real GPU traces measure seconds per epoch
        has_ms = "time_ms" in corpus.columns or "epoch_s" not in corpus.columns
        text = "time_ms,power_w" if has_ms else "epoch_s,power_w"
    else:
        text = args.targets
    targets = tuple(t.strip() for t in text.split(","))
    if len(targets) != 2 or not all(targets):
        raise DataError(f"--targets {text}: give two column names, time then power")
    est = PowerTrainMLP(**given(args, epochs="epochs"))
    model = Predictor(
        est, targets=targets, progress=progress_flag(args), **given(args, random_state="seed")
    )
    model.fit(corpus, source=args.corpus)
    model.save(args.out)
    s = model.info_["fit_seconds"]
    done(
        f"trained on {model.n_samples_} modes ({', '.join(targets)}) in {s:.1f} s; wrote {args.out}"
    )
    return 0


def cmd_transfer(args: argparse.Namespace) -> int:
    _check_out(args.out, directory=True)
    ref = _load_model(args.reference)
    samples = read_table(args.samples)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = ref.transfer(
            samples,
            random_state=args.seed,
            source=args.samples,
            **given(args, loss="loss", transfer_epochs="epochs"),
        )
    _show_warnings(caught, args)
    model.save(args.out)
    kept = "; ".join(
        f"{t}: {c['choice']} ({', '.join(f'{m} {w:.2f}' for m, w in c['weights'].items())})"
        for t, c in model.info_["transfer"]["choice"].items()
    )
    done(
        f"transferred {args.reference} with {model.n_samples_} samples in "
        f"{model.info_['fit_seconds']:.2f} s (kept by k-fold error: {kept}); wrote {args.out}"
    )
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    from ..predictor.streaming import predict_chunks, read_csv_chunks, write_csv_chunks
    from .tables import integer_columns

    if args.out not in (None, "-"):
        refuse_same(args.out, args.modes)  # before anything is opened
        _check_out(args.out, directory=False)
    model = _load_model(args.model)
    if args.device:
        _check_model_device(model, args.model, args.device, args.cross_device)
    check = None
    if args.modes:
        chunks = read_csv_chunks(args.modes)
        source = args.modes
        if args.device:  # --device with a CSV: the CSV must hold that device's modes
            from ..devices.device import get_device

            device = get_device(args.device)
            check = lambda df, src: device.validate(df, source=src)  # noqa: E731
    else:
        from ..devices.device import get_device

        if not args.device:
            raise DataError("give a modes CSV or --device to predict every power mode")
        from ..predictor.streaming import check_rows

        dev = get_device(args.device)
        first = next(dev.iter_power_modes(chunk=1000))
        n_rows = dev.n_modes * len(args.batch_size or [1])
        check_rows(n_rows, first, args.max_rows, f"--device {dev.name}")
        chunks = dev.iter_power_modes()
        source = f"the modes of {args.device}"
    sizes = args.batch_size  # None: the CSV's column; one size; or several (repeat modes)
    batch = sizes if sizes is None or len(sizes) > 1 else sizes[0]
    if batch is None:
        first = next(iter(chunks))  # the header is known from the first chunk
        if "batch_size" not in first.columns:
            raise DataError(
                f"{source} has no batch_size column: add -b 16 (or -b 16,32 for several)"
            )
        chunks = _prepend(first, chunks)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frames = predict_chunks(
            model, chunks, batch, return_std=not args.no_std, source=source, check=check
        )
        if args.out in (None, "-"):
            _print_chunks(frames, model, args)
            n = None
        else:
            n = write_csv_chunks((integer_columns(df) for df in frames), args.out)
    _show_warnings(caught, args)
    if n is not None:
        done(f"wrote {n} predictions to {args.out}")
    return 0


def _check_model_device(model, name: str, device: str, allow: bool) -> None:
    """Refuse predicting a device the model was not trained on (its clocks may lie inside
    the training ranges, so no extrapolation warning would fire), unless ``allow``:
    then say loudly that the numbers are a cross-device guess."""
    from ..devices.device import get_device
    from ..predictor.checks import trained_devices

    known = trained_devices(model.info_)
    dev = get_device(device)
    device = dev.name
    if not known or device in known or set(dev.knobs) - set(model.inputs_):
        return  # other knobs: predict names the columns the model reads
    text = f"model {name} was trained on {', '.join(known)}, not on {device}"
    if not allow:
        raise DataError(
            f"--device {device}: {text}; transfer it with samples of {device} "
            "(powertrain transfer), or pass --cross-device for a cross-device guess"
        )
    print(f"warning: {text}: these predictions are a cross-device guess", file=sys.stderr)


def _print_chunks(frames, model, args: argparse.Namespace) -> None:
    """Predictions on the terminal: the configuration exactly, the predicted columns to
    6 significant digits (``--full-precision``: every digit), one chunk at a time."""
    import sys

    from .tables import print_table

    targets = list(model.targets_)
    rounded = [*targets, *(f"{t}_std" for t in targets)]
    for i, df in enumerate(frames):
        print_table(df, sys.stdout, rounded, args.full_precision, header=i == 0)


def _prepend(first, rest):
    yield first
    yield from rest


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "fit",
        help="train a reference predictor (time + power) on a profiled corpus CSV",
        description="Train a reference predictor (an MLP for time and one for power) on a "
        "fully profiled corpus, a CSV or a shipped corpus id, and save it to a model "
        "directory that `transfer` and `predict` read.",
    )
    p.add_argument(
        "corpus",
        help="CSV with cores,cpu_mhz,gpu_mhz,mem_mhz,batch_size,time_ms,power_w (a Jetson), "
        "or with a device column naming a catalog device: its knobs + batch_size; or a "
        "shipped corpus id, e.g. orin-agx_mobilenetv3_bs16 (`powertrain examples` lists them)",
    )
    p.add_argument("-o", "--out", required=True, help="model directory to write")
    p.add_argument(
        "--targets",
        default=None,
        help="the two measured columns to predict, time then power (default: time_ms,power_w; "
        "epoch_s,power_w for a table without time_ms, e.g. the real GPU traces)",
    )
    # defaults are the library's (PowerTrainMLP, Predictor); torch loads only when one runs
    p.add_argument(
        "--epochs", type=positive_int, default=None, help="training epochs (default: the model's)"
    )
    p.add_argument(
        "--seed", type=nonnegative_int, default=None, help="random seed (default: the model's)"
    )
    p.set_defaults(func=cmd_fit)

    p = command(
        sub,
        "transfer",
        help="adapt a reference predictor to a new workload/device from ~50 samples",
        description="Adapt a reference predictor to a new workload or device from about 50 "
        "profiled samples (the PowerTrain transfer: keep the hidden layers, retrain the "
        "last), and save the new model directory.",
    )
    p.add_argument(
        "samples", help="profiled samples CSV (same columns as a corpus) or a shipped corpus id"
    )
    p.add_argument(
        "-r",
        "--reference",
        default="orin-agx/resnet18",
        help="model directory or shipped reference name (default: orin-agx/resnet18)",
    )
    p.add_argument("-o", "--out", required=True, help="model directory to write")
    p.add_argument(
        "--loss",
        choices=["auto", "mse", "mape"],
        default=None,
        help="the model's (auto: mape when the samples' device differs, paper §4.3.4)",
    )
    p.add_argument(
        "--epochs", type=positive_int, default=None, help="transfer epochs (the model's)"
    )
    p.add_argument("--seed", type=nonnegative_int, default=None, help="random seed (the model's)")
    p.set_defaults(func=cmd_transfer)

    p = command(
        sub,
        "predict",
        help="predict time and power for modes (CSV or every mode of a device)",
        description="Predict minibatch time and power, with their standard deviations, for "
        "every row of a modes CSV or every mode of --device, at one or more batch sizes; "
        "streamed in chunks, so any size fits in bounded memory. `select` reads the output.",
    )
    p.add_argument("modes", nargs="?", help="CSV of modes (default: every mode of --device)")
    p.add_argument("-m", "--model", required=True, help="model directory or shipped reference name")
    p.add_argument("--device", help="predict every power mode of this device instead of a CSV")
    p.add_argument(
        "-b",
        "--batch-size",
        action=IntListAction,
        help="batch size(s), e.g. 16,32 or 16 32; several repeat each mode "
        "(default: the CSV's batch_size column)",
    )
    p.add_argument(
        "--cross-device",
        action="store_true",
        help="predict a --device the model was not trained on (a guess; refused otherwise)",
    )
    p.add_argument(
        "--max-rows",
        type=positive_int,
        default=None,
        help="refuse --device beyond this many rows (modes x batch sizes; default 100,000,000)",
    )
    p.add_argument("--no-std", action="store_true", help="leave out the uncertainty columns")
    p.add_argument(
        "--full-precision",
        action="store_true",
        help="print predictions with every digit (default: 6 significant digits on stdout; "
        "files always keep every digit)",
    )
    p.add_argument("-o", "--out", help="output CSV (default: stdout)")
    p.set_defaults(func=cmd_predict)
