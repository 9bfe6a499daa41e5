"""Load the real datasets that ship with ``pairwise`` and user CSV files.

The project's commands run offline on real data by default: small CSV
files exported from statsmodels and scikit-learn live in
:mod:`pairwise.protocols.data` (see ``protocols/data/SOURCES.md`` for their origin,
licence and any transformation). This module reads them and any user CSV
into numeric numpy columns, with one error class, :class:`DataError`, whose
message names the file, the line or data row and the column at fault.

Security model: none of its own. The module only parses files. It never
evaluates their content, never pickles, and rejects non-finite or
non-numeric values instead of guessing. :func:`check_integer_range`
guards the two-party circuits. A value that does not fit the circuit's
two's-complement width would otherwise wrap around silently in the garbled
computation.

API:

- :func:`list_datasets` gives the names of the shipped datasets, and
  :func:`dataset_info` a short description of one.
- :func:`load_dataset` returns ``{column: float64 array}`` for a shipped
  dataset.
- :func:`load_csv` returns the requested columns (and an optional 0/1
  label column) of any CSV file with a header row; :func:`iter_csv` reads
  them block by block, in memory bounded by the block whatever the file's
  size, with the same checks and messages.
- :func:`check_integer_range` checks the values against a circuit width.
- :func:`column_domain` gives the public domain a shipped dataset declares
  for a column (``protocols/data/domains.json``, documented in SOURCES.md):
  the instrument's scale, the variable's definition or a declared round
  bound, never the observed minimum and maximum. Commands use it as the
  default bounds for shipped data; a user CSV has no declared domain, so its
  bounds must be given (``--lower/--upper``).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pairwise.dp.errors import PairwiseError
from pairwise.dp.validate import check_int

__all__ = [
    "DataError",
    "DatasetInfo",
    "DATA_DIR",
    "list_datasets",
    "dataset_info",
    "dataset_path",
    "load_dataset",
    "load_csv",
    "iter_csv",
    "check_integer_range",
    "column_domain",
    "dataset_domains",
]

#: Folder of the shipped CSV files (package data of :mod:`pairwise.protocols.data`).
DATA_DIR = Path(__file__).resolve().parent / "data"
#: Machine-readable public domains of the shipped datasets' columns.
DOMAINS_FILE = DATA_DIR / "domains.json"


class DataError(PairwiseError, ValueError):
    """A dataset cannot be used as given.

    ``row`` is the 1-based data row (the header is not counted) and
    ``column`` the column name, when the problem has a location. Both are
    also in the message.
    """

    def __init__(self, message: str, *, row: int | None = None, column: str | None = None):
        super().__init__(message)
        self.row = row
        self.column = column


@dataclass(frozen=True)
class DatasetInfo:
    """A shipped dataset: file name, row count and what it is used for."""

    name: str
    filename: str
    rows: int
    description: str


_DATASETS: dict[str, DatasetInfo] = {
    info.name: info
    for info in (
        DatasetInfo(
            "breast_cancer",
            "breast_cancer.csv",
            569,
            "Wisconsin diagnostic breast cancer (UCI via scikit-learn): 15 tumour features "
            "and the label malignant (0/1); default for AUC and Gini mean difference",
        ),
        DatasetInfo(
            "diabetes",
            "diabetes.csv",
            442,
            "Efron et al. (2004) diabetes data (scikit-learn, unscaled): 10 baseline "
            "variables and disease progression after one year",
        ),
        DatasetInfo(
            "engel",
            "engel.csv",
            235,
            "Engel food expenditure data (Koenker and Bassett 1982, via statsmodels): "
            "income and foodexp; default for the quantile-regression QMLE",
        ),
        DatasetInfo(
            "fair",
            "fair.csv",
            6366,
            "Fair (1978) affairs survey (via statsmodels): ratings rate_marriage 1-5, "
            "religious 1-4, age, yrs_married, ...; default for Kendall's tau-a and histograms",
        ),
    )
}


def list_datasets() -> list[str]:
    """Names of the datasets shipped in ``protocols/data``, sorted."""
    return sorted(_DATASETS)


def dataset_info(name: str) -> DatasetInfo:
    """Description of one shipped dataset; :class:`DataError` if unknown."""
    try:
        return _DATASETS[name]
    except KeyError:
        raise DataError(f"unknown dataset {name!r}; shipped datasets are: {', '.join(list_datasets())}") from None


def dataset_path(name: str) -> Path:
    """Path of a shipped dataset's CSV file."""
    return DATA_DIR / dataset_info(name).filename


