"""runlens.eval.models: real PyTorch models trained on CPU in seconds on real
data (digits, fortunes), their checkpoints, and the inference functions the
evaluation workers use. Training runs once per module (fixtures)."""

import hashlib
import json
import math

import numpy as np
import pytest
import torch

import runlens
from conftest import has_run_end
from runlens.eval import datasets as D
from runlens.eval import metrics as X
from runlens.eval import models as M

FORTUNE_FILES = ["fortunes", "cookie", "wisdom"]


@pytest.fixture(scope="module")
def digits():
    return D.load("digits").split(seed=0)


@pytest.fixture(scope="module")
def classifier(digits):
    return M.train_classifier(digits.train, digits.validation, epochs=30, seed=0)


@pytest.fixture(scope="module")
def text():
    return D.load("fortunes", files=FORTUNE_FILES).split(seed=0)


@pytest.fixture(scope="module")
def lm(text):
    return M.train_char_lm(text.train, text.validation, steps=400, seed=0)


def test_digits_classifier_is_well_above_chance(digits, classifier):
    _, yv = digits.validation.arrays()
    acc = X.accuracy(yv.tolist(), M.classify(classifier, digits.validation.items))
    assert acc > 0.9, acc  # chance is 0.1
    _, yt = digits.test.arrays()
    assert X.accuracy(yt.tolist(), M.classify(classifier, digits.test)) > 0.9
    assert X.f1(yt.tolist(), M.classify(classifier, digits.test), average="macro") > 0.85
    first, last = classifier.history[0], classifier.history[-1]
    assert last["loss"] < first["loss"] / 5 and last["val_accuracy"] > 0.9
    p = M.predict_proba(classifier, digits.test)
    assert p.shape == (len(digits.test), 10) and np.allclose(p.sum(1), 1, atol=1e-5)
    prov = classifier.config["train"]
    assert prov["dataset"] == "digits" and prov["dataset_hash"] == D.VERSIONS[("digits", "1")]
    assert prov["split"] == "train" and prov["split_hash"] == digits.train.hash


def test_checkpoint_round_trips_to_identical_predictions(tmp_path, digits, classifier):
    path = tmp_path / "digits-mlp.pt"
    digest = M.save_checkpoint(classifier, path, extra={"run_id": "r1"})
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    meta = json.loads((tmp_path / "digits-mlp.pt.json").read_text())
    assert meta["format"] == "runlens-checkpoint/1" and meta["kind"] == "mlp_classifier"
    assert meta["sha256"] == digest and meta["step"] == classifier.step and meta["extra"] == {"run_id": "r1"}
    assert torch.load(path)["net.0.weight"].shape == (128, 64)  # a plain state_dict
    loaded = M.load_checkpoint(path)
    assert M.classify(loaded, digits.test) == M.classify(classifier, digits.test)
    np.testing.assert_array_equal(M.predict_proba(loaded, digits.test), M.predict_proba(classifier, digits.test))
    # the same weights give the same bytes under another name
    assert M.save_checkpoint(loaded, tmp_path / "other-name.pt") == digest
    # a changed file is refused
    data = bytearray(path.read_bytes())
    data[-30] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(M.CheckpointError, match="SHA-256 is .* but its sidecar says"):
        M.load_checkpoint(path)
    with pytest.raises(M.CheckpointError, match="no sidecar"):
        M.load_checkpoint(tmp_path / "missing.pt")


def test_training_is_deterministic_per_seed_and_reports_through_the_sdk(collector, digits, classifier):
    em = runlens.Emitter(collector.endpoint, run_id="train-digits", rank=0, world_size=1)
    again = M.train_classifier(digits.train, digits.validation, epochs=30, seed=0, emitter=em)
    em.close(timeout=10)
    for a, b in zip(again.module.state_dict().values(), classifier.module.state_dict().values()):
        assert torch.equal(a, b)
    other = M.train_classifier(digits.train, digits.validation, epochs=2, seed=1)
    assert not torch.equal(other.module.net[0].weight, classifier.module.net[0].weight)
    collector.collect(until=has_run_end, timeout=20)
    steps, train = collector.of_type("step"), collector.of_type("train")
    assert len(steps) == len(train) == again.step
    assert all(e["forward_ms"] >= 0 and e["samples"] > 0 for e in steps)
    vals = [e for e in train if "val_loss" in e]
    assert len(vals) == 30  # one per epoch
    assert [e["loss"] for e in train] == pytest.approx([h["loss"] for h in again.history])


