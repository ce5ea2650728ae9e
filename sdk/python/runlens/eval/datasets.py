"""Real evaluation datasets from Debian packages, with content hashes.

Nothing is downloaded. The classification sets are the CSV files that
Debian's ``python3-sklearn`` ships under
``/usr/lib/python3/dist-packages/sklearn/datasets/data/`` (read here with the
standard library; scikit-learn is not imported), the text set is the
``fortunes`` package's files under ``/usr/share/games/fortunes/``.

>>> from runlens.eval import datasets
>>> ds = datasets.load("digits")                 # checks the pinned hash of version "1"
>>> ds.hash, len(ds), ds.items[0].id, ds.items[0].hash
>>> parts = ds.split(seed=0)                      # Splits(train, validation, test)
>>> X, y = parts.train.arrays()                   # numpy float32 features, int64 labels

Canonical serialization (docs/evaluation.md, "Datasets"): an item is the
JSON object ``{"id", "input", "target"}`` written by ``canonical_json``
(``json.dumps(obj, sort_keys=True, separators=(",", ":"),
ensure_ascii=False, allow_nan=False)``, UTF-8; integers as integers, floats
as Python's shortest round-trip repr); its hash is the SHA-256 of those bytes.
A dataset's hash is the SHA-256 of ``canonical_json(header)`` + ``"\\n"``
followed by each item's hex hash and ``"\\n"``, in item order, where header
is ``{"format": "runlens-dataset/1", "name", "classes", "num_features"}``.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import hashlib
import io
import json
import os
import pathlib
import unicodedata
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = [
    "Item",
    "Dataset",
    "Splits",
    "DatasetError",
    "DatasetHashMismatch",
    "DATASETS",
    "VERSIONS",
    "load",
    "canonical_json",
    "item_hash",
    "items_hash",
    "sklearn_data_dir",
    "fortunes_dir",
]

FORMAT = "runlens-dataset/1"

SKLEARN_DATA_DIR = "/usr/lib/python3/dist-packages/sklearn/datasets/data"
FORTUNES_DIR = "/usr/share/games/fortunes"

#: The fortune files of the default text set: Debian 12's ``fortunes`` and
#: ``fortunes-min`` packages (1:1.99.1-7.3) without ``art``/``ascii-art`` (ASCII
#: drawings, not prose) and ``translate-me`` (not English).
FORTUNE_FILES = (
    "computers", "cookie", "debian", "definitions", "disclaimer", "drugs",
    "education", "ethnic", "food", "fortunes", "goedel", "humorists", "kids",
    "knghtbrd", "law", "linux", "linuxcookie", "literature", "love", "magic",
    "medicine", "men-women", "miscellaneous", "news", "paradoxum", "people",
    "perl", "pets", "platitudes", "politics", "pratchett", "science",
    "songs-poems", "sports", "startrek", "tao", "wisdom", "work", "zippy",
)

#: Pinned content hashes: (name, version) -> SHA-256 of the canonical
#: serialization. Version "1" is what Debian 12 (bookworm) ships:
#: python3-sklearn 1.2.1 and fortunes 1:1.99.1-7.3.
VERSIONS: Dict[Tuple[str, str], str] = {
    ("iris", "1"): "437d03830277d85f77eb70b4df8f28765967742e105fe2220ac3a752288deb1a",
    ("wine", "1"): "d1e75e61e0158721b7c462e39db1d14456a58db0484760fc189e1091247725e3",
    ("breast_cancer", "1"): "359b45d129c84bff4fd3d87b5277add10284783717de3d40fe2ab0c4337d8362",
    ("digits", "1"): "1d4aeea8a75f8a15e0d7dfdcbefb47b2f103657321520d797a7dbd428d03e362",
    ("fortunes", "1"): "23509c6bc2e1f9b55d418939c1b092d2a93d070417593c5c44e02c89f23e4f36",
}

#: The latest version of each dataset, used when load() is given none.
LATEST = {"iris": "1", "wine": "1", "breast_cancer": "1", "digits": "1", "fortunes": "1"}


class DatasetError(ValueError):
    """A dataset that cannot be loaded: missing files, a malformed file, an
    unknown name or version."""


class DatasetHashMismatch(DatasetError):
    """The data on disk no longer has the content hash its version was
    registered with."""

    def __init__(self, name, version, expected, actual, source):
        self.name, self.version, self.expected, self.actual, self.source = name, version, expected, actual, source
        super().__init__(
            f"dataset {name!r} version {version!r}: content hash is {actual}, but the version was "
            f"registered as {expected} (read from {source}); the data changed since the version was "
            f"registered: restore the files or register a new version"
        )


def canonical_json(obj: Any) -> bytes:
    """The canonical encoding every hash here is computed over (UTF-8 bytes)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def item_hash(item_id: str, input: Any, target: Any) -> str:
    """SHA-256 (hex) of canonical_json({"id", "input", "target"})."""
    return hashlib.sha256(canonical_json({"id": item_id, "input": input, "target": target})).hexdigest()