def dataset_domains(name: str):
    """``{column: PublicDomain}`` declared for a shipped dataset (columns without one are absent)."""
    from pairwise.dp.bounds import PublicDomain

    dataset_info(name)
    with open(DOMAINS_FILE, encoding="utf-8") as fh:
        table = json.load(fh)["datasets"].get(name, {})
    return {
        col: PublicDomain(
            float(d["lower"]), float(d["upper"]), int(d["decimals"]), f"{name}:{col} ({d['basis']}: {d['source']})"
        )
        for col, d in table.items()
    }


def column_domain(name: str, column: str, flags: str = "--lower/--upper"):
    """The public domain declared for ``column`` of the shipped dataset ``name``.

    Raises :class:`DataError` naming ``flags`` when the dataset declares no
    domain for that column: its bounds must then be given explicitly.
    """
    doms = dataset_domains(name)
    if column not in doms:
        path = dataset_path(name)
        with open(path, encoding="utf-8-sig") as fh:
            header = [h.strip() for h in fh.readline().split(",")]
        if column not in header:
            raise DataError(f"{path}: no column {column!r}; columns are: {', '.join(header)}", column=column)
        raise DataError(
            f"the shipped dataset {name!r} declares no public domain for column {column!r} "
            f"(declared: {', '.join(sorted(doms)) or 'none'}); give its bounds with {flags}",
            column=column,
        )
    return doms[column]


def load_dataset(name: str) -> dict[str, np.ndarray]:
    """All columns of a shipped dataset as ``{name: float64 array}``.

    The dict keeps the file's column order.
    """
    path = dataset_path(name)
    header, rows, lines = _read_rows(path)
    return {col: _column(path, header, rows, lines, col) for col in header}


def load_csv(
    path: str | Path,
    columns: Sequence[str],
    label: str | None = None,
) -> dict[str, np.ndarray]:
    """Read the named numeric ``columns`` (and a 0/1 ``label``) of a CSV file.

    The file must have a header row. Cells are parsed as floats. Empty,
    non-numeric, NaN or infinite values are rejected with a
    :class:`DataError` that names the line, the data row and the column.
    The ``label`` column, if given, must hold only 0 and 1 and is returned
    as ``int64``. The other columns are ``float64``. Only the named columns
    are checked; other columns may hold anything.
    """
    path = Path(path)
    columns = list(columns)
    if not columns and label is None:
        raise DataError("no columns requested")
    wanted = columns + ([label] if label is not None and label not in columns else [])
    dup = _first_duplicate(wanted)
    if dup is not None:
        raise DataError(f"column {dup!r} requested twice", column=dup)
    header, rows, lines = _read_rows(path)
    out: dict[str, np.ndarray] = {}
    for col in wanted:
        out[col] = _column(path, header, rows, lines, col)
    if label is not None:
        lab = out[label]
        bad = np.flatnonzero((lab != 0) & (lab != 1))
        if bad.size:
            r = int(bad[0])
            raise DataError(
                f"{path}: line {lines[r]} (data row {r + 1}), column {label!r}: label must be "
                f"0 or 1, got {_fmt(lab[r])}",
                row=r + 1,
                column=label,
            )
        out[label] = lab.astype(np.int64)
    return out


