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
from ..schema import read_csv
from .args import IntListAction, given, nonnegative_int, positive_int


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


def _show_warnings(caught: list) -> None:
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)


def cmd_fit(args: argparse.Namespace) -> int:
    from ..predictor import PowerTrainMLP, Predictor

    _check_out(args.out, directory=True)
    corpus = read_csv(args.corpus)
    targets = tuple(t.strip() for t in args.targets.split(","))
    if len(targets) != 2 or not all(targets):
        raise DataError(f"--targets {args.targets}: give two column names, time then power")
    est = PowerTrainMLP(**given(args, epochs="epochs"))
    model = Predictor(
        est, targets=targets, progress=not args.quiet, **given(args, random_state="seed")
    )
    model.fit(corpus, source=args.corpus)
    model.save(args.out)
    s = model.info_["fit_seconds"]
    print(f"trained on {model.n_samples_} modes in {s:.1f} s; wrote {args.out}", file=sys.stderr)
    return 0


def cmd_transfer(args: argparse.Namespace) -> int:
    _check_out(args.out, directory=True)
    ref = _load_model(args.reference)
    samples = read_csv(args.samples)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = ref.transfer(
            samples,
            random_state=args.seed,
            source=args.samples,
            **given(args, loss="loss", transfer_epochs="epochs"),
        )
    _show_warnings(caught)
    model.save(args.out)
    print(
        f"transferred {args.reference} with {model.n_samples_} samples in "
        f"{model.info_['fit_seconds']:.2f} s; wrote {args.out}",
        file=sys.stderr,
    )
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    from ..streaming import predict_chunks, read_csv_chunks, write_csv_chunks

    if args.out not in (None, "-"):
        _check_out(args.out, directory=False)
    model = _load_model(args.model)
    check = None
    if args.modes:
        chunks = read_csv_chunks(args.modes)
        source = args.modes
        if args.device:  # --device with a CSV: the CSV must hold that device's modes
            from ..devices import get_device

            device = get_device(args.device)
            check = lambda df, src: device.validate(df, source=src)  # noqa: E731
    else:
        from ..devices import get_device

        if not args.device:
            raise DataError("give a modes CSV or --device to predict every power mode")
        chunks = get_device(args.device).iter_power_modes()
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
            write_csv_chunks(frames, sys.stdout)
            n = None
        else:
            n = write_csv_chunks(frames, args.out)
    _show_warnings(caught)
    if n is not None:
        print(f"wrote {n} predictions to {args.out}", file=sys.stderr)
    return 0


def _prepend(first, rest):
    yield first
    yield from rest


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fit", help="train a reference predictor (time + power) on a profiled corpus CSV"
    )
    p.add_argument(
        "corpus",
        help="CSV with cores,cpu_mhz,gpu_mhz,mem_mhz,batch_size,time_ms,power_w (a Jetson), "
        "or with a device column naming a catalog device: its knobs + batch_size",
    )
    p.add_argument("-o", "--out", required=True, help="model directory to write")
    p.add_argument(
        "--targets",
        default="time_ms,power_w",
        help="the two measured columns to predict, time then power (default: time_ms,power_w; "
        "the real GPU traces: epoch_s,power_w)",
    )
    # defaults are the library's (PowerTrainMLP, Predictor); torch loads only when one runs
    p.add_argument(
        "--epochs", type=positive_int, default=None, help="training epochs (default: the model's)"
    )
    p.add_argument(
        "--seed", type=nonnegative_int, default=None, help="random seed (default: the model's)"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser(
        "transfer", help="adapt a reference predictor to a new workload/device from ~50 samples"
    )
    p.add_argument("samples", help="profiled samples CSV (same columns as a corpus)")
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

    p = sub.add_parser(
        "predict", help="predict time and power for modes (CSV or every mode of a device)"
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
    p.add_argument("--no-std", action="store_true", help="leave out the uncertainty columns")
    p.add_argument("-o", "--out", help="output CSV (default: stdout)")
    p.set_defaults(func=cmd_predict)