def items_hash(header: Dict[str, Any], hashes: Sequence[str]) -> str:
    """SHA-256 (hex) of canonical_json(header) + "\\n" + each hash + "\\n"."""
    h = hashlib.sha256(canonical_json(header))
    h.update(b"\n")
    for x in hashes:
        h.update(x.encode("ascii"))
        h.update(b"\n")
    return h.hexdigest()


@dataclasses.dataclass(frozen=True)
class Item:
    """One example. ``id`` is stable (the name and the row's position in the
    source file), ``hash`` is item_hash(id, input, target), ``index`` the
    position in the full dataset."""

    id: str
    index: int
    input: Any
    target: Any
    hash: str


class _Items:
    """What Dataset and its splits share: a list of items and their hash."""

    def __init__(self, name: str, items: List[Item], classes: Sequence[str], num_features: Optional[int]):
        self.name = name
        self.items = list(items)
        self.classes = list(classes)
        self.num_features = num_features

    def __len__(self):
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

    def __getitem__(self, i):
        return self.items[i]

    @property
    def header(self) -> Dict[str, Any]:
        return {"format": FORMAT, "name": self.name, "classes": self.classes, "num_features": self.num_features}

    @property
    def hash(self) -> str:
        """The content hash over the items in this order (see the module docstring)."""
        return items_hash(self.header, [it.hash for it in self.items])

    def range_hash(self, start: int, stop: int) -> str:
        """The content hash of items[start:stop] (a shard's contiguous range)."""
        return items_hash(self.header, [it.hash for it in self.items[start:stop]])

    @property
    def ids(self) -> List[str]:
        return [it.id for it in self.items]

    def arrays(self):
        """(X, y): numpy float32 features (n, num_features) and int64 labels
        (n,) of a classification set."""
        import numpy as np

        if self.num_features is None:
            raise DatasetError(f"{self.name}: a text dataset has no feature arrays")
        X = np.asarray([it.input for it in self.items], dtype=np.float32).reshape(len(self.items), self.num_features)
        y = np.asarray([it.target for it in self.items], dtype=np.int64)
        return X, y

    def texts(self) -> List[str]:
        return [it.input for it in self.items]


class Subset(_Items):
    """A split of a dataset: items in dataset order, with their own hash."""

    def __init__(self, parent: "Dataset", split: str, items: List[Item]):
        super().__init__(parent.name, items, parent.classes, parent.num_features)
        self.parent = parent
        self.split = split

    def __repr__(self):
        return f"Subset({self.name!r}, {self.split!r}, n={len(self)})"


@dataclasses.dataclass(frozen=True)
class Splits:
    train: Subset
    validation: Subset
    test: Subset
    seed: int
    fractions: Tuple[float, float, float]

    def __iter__(self):
        return iter((self.train, self.validation, self.test))


def _rank_key(seed: int, item_id: str) -> bytes:
    return hashlib.sha256(f"runlens-split/1:{seed}:{item_id}".encode("utf-8")).digest()