def check_integer_range(
    values: Iterable[float] | np.ndarray,
    bits: int,
    signed: bool,
    column: str,
) -> np.ndarray:
    """Check that ``values`` are integers that fit a ``bits``-wide circuit word.

    Signed words hold ``[-2**(bits-1), 2**(bits-1) - 1]`` (two's
    complement). Unsigned words hold ``[0, 2**bits - 1]``. The first value
    that is not an integer or is out of range raises :class:`DataError`
    naming its 1-based row and ``column``. The checked values are returned
    as ``int64`` (``uint64`` for unsigned 64-bit words).
    """
    bits = check_int(bits, "circuit width", lo=1, hi=64, error=DataError)
    arr = np.asarray(values)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    if arr.size == 0:
        raise DataError(f"column {column!r} is empty", column=column)
    lo = -(1 << (bits - 1)) if signed else 0
    hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    rng_text = f"[{lo}, {hi}] ({'signed' if signed else 'unsigned'} {bits}-bit)"

    if arr.dtype.kind == "b":
        arr = arr.astype(np.int64)
    if arr.dtype.kind in "iu":
        info = np.iinfo(arr.dtype)
        bad = np.zeros(arr.shape, dtype=bool)
        if lo > info.min:
            bad |= arr < lo
        if hi < info.max:
            bad |= arr > hi
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise DataError(
                f"row {r + 1}, column {column!r}: value {int(arr[r])} is outside {rng_text}",
                row=r + 1,
                column=column,
            )
        ints = arr
    elif arr.dtype.kind == "f":
        arr = arr.astype(np.float64)
        finite = np.isfinite(arr)
        integral = finite & (np.floor(arr) == arr)
        # lo and hi + 1 are 0 or powers of two, hence exact in float64.
        upper_excl = math.ldexp(1.0, bits - 1 if signed else bits)
        in_range = integral & (arr >= float(lo)) & (arr < upper_excl)
        bad = ~in_range
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            v = arr[r]
            why = "is not an integer" if not integral[r] else f"is outside {rng_text}"
            raise DataError(
                f"row {r + 1}, column {column!r}: value {_fmt(v)} {why}",
                row=r + 1,
                column=column,
            )
        ints = arr
    else:
        raise DataError(f"column {column!r}: expected numeric values, got dtype {arr.dtype}", column=column)
    if signed or bits < 64:
        return ints.astype(np.int64)
    return ints.astype(np.uint64)


# --------------------------------------------------------------------------- internals


def _fmt(v: float) -> str:
    v = float(v)
    return str(int(v)) if v.is_integer() else repr(v)


def _first_duplicate(names: Sequence[str]) -> str | None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            return n
        seen.add(n)
    return None


def _iter_blocks(path: Path, size: int):
    """The header, then blocks of at most ``size`` (data rows, their file line numbers); checks shape."""
    try:
        fh = open(path, newline="", encoding="utf-8-sig")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, not a CSV file") from None
    with fh:
        try:
            reader = csv.reader(fh, strict=True)
            header = next(reader, None)
            if header is None or not any(h.strip() for h in header):
                raise DataError(f"{path}: empty file (expected a header row)")
            header = [h.strip() for h in header]
            for j, h in enumerate(header):
                if not h:
                    raise DataError(f"{path}: line 1: column {j + 1} has an empty name")
            dup = _first_duplicate(header)
            if dup is not None:
                raise DataError(f"{path}: line 1: duplicate column name {dup!r}", column=dup)
            yield header
            rows: list[list[str]] = []
            lines: list[int] = []
            done = 0
            for row in reader:
                line = reader.line_num
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue  # blank line
                if len(row) != len(header):
                    raise DataError(
                        f"{path}: line {line} (data row {done + len(rows) + 1}): expected "
                        f"{len(header)} fields as in the header, found {len(row)}",
                        row=done + len(rows) + 1,
                    )
                rows.append(row)
                lines.append(line)
                if len(rows) == size:
                    yield rows, lines
                    done += len(rows)
                    rows, lines = [], []
            if rows:
                yield rows, lines
            elif not done:
                raise DataError(f"{path}: no data rows after the header")
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: not a UTF-8 text file ({exc.reason})") from None
        except csv.Error as exc:
            raise DataError(f"{path}: malformed CSV: {exc}") from None


