"""runlens.eval.datasets: Debian's sklearn CSVs and fortunes, content hashes,
deterministic splits, and a clear error when a version's hash no longer
matches."""

import hashlib
import json
import shutil

import numpy as np
import pytest

from runlens.eval import datasets as D

SIZES = {"iris": (150, 4, 3), "wine": (178, 13, 3), "breast_cancer": (569, 30, 2), "digits": (1797, 64, 10)}


@pytest.fixture(scope="module")
def loaded():
    return {name: D.load(name) for name in D.DATASETS}


@pytest.mark.parametrize("name", sorted(SIZES))
def test_tabular_sets_match_scikit_learns_own_loaders(loaded, name):
    sk = pytest.importorskip("sklearn.datasets")
    ds = loaded[name]
    n, f, c = SIZES[name]
    assert (len(ds), ds.num_features, len(ds.classes)) == (n, f, c)
    X, y = ds.arrays()
    ref = getattr(sk, f"load_{name}")()
    np.testing.assert_array_equal(X, ref.data.astype(np.float32))
    np.testing.assert_array_equal(y, ref.target)
    if name != "digits":
        assert ds.classes == [str(x) for x in ref.target_names]


def test_pinned_hashes_and_ids(loaded):
    for name, ds in loaded.items():
        assert ds.version == "1" and ds.id == f"{name}:1"
        assert ds.hash == D.VERSIONS[(name, "1")]
        ids = ds.ids
        assert len(set(ids)) == len(ids)
        assert [it.index for it in ds] == list(range(len(ds)))


def test_item_and_dataset_hash_follow_the_documented_serialization(loaded):
    it = loaded["iris"].items[0]
    assert it.id == "iris-00000"
    text = '{"id":"iris-00000","input":[5.1,3.5,1.4,0.2],"target":0}'
    assert it.hash == hashlib.sha256(text.encode()).hexdigest()
    ds = loaded["iris"]
    h = hashlib.sha256(
        json.dumps(
            {"classes": ["setosa", "versicolor", "virginica"], "format": "runlens-dataset/1", "name": "iris", "num_features": 4},
            separators=(",", ":"),
        ).encode()
        + b"\n"
    )
    for x in ds:
        h.update(x.hash.encode() + b"\n")
    assert ds.hash == h.hexdigest()
    # digits features are integers on the wire, fortunes are text with a null target
    assert '"input":[0,0,5,13,' in D.canonical_json({"input": loaded["digits"].items[0].input}).decode()
    f = loaded["fortunes"].items[0]
    assert f.hash == D.item_hash(f.id, f.input, None)
    assert ds.range_hash(0, len(ds)) == ds.hash and ds.range_hash(0, 10) != ds.hash


def test_fortunes_are_clean_prose(loaded):
    ds = loaded["fortunes"]
    assert len(ds) > 10_000 and ds.num_features is None
    assert sum(len(t) for t in ds.texts()) > 2_000_000
    for t in ds.texts():
        assert t and t == t.rstrip() and "\b" not in t and "\x1b" not in t
    assert ds.items[0].id.startswith("fortunes/computers/")
    with pytest.raises(D.DatasetError, match="no feature arrays"):
        ds.arrays()
    small = D.load("fortunes", files=["fortunes"])
    assert small.version == "custom" and 0 < len(small) < len(ds)
    assert small.items[0].id == "fortunes/fortunes/00000"
    assert small.items[0].input == "A day for firm decisions!!!!!  Or is it?"


def test_splits_are_deterministic_disjoint_and_complete(loaded):
    ds = loaded["digits"]
    a, b = ds.split(seed=7), ds.split(seed=7)
    assert [s.ids for s in a] == [s.ids for s in b]
    assert [s.hash for s in a] == [s.hash for s in b]
    assert (len(a.train), len(a.validation), len(a.test)) == (1438, 180, 179)
    ids = a.train.ids + a.validation.ids + a.test.ids
    assert sorted(ids) == sorted(ds.ids)
    c = ds.split(seed=8)
    assert c.validation.ids != a.validation.ids
    # each split keeps dataset order
    for s in a:
        idx = [it.index for it in s]
        assert idx == sorted(idx)
    # the rank is a hash of (seed, id): a pinned member stays pinned
    first = sorted(ds.items, key=lambda it: hashlib.sha256(f"runlens-split/1:7:{it.id}".encode()).digest())[0]
    assert first.id in a.train.ids


def test_stratified_split_keeps_class_proportions(loaded):
    ds = loaded["iris"]
    s = ds.split(seed=0, fractions=(0.6, 0.2, 0.2), stratify=True)
    for part, per_class in ((s.train, 30), (s.validation, 10), (s.test, 10)):
        _, y = part.arrays()
        assert np.bincount(y).tolist() == [per_class] * 3
    with pytest.raises(ValueError, match="fractions"):
        ds.split(fractions=(0.5, 0.5, 0.5))


def test_changed_data_fails_its_version_with_a_clear_error(tmp_path):
    src = D.sklearn_data_dir() / "iris.csv"
    lines = src.read_text().splitlines(keepends=True)
    lines[5] = lines[5].replace("5.0", "5.01", 1)
    (tmp_path / "iris.csv").write_text("".join(lines))
    with pytest.raises(D.DatasetHashMismatch) as e:
        D.load("iris", "1", data_dir=tmp_path)
    msg = str(e.value)
    assert "'iris' version '1'" in msg and D.VERSIONS[("iris", "1")] in msg and str(tmp_path) in msg
    assert e.value.actual != e.value.expected
    changed = D.load("iris", data_dir=tmp_path, verify=False)
    assert changed.hash == e.value.actual
    # only the changed item's hash differs
    orig = D.load("iris")
    diff = [a.id for a, b in zip(orig, changed) if a.hash != b.hash]
    assert diff == ["iris-00004"]
    with pytest.raises(D.DatasetHashMismatch):
        D.load("wine", expected_hash="0" * 64)
    # the same bytes elsewhere are the same data
    shutil.copy(D.sklearn_data_dir() / "wine_data.csv", tmp_path / "wine_data.csv")
    assert D.load("wine", data_dir=tmp_path).hash == D.VERSIONS[("wine", "1")]


def test_bad_names_versions_and_files(tmp_path):
    with pytest.raises(D.DatasetError, match="unknown dataset 'mnist'"):
        D.load("mnist")
    with pytest.raises(D.DatasetError, match="has no version '9'"):
        D.load("iris", "9")
    with pytest.raises(D.DatasetError, match="apt-get install python3-sklearn"):
        D.load("digits", data_dir=tmp_path)
    (tmp_path / "iris.csv").write_text("3,4,a,b,c\n1,2,3,4,0\n")
    with pytest.raises(D.DatasetError, match="header says 3 rows"):
        D.load("iris", data_dir=tmp_path)
    (tmp_path / "iris.csv").write_text("1,4,a,b,c\n1,2,x,4,0\n")
    with pytest.raises(D.DatasetError, match="iris.csv:2: 'x' is not a number"):
        D.load("iris", data_dir=tmp_path)
    with pytest.raises(D.DatasetError, match="apt-get install fortunes"):
        D.load("fortunes", data_dir=tmp_path)