class Dataset(_Items):
    """A loaded dataset: name, version, items, classes (label names; empty
    for text), num_features (None for text), source (the files read)."""

    def __init__(self, name, version, items, classes, num_features, source):
        super().__init__(name, items, classes, num_features)
        self.version = version
        self.source = source
        self._hash = None

    @property
    def hash(self) -> str:
        if self._hash is None:
            self._hash = super().hash
        return self._hash

    @property
    def id(self) -> str:
        """``NAME:VERSION``."""
        return f"{self.name}:{self.version}"

    def verify(self, expected_hash: str) -> None:
        """Raises DatasetHashMismatch when the content hash is not expected_hash."""
        if self.hash != expected_hash:
            raise DatasetHashMismatch(self.name, self.version, expected_hash, self.hash, self.source)

    def split(self, seed: int = 0, fractions=(0.8, 0.1, 0.1), stratify: bool = False) -> Splits:
        """Deterministic train/validation/test split.

        Items are ranked by SHA-256("runlens-split/1:{seed}:{item id}") and
        the first round(n * fractions[0]) go to train, the next
        round(n * fractions[1]) to validation, the rest to test; with
        ``stratify`` this is done within each label. The same seed gives the
        same split on every machine and Python version; each split keeps
        dataset order."""
        fractions = tuple(float(f) for f in fractions)
        if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-9:
            raise ValueError("split: fractions must be three non-negative numbers adding up to 1")
        groups: Dict[Any, List[Item]] = {}
        if stratify:
            if self.num_features is None:
                raise ValueError("split: stratify needs a labelled dataset")
            for it in self.items:
                groups.setdefault(it.target, []).append(it)
        else:
            groups[None] = list(self.items)
        parts: Tuple[List[Item], List[Item], List[Item]] = ([], [], [])
        for key in sorted(groups, key=lambda k: (k is None, k)):
            ranked = sorted(groups[key], key=lambda it: _rank_key(seed, it.id))
            n = len(ranked)
            n_train = int(round(n * fractions[0]))
            n_val = min(n - n_train, int(round(n * fractions[1])))
            parts[0].extend(ranked[:n_train])
            parts[1].extend(ranked[n_train:n_train + n_val])
            parts[2].extend(ranked[n_train + n_val:])
        names = ("train", "validation", "test")
        subsets = [Subset(self, names[i], sorted(p, key=lambda it: it.index)) for i, p in enumerate(parts)]
        return Splits(subsets[0], subsets[1], subsets[2], int(seed), fractions)

    def __repr__(self):
        return f"Dataset({self.id!r}, n={len(self)}, hash={self.hash[:12]})"


# --- sources -------------------------------------------------------------------


def sklearn_data_dir() -> pathlib.Path:
    """``$RUNLENS_SKLEARN_DATA`` or Debian's python3-sklearn data directory."""
    return pathlib.Path(os.environ.get("RUNLENS_SKLEARN_DATA") or SKLEARN_DATA_DIR)


def fortunes_dir() -> pathlib.Path:
    """``$RUNLENS_FORTUNES_DIR`` or Debian's fortunes directory."""
    return pathlib.Path(os.environ.get("RUNLENS_FORTUNES_DIR") or FORTUNES_DIR)


def _read_text(path: pathlib.Path, package: str) -> str:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"{path} not found: install Debian's {package} package (apt-get install {package})") from None
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8")


def _number(text: str, integer: bool, where: str):
    try:
        if integer:
            v = float(text)
            if v != int(v):
                raise ValueError
            return int(v)
        v = float(text)
    except ValueError:
        raise DatasetError(f"{where}: {text!r} is not a{'n integer' if integer else ' number'}") from None
    if v != v or v in (float("inf"), float("-inf")):
        raise DatasetError(f"{where}: {text!r} is not finite")
    return v


# name -> (file, has sklearn's header line, integer features)
_TABULAR = {
    "iris": ("iris.csv", True, False),
    "wine": ("wine_data.csv", True, False),
    "breast_cancer": ("breast_cancer.csv", True, False),
    "digits": ("digits.csv.gz", False, True),
}