def test_char_lm_learns_real_text(text, lm):
    val = [h for h in lm.history if "val_loss" in h]
    assert len(val) == 4 and val[-1]["val_loss"] < val[0]["val_loss"]
    ll = M.loglikelihood(lm, text.test.items[:200])
    texts = text.test.texts()[:200]
    for r, t in zip(ll, texts):
        assert r.loglik < 0 and r.tokens == len(t) + 1 and r.bytes == len(t.encode()) and r.words == len(t.split())
    ppl = X.perplexity([(r.loglik, r.tokens) for r in ll])
    vocab = len(lm.vocab)
    assert ppl < 20 < vocab, ppl  # uniform over the vocabulary would be len(vocab), 98
    untrained = M.Model("char_lm", M.CharLM(vocab), lm.config)
    ppl0 = X.perplexity([(r.loglik, r.tokens) for r in M.loglikelihood(untrained, texts)])
    assert ppl < ppl0 / 3
    assert 0 < X.bits_per_byte([(r.loglik, r.bytes) for r in ll]) < 8
    # scoring a text alone or in a batch gives the same log-likelihood
    alone = M.loglikelihood(lm, texts[5:6])[0]
    assert alone.loglik == pytest.approx(ll[5].loglik, rel=1e-9)


def test_char_lm_checkpoint_and_completions(tmp_path, text, lm):
    path = tmp_path / "lm.pt"
    M.save_checkpoint(lm, path)
    loaded = M.load_checkpoint(path)
    texts = text.test.texts()[:50]
    assert [r.loglik for r in M.loglikelihood(loaded, texts)] == [r.loglik for r in M.loglikelihood(lm, texts)]
    prompts = [t[:16] for t in texts[:8]]
    refs = [t[16:56] for t in texts[:8]]
    greedy = M.complete(loaded, prompts, max_new_chars=40)
    assert greedy == M.complete(lm, prompts, max_new_chars=40)
    assert all(0 < len(g) <= 40 for g in greedy)
    s1 = M.complete(lm, prompts, max_new_chars=40, temperature=1.0, seed=1)
    assert s1 == M.complete(lm, prompts, max_new_chars=40, temperature=1.0, seed=1)
    assert s1 != M.complete(lm, prompts, max_new_chars=40, temperature=1.0, seed=2)
    # a prompt's sample does not depend on the others in the call
    assert M.complete(lm, prompts[3:4], max_new_chars=40, temperature=1.0, seed=1) == s1[3:4]
    assert M.complete(lm, prompts[:2], max_new_chars=40, stop=(" ",)) == [g[: g.index(" ") + 1] if " " in g else g for g in greedy[:2]]
    # generation metrics on a real model's outputs
    bleu = X.corpus_bleu(greedy, [refs])
    assert 0 <= bleu <= 100 and math.isfinite(bleu)
    r = X.rouge_mean(refs, greedy)
    assert 0 <= r["rouge1"]["fmeasure"] <= 1


def test_a_saved_checkpoint_reaches_the_registry_with_its_hash(collector, tmp_path, classifier):
    em = runlens.Emitter(collector.endpoint, run_id="train-digits", rank=0, world_size=1)
    path = tmp_path / f"step-{classifier.step}.pt"
    digest = M.save_checkpoint(classifier, path, extra={"run_id": em.run_id})
    assert em.checkpoint_saved(path, classifier.step)
    em.close(timeout=10)
    collector.collect(until=has_run_end, timeout=20)
    (ev,) = collector.of_type("checkpoint")
    assert ev["sha256"] == digest == json.loads(path.with_name(path.name + ".json").read_text())["sha256"]
    assert ev["checkpoint_id"] == f"train-digits/step-{classifier.step}" and ev["uri"] == path.as_uri()