def _read_rows(path: Path) -> tuple[list[str], list[list[str]], list[int]]:
    """Header, data rows and their file line numbers; checks shape, not values."""
    blocks = _iter_blocks(path, 1 << 62)
    header = next(blocks)
    rows, lines = next(blocks)
    return header, rows, lines


def iter_csv(
    path: str | Path,
    columns: Sequence[str],
    label: str | None = None,
    *,
    text: Sequence[str] = (),
    rows: int = 1 << 16,
):
    """:func:`load_csv` block by block: dicts of the columns for at most ``rows`` data rows at a time.

    Numeric ``columns`` are ``float64`` and the ``label`` 0/1 ``int64``,
    checked as :func:`load_csv` checks them (errors name the line, the data
    row counted from the start of the file, and the column); ``text``
    columns are returned as they are, stripped (object arrays of ``str``),
    and must not be empty.  Memory holds one block whatever the file's size.
    """
    path = Path(path)
    columns, text = list(columns), list(text)
    if not columns and label is None and not text:
        raise DataError("no columns requested")
    numeric = columns + ([label] if label is not None and label not in columns else [])
    dup = _first_duplicate(numeric + text)
    if dup is not None:
        raise DataError(f"column {dup!r} requested twice", column=dup)
    if not isinstance(rows, int) or rows < 1:
        raise ValueError(f"rows must be a positive integer, got {rows!r}")
    blocks = _iter_blocks(path, rows)
    header = next(blocks)
    for name in numeric + text:
        if name not in header:
            raise DataError(f"{path}: no column {name!r}; columns are: {', '.join(header)}", column=name)
    first = 0
    for block, lines in blocks:
        out: dict[str, np.ndarray] = {col: _column(path, header, block, lines, col, first) for col in numeric}
        if label is not None:
            lab = out[label]
            bad = np.flatnonzero((lab != 0) & (lab != 1))
            if bad.size:
                r = int(bad[0])
                raise DataError(
                    f"{path}: line {lines[r]} (data row {first + r + 1}), column {label!r}: label must be "
                    f"0 or 1, got {_fmt(lab[r])}",
                    row=first + r + 1,
                    column=label,
                )
            out[label] = lab.astype(np.int64)
        for col in text:
            j = header.index(col)
            cells = [row[j].strip() for row in block]
            for r, cell in enumerate(cells):
                if not cell:
                    raise DataError(
                        f"{path}: line {lines[r]} (data row {first + r + 1}), column {col!r}: empty value",
                        row=first + r + 1,
                        column=col,
                    )
            # Python strings (dtype object), not a fixed-width array: one long cell would size every row
            # of the block to its length (4 bytes a character): 5 GB for a 20,000-character id in 2^16 rows
            out[col] = np.array(cells, dtype=object)
        yield out
        first += len(block)


def _column(
    path: Path, header: list[str], rows: list[list[str]], lines: list[int], name: str, first: int = 0
) -> np.ndarray:
    try:
        j = header.index(name)
    except ValueError:
        raise DataError(f"{path}: no column {name!r}; columns are: {', '.join(header)}", column=name) from None
    cells = [row[j].strip() for row in rows]
    try:
        col = np.array(cells, dtype=np.float64)
    except ValueError:
        col = None
    if col is not None and np.isfinite(col).all():
        return col
    # Slow path only to locate the first bad cell.
    for r, cell in enumerate(cells):
        if not cell:
            problem = "empty value"
        else:
            try:
                v = float(cell)
            except ValueError:
                problem = f"non-numeric value {cell!r}"
            else:
                if math.isfinite(v):
                    continue
                problem = f"non-finite value {cell!r}"
        raise DataError(
            f"{path}: line {lines[r]} (data row {first + r + 1}), column {name!r}: {problem}",
            row=first + r + 1,
            column=name,
        )
    raise AssertionError("unreachable: a bad cell must exist")  # pragma: no cover