def _load_tabular(name: str, data_dir: Optional[os.PathLike]):
    file, has_header, integer = _TABULAR[name]
    path = pathlib.Path(data_dir) if data_dir is not None else sklearn_data_dir()
    path = path / file
    rows = list(csv.reader(io.StringIO(_read_text(path, "python3-sklearn"))))
    rows = [r for r in rows if r]
    if has_header:
        # sklearn's layout: "n_samples,n_features,class names..."
        head, rows = rows[0], rows[1:]
        try:
            n_samples, n_features = int(head[0]), int(head[1])
        except (ValueError, IndexError):
            raise DatasetError(f"{path}:1: expected 'n_samples,n_features,class names...'") from None
        classes = [c.strip() for c in head[2:]]
        if len(rows) != n_samples:
            raise DatasetError(f"{path}: the header says {n_samples} rows, the file has {len(rows)}")
    else:
        n_features = len(rows[0]) - 1
        classes = [str(i) for i in range(10)]
    items = []
    for i, row in enumerate(rows):
        where = f"{path}:{i + 1 + has_header}"
        if len(row) != n_features + 1:
            raise DatasetError(f"{where}: {len(row)} columns, expected {n_features + 1}")
        features = [_number(x, integer, where) for x in row[:-1]]
        label = _number(row[-1], True, where)
        if not 0 <= label < len(classes):
            raise DatasetError(f"{where}: label {label} outside 0..{len(classes) - 1}")
        item_id = f"{name}-{i:05d}"
        items.append(Item(item_id, i, features, label, item_hash(item_id, features, label)))
    return items, classes, n_features, str(path)


def _clean_fortune(text: str) -> Optional[str]:
    text = text.rstrip()
    if not text.strip():
        return None
    # Overstruck text (backspaces) and other control characters are not prose.
    if any(unicodedata.category(ch) == "Cc" and ch not in "\n\t" for ch in text):
        return None
    return text


def _load_fortunes(data_dir: Optional[os.PathLike], files: Sequence[str]):
    base = pathlib.Path(data_dir) if data_dir is not None else fortunes_dir()
    items = []
    for file in files:
        text = _read_text(base / file, "fortunes")
        # Entries are separated by lines holding only "%".
        entries, current = [], []
        for line in text.split("\n"):
            if line == "%":
                entries.append("\n".join(current))
                current = []
            else:
                current.append(line)
        entries.append("\n".join(current))
        ordinal = 0
        for entry in entries:
            cleaned = _clean_fortune(entry)
            if cleaned is None:
                continue
            item_id = f"fortunes/{file}/{ordinal:05d}"
            ordinal += 1
            items.append(Item(item_id, len(items), cleaned, None, item_hash(item_id, cleaned, None)))
    return items, [], None, str(base)


DATASETS = ("iris", "wine", "breast_cancer", "digits", "fortunes")


def load(
    name: str,
    version: Optional[str] = None,
    *,
    expected_hash: Optional[str] = None,
    data_dir: Optional[os.PathLike] = None,
    files: Optional[Sequence[str]] = None,
    verify: bool = True,
) -> Dataset:
    """Loads dataset ``name`` (one of DATASETS).

    ``version`` defaults to the latest registered one; its pinned hash
    (VERSIONS) is checked unless ``verify`` is False, and ``expected_hash``,
    when given, is checked as well: a mismatch raises DatasetHashMismatch.
    ``data_dir`` reads the files from elsewhere (default: Debian's paths, or
    $RUNLENS_SKLEARN_DATA / $RUNLENS_FORTUNES_DIR). ``files`` picks fortune
    files (default FORTUNE_FILES); a custom selection is its own data, version
    "custom", with no pinned hash."""
    if name not in DATASETS:
        raise DatasetError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    if files is not None and name != "fortunes":
        raise DatasetError("load: files= is for the fortunes dataset")
    if files is not None and tuple(files) != FORTUNE_FILES:
        if version not in (None, "custom"):
            raise DatasetError(f"fortunes: version {version!r} is the default file set; a custom files= selection is version 'custom'")
        version = "custom"
    elif version is None:
        version = LATEST[name]
    elif (name, version) not in VERSIONS:
        known = sorted(v for (n, v) in VERSIONS if n == name)
        raise DatasetError(f"dataset {name!r} has no version {version!r}; known: {', '.join(known)}")
    if name == "fortunes":
        items, classes, nf, source = _load_fortunes(data_dir, tuple(files) if files is not None else FORTUNE_FILES)
    else:
        items, classes, nf, source = _load_tabular(name, data_dir)
    ds = Dataset(name, version, items, classes, nf, source)
    if verify:
        pinned = VERSIONS.get((name, version))
        if pinned:
            ds.verify(pinned)
    if expected_hash is not None:
        ds.verify(expected_hash)
    return ds
