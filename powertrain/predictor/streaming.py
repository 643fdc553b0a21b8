"""Predictions for tables of any size, a chunk at a time: bounded memory.

Why: a device's whole power-mode space or a modes CSV can hold tens of millions of rows;
reading, predicting and writing them in one piece took 11 GB for 10 million. Here a
chunk of rows is read, checked (errors name the file's own row), predicted and appended
to the output before the next is read, so memory stays that of one chunk.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator, cast

import numpy as np
import pandas as pd

from ..errors import DataError, PowerTrainError
from ..schema import check_columns
from ..utils.files import atomic_open, disk_reason

#: rows per chunk: about 100 MB of working memory while predicting
CHUNK_ROWS = 100_000

#: a streamed table of more rows than this needs its flag (``--max-rows``) raised: about
#: 4 GB of CSV and half an hour of predicting on two cores
MAX_ROWS = 100_000_000


def check_rows(n: int, sample: pd.DataFrame, limit: int | None, what: str) -> None:
    """Refuse, before any work, a table of ``n`` rows over ``limit`` (default
    :data:`MAX_ROWS`), naming its size on disk (estimated from ``sample``'s CSV) and the
    flag that allows it."""
    limit = MAX_ROWS if limit is None else limit
    if n <= limit:
        return
    per_row = len(sample.to_csv(index=False, header=False)) / max(len(sample), 1)
    size = n * per_row
    unit = next((u for u, b in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9)) if size >= b), "MB")
    scale = {"PB": 1e15, "TB": 1e12, "GB": 1e9, "MB": 1e6}[unit]
    raise DataError(
        f"{what}: {n:,} rows (about {size / scale:,.1f} {unit} of CSV) is more than "
        f"{limit:,}; pass --max-rows {n} to write it anyway"
    )


_ROW = re.compile(r"\brow (\d+)")


def _shifted(e: PowerTrainError, offset: int, source: str) -> PowerTrainError:
    """``e`` with its first "row N" counted from the start of the file, not the chunk."""
    msg = _ROW.sub(lambda m: f"row {int(m.group(1)) + offset}", str(e), count=1)
    if source not in msg:
        msg = f"{source}: {msg}"
    return type(e)(msg)


def read_csv_chunks(
    path: str | Path, chunk: int = CHUNK_ROWS, what: str = ""
) -> Iterator[pd.DataFrame]:
    """The rows of a CSV, ``chunk`` at a time (index = the data row, from 0); errors name
    the file; a file without rows is refused."""
    where = f"{what} {path}" if what else str(path)
    if not Path(path).is_file():
        raise DataError(f"{where}: no such file")
    try:
        reader = pd.read_csv(path, chunksize=chunk)
        n = 0
        for df in reader:
            n += len(df)
            yield df
    except pd.errors.EmptyDataError:
        raise DataError(f"{where}: the file is empty (no header, no rows)") from None
    except UnicodeDecodeError as e:
        row = _undecodable_row(path)
        raise DataError(f"{where}: {row} is not UTF-8 text ({e.reason})") from None
    except (OSError, pd.errors.ParserError) as e:
        reason = " ".join(str(e).split())  # the parser's text spans lines
        raise DataError(f"{where}: not a readable CSV ({reason})") from None
    if n == 0:
        raise DataError(f"{where}: has a header but no rows")


def _undecodable_row(path: str | Path) -> str:
    """``row N`` (1-based data row, as the other errors count) of the first line that is
    not UTF-8: the decoder only knows a byte position inside its buffer."""
    with open(path, "rb") as f:
        for i, line in enumerate(f):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                return "the header" if i == 0 else f"row {i}"
    return "a line"  # pragma: no cover - pandas found one


def predict_chunks(
    model: Any,
    chunks: Iterable[pd.DataFrame],
    batch_size: int | list[int] | None = None,
    *,
    return_std: bool = True,
    source: str = "modes",
    check: Callable[[pd.DataFrame, str], pd.DataFrame] | None = None,
) -> Iterator[pd.DataFrame]:
    """``model.predict`` of each chunk in turn. Before predicting, each chunk's input
    columns are checked (``check(chunk, source)`` if given, e.g. a device's mode check)
    with errors naming the row of the whole table. Warnings are gathered and said once at
    the end: how many rows over all chunks lie outside the training ranges."""
    from .checks import ExtrapolationWarning

    outside, total, n_chunks, first = 0, 0, 0, ""
    other: dict[str, warnings.WarningMessage] = {}
    given = [] if batch_size is None else ["batch_size"]
    cols = [c for c in model.inputs_ if c not in given]
    catalog = getattr(model, "inputs", None) is None
    for df in chunks:
        offset = int(df.index[0]) if len(df) else 0
        try:
            if all(c in df.columns for c in cols):  # else predict names what is missing
                check_columns(df, cols, source, positive=cols if catalog else (), nonnegative=cols)
            if check is not None:
                check(df, source)
        except PowerTrainError as e:
            raise _shifted(e, offset, source) from None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = model.predict(df, batch_size=batch_size, return_std=return_std)
        total += len(out)
        n_chunks += 1
        for w in caught:
            m = re.search(r"(\d+) of \d+ rows", str(w.message))
            if issubclass(w.category, ExtrapolationWarning) and m:
                outside += int(m.group(1))
                first = first or str(w.message)
            else:
                other.setdefault(str(w.message), w)
        yield out
    for w in other.values():
        warnings.warn(w.message, w.category, stacklevel=2)
    if outside:
        text = first if n_chunks == 1 else (
            f"predict: {outside} of {total} rows lie outside the training ranges; "
            f"predictions there are extrapolations (first chunk: {first})"
        )  # fmt: skip
        warnings.warn(text, ExtrapolationWarning, stacklevel=2)


#: characters that make a CSV cell need quoting: such a chunk goes through pandas
_QUOTE = re.compile(r'[",\n\r]')


def _cells(values: pd.Series) -> list[str] | None:
    """One column as CSV cells, as pandas writes them (floats as their shortest exact
    repr, a gap as an empty cell); None when a cell would need quoting. A column with few
    distinct values (the knobs of a modes table, the predictions of repeated modes)
    formats each value once."""
    if pd.api.types.is_bool_dtype(values.dtype):
        return ["True" if v else "False" for v in values.tolist()]
    numeric = pd.api.types.is_numeric_dtype(values.dtype)
    fmt = repr if pd.api.types.is_float_dtype(values.dtype) else str
    if len(values) > 64:  # hashing costs a tenth of formatting every value
        codes, uniques = pd.factorize(values, use_na_sentinel=True)
        if len(uniques) * 4 <= len(values):
            text = [fmt(u) for u in np.asarray(uniques).tolist()] + [""]
            if not numeric and any(_QUOTE.search(t) for t in text):
                return None
            return list(np.asarray(text, dtype=object)[codes])  # a gap (-1): the last, ""
    if numeric:
        raw = values.tolist()
        if fmt is repr and values.isna().any():
            return ["" if v != v else repr(v) for v in raw]
        return list(map(fmt, raw))
    cells = ["" if v is None or v != v else str(v) for v in values.tolist()]
    return None if any(_QUOTE.search(c) for c in cells) else cells


def csv_text(df: pd.DataFrame, header: bool = True) -> str:
    """``df.to_csv(index=False, header=header)``, the same text, several times faster for
    the tables predict writes (numbers and plain ids); pandas itself where a cell or a
    name needs quoting."""
    names = [str(c) for c in df.columns]
    columns = [_cells(df.iloc[:, i]) for i in range(df.shape[1])]
    if any(c is None for c in columns) or any(_QUOTE.search(n) for n in names):
        return df.to_csv(index=False, header=header, lineterminator="\n")
    lines = map(",".join, zip(*cast(list[list[str]], columns)))
    body = "\n".join(lines)
    head = ",".join(names) + "\n" if header else ""
    return head + body + ("\n" if len(df) else "")


def _disk_error(path: str | Path, e: OSError) -> DataError:
    return DataError(f"{path}: cannot write ({disk_reason(e)})")


def prefetch(frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """``frames``, produced one chunk ahead in a thread: the next chunk is read and
    predicted (torch frees the interpreter lock) while this one is formatted and written.
    An error in the producer is raised here, at the chunk it belongs to."""
    import queue
    import threading

    box: queue.Queue = queue.Queue(maxsize=1)
    stop = threading.Event()
    end = object()

    def produce() -> None:
        try:
            for df in frames:
                while not stop.is_set():
                    try:
                        box.put((df, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            box.put((end, None))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            box.put((end, e))

    worker = threading.Thread(target=produce, name="powertrain-prefetch", daemon=True)
    worker.start()
    try:
        while True:
            item, error = box.get()
            if error is not None:
                raise error
            if item is end:
                return
            yield item
    finally:
        stop.set()
        worker.join(timeout=5)


def write_csv_chunks(frames: Iterable[pd.DataFrame], out: str | Path | IO[str]) -> int:
    """Write ``frames`` as one CSV (header once) to a path or an open text stream; return
    the row count. A full disk or read-only folder is a DataError naming the file."""
    n = 0
    if not isinstance(out, (str, Path)):
        try:
            for i, df in enumerate(frames):
                df.to_csv(out, index=False, header=i == 0)
                n += len(df)
        except BrokenPipeError:  # the reader stopped (`| head`): stop quietly too
            if out is sys.stdout:  # and let the interpreter's last flush go nowhere
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return n
    try:  # whole or not at all: an error mid-stream leaves no truncated file behind
        with atomic_open(out) as f:
            for i, df in enumerate(prefetch(frames)):
                f.write(csv_text(df, header=i == 0))
                n += len(df)
    except OSError as e:
        raise _disk_error(out, e) from None
    return n
