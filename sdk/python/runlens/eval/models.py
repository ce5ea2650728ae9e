"""Small real PyTorch models for the evaluation tests and the demo, trained
on CPU in seconds on the datasets of runlens.eval.datasets.

- ``train_classifier``: an MLP classifier (digits, iris, wine, breast cancer).
- ``train_char_lm``: a character-level GRU language model (fortunes).
- ``save_checkpoint`` / ``load_checkpoint``: ``torch.save`` of the state_dict
  plus a JSON sidecar (``PATH.json``) with the configuration, the file's
  SHA-256 and provenance; loading checks the hash.
- Inference: ``classify`` / ``predict_proba``; ``loglikelihood`` (per-item
  log-likelihood and token, byte and word counts, for
  runlens.eval.metrics.perplexity and friends); ``complete`` (greedy or
  seeded sampled completions, for BLEU/ROUGE).

Training reports its train and validation loss through a runlens.Emitter
when one is given (one step scope per optimizer step), and works without.

Needs Debian's python3-torch (1.13) and python3-numpy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import os
import pathlib
import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch
from torch import nn

__all__ = [
    "Model",
    "MLPClassifier",
    "CharLM",
    "CheckpointError",
    "LogLikelihood",
    "train_classifier",
    "train_char_lm",
    "save_checkpoint",
    "load_checkpoint",
    "classify",
    "predict_proba",
    "loglikelihood",
    "complete",
]

CHECKPOINT_FORMAT = "runlens-checkpoint/1"

# Special tokens of the character LM's vocabulary.
PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded: missing sidecar, hash mismatch,
    unknown kind."""


class MLPClassifier(nn.Module):
    """Standardize (mean/scale buffers, saved with the weights), then
    Linear-ReLU layers and a Linear head giving logits."""

    def __init__(self, num_features: int, num_classes: int, hidden: Sequence[int] = (128,)):
        super().__init__()
        self.register_buffer("mean", torch.zeros(num_features))
        self.register_buffer("scale", torch.ones(num_features))
        layers: List[nn.Module] = []
        width = num_features
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net((x - self.mean) / self.scale)


class CharLM(nn.Module):
    """A character model over a fixed context window (Bengio et al. 2003):
    the embeddings of the previous ``context`` characters, concatenated,
    through a ReLU hidden layer to logits over the vocabulary. Before a text's
    first character the window holds <pad> ... <pad> <bos>."""

    def __init__(self, vocab_size: int, context: int = 12, embed: int = 16, hidden: int = 128):
        super().__init__()
        self.context = context
        self.embed = nn.Embedding(vocab_size, embed)
        self.net = nn.Sequential(nn.Linear(context * embed, hidden), nn.ReLU(), nn.Linear(hidden, vocab_size))

    def forward(self, windows):
        """windows: (N, context) token ids -> (N, vocab) logits for the next one."""
        return self.net(self.embed(windows).flatten(1))


@dataclasses.dataclass
class Model:
    """A trained (or loaded) model: ``kind`` ("mlp_classifier" or "char_lm"),
    the torch ``module`` (in eval mode after training), ``config`` (what
    rebuilds it, JSON-serialisable: hyperparameters, vocabulary, provenance),
    ``history`` (per-step losses) and ``step`` (optimizer steps taken)."""

    kind: str
    module: nn.Module
    config: Dict[str, Any]
    history: List[Dict[str, float]] = dataclasses.field(default_factory=list)
    step: int = 0

    @property
    def vocab(self) -> List[str]:
        return self.config["vocab"]


def _build(kind: str, config: Dict[str, Any]) -> nn.Module:
    if kind == "mlp_classifier":
        return MLPClassifier(config["num_features"], config["num_classes"], config["hidden"])
    if kind == "char_lm":
        return CharLM(len(config["vocab"]), config["context"], config["embed"], config["hidden"])
    raise CheckpointError(f"unknown model kind {kind!r}")


def _provenance(part) -> Dict[str, Any]:
    """Dataset provenance of a runlens.eval.datasets Subset/Dataset, if it is one."""
    info: Dict[str, Any] = {}
    parent = getattr(part, "parent", part)
    for key, attr in (("dataset", "name"), ("dataset_version", "version"), ("dataset_hash", "hash")):
        v = getattr(parent, attr, None)
        if isinstance(v, str):
            info[key] = v
    if getattr(part, "split", None) is not None:
        info["split"] = part.split
        info["split_hash"] = part.hash
    return info


class _NullScope:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def phase(self, name):
        return self

    def train(self, **f):
        pass

    def set(self, **f):
        pass


_NULL = _NullScope()


def _scope(emitter, step):
    return _NULL if emitter is None else emitter.step(step)


# --- classifier ------------------------------------------------------------------


def _xy(data):
    if hasattr(data, "arrays"):
        X, y = data.arrays()
    else:
        X, y = data
    return torch.as_tensor(np.asarray(X, dtype=np.float32)), torch.as_tensor(np.asarray(y, dtype=np.int64))


def train_classifier(
    train,
    validation=None,
    *,
    num_classes: Optional[int] = None,
    hidden: Sequence[int] = (128,),
    epochs: int = 40,
    batch_size: int = 64,
    lr: float = 3e-3,
    weight_decay: float = 1e-4,
    seed: int = 0,
    emitter=None,
    time_budget_s: Optional[float] = None,
) -> Model:
    """Trains an MLPClassifier with Adam on ``train`` (a datasets Subset or
    Dataset, or an (X, y) pair) and returns it in eval mode. The validation
    loss and accuracy are computed after each epoch. With ``emitter``, each
    optimizer step is a step scope (phases forward/backward/optimizer,
    ``samples``, ``loss``, ``lr``, and ``val_loss`` at epoch ends).
    Deterministic for a seed (the global torch RNG is left as it was)."""
    X, y = _xy(train)
    Xv, yv = _xy(validation) if validation is not None else (None, None)
    if num_classes is None:
        classes = getattr(getattr(train, "parent", train), "classes", None)
        num_classes = len(classes) if classes else int(y.max()) + 1
    config: Dict[str, Any] = {
        "num_features": int(X.shape[1]),
        "num_classes": int(num_classes),
        "hidden": [int(h) for h in hidden],
        "epochs": epochs,
        "batch_size": batch_size,
        "lr": lr,
        "weight_decay": weight_decay,
        "seed": seed,
        "train": _provenance(train),
    }
    if validation is not None:
        config["validation"] = _provenance(validation)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = MLPClassifier(config["num_features"], config["num_classes"], config["hidden"])
    with torch.no_grad():
        module.mean.copy_(X.mean(0))
        module.scale.copy_(X.std(0).clamp_min(1e-3))
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(module.parameters(), lr=lr, weight_decay=weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    model = Model("mlp_classifier", module, config)
    t0 = time.monotonic()
    step = 0
    for epoch in range(epochs):
        module.train()
        order = torch.randperm(len(X), generator=gen)
        nb = math.ceil(len(X) / batch_size)
        for b in range(nb):
            idx = order[b * batch_size:(b + 1) * batch_size]
            last = b == nb - 1
            with _scope(emitter, step) as s:
                with s.phase("forward"):
                    loss = loss_fn(module(X[idx]), y[idx])
                with s.phase("backward"):
                    opt.zero_grad()
                    loss.backward()
                with s.phase("optimizer"):
                    opt.step()
                record = {"step": step, "epoch": epoch, "loss": float(loss)}
                if last and Xv is not None:
                    module.eval()
                    with torch.no_grad():
                        logits = module(Xv)
                        record["val_loss"] = float(loss_fn(logits, yv))
                        record["val_accuracy"] = float((logits.argmax(1) == yv).float().mean())
                    s.train(val_loss=record["val_loss"])
                    module.train()
                s.train(loss=record["loss"], lr=lr)
                s.set(samples=len(idx))
            model.history.append(record)
            step += 1
        if time_budget_s is not None and time.monotonic() - t0 > time_budget_s:
            break
    module.eval()
    model.step = step
    return model


def predict_proba(model: Model, data) -> np.ndarray:
    """Class probabilities (n, num_classes) for items (Subset/Dataset, list of
    datasets Items, or an array of features)."""
    if isinstance(data, (list, tuple)) and data and hasattr(data[0], "input"):
        X = np.asarray([it.input for it in data], dtype=np.float32)
    elif hasattr(data, "arrays"):
        X = data.arrays()[0]
    else:
        X = np.asarray(data, dtype=np.float32)
    with torch.no_grad():
        p = torch.softmax(model.module(torch.as_tensor(X, dtype=torch.float32)), dim=1)
    return p.numpy()


def classify(model: Model, data) -> List[int]:
    """Predicted labels (argmax of predict_proba) for items or features."""
    return [int(i) for i in predict_proba(model, data).argmax(1)]


# --- character language model ---------------------------------------------------


def _vocab(texts: Sequence[str]) -> List[str]:
    return SPECIALS + sorted(set("".join(texts)))


def _encoder(vocab: Sequence[str]):
    index = {ch: i for i, ch in enumerate(vocab) if i >= len(SPECIALS)}
    return lambda text: [index.get(ch, UNK) for ch in text]


def _padded(toks: List[int], context: int) -> List[int]:
    """<pad> * (context - 1), <bos>, the text's tokens, <eos>: position p >= context
    is predicted from positions p - context .. p - 1."""
    return [PAD] * (context - 1) + [BOS] + toks + [EOS]


def train_char_lm(
    train_texts,
    validation_texts=None,
    *,
    context: int = 12,
    embed: int = 16,
    hidden: int = 128,
    batch_size: int = 128,
    steps: int = 400,
    lr: float = 1e-2,
    seed: int = 0,
    eval_every: int = 100,
    eval_items: int = 100,
    emitter=None,
    time_budget_s: Optional[float] = None,
) -> Model:
    """Trains a CharLM with Adam on ``batch_size`` positions drawn at random
    from the training texts (texts: a datasets Subset or a list of strings)
    per step; each text is framed as ``<pad>.. <bos> text <eos>``, so training
    and scoring see the same windows. The vocabulary is the training texts'
    characters (others map to <unk>). Every ``eval_every`` steps and at the
    end, the per-token validation loss over the first ``eval_items``
    validation texts is recorded (``val_loss``; also sent through
    ``emitter``, which gets one step scope per optimizer step with ``tokens``,
    ``loss`` and ``lr``). Stops after ``steps`` or ``time_budget_s``.
    Deterministic for a seed."""
    texts = train_texts.texts() if hasattr(train_texts, "texts") else list(train_texts)
    val = None
    if validation_texts is not None:
        val = validation_texts.texts() if hasattr(validation_texts, "texts") else list(validation_texts)
        val = val[:eval_items]
    vocab = _vocab(texts)
    enc = _encoder(vocab)
    stream: List[int] = []
    positions: List[int] = []
    for t in texts:
        base = len(stream)
        seq = _padded(enc(t), context)
        stream.extend(seq)
        positions.extend(range(base + context, base + len(seq)))
    if not positions:
        raise ValueError("train_char_lm: no training text")
    data = torch.tensor(stream, dtype=torch.long)
    targets_at = torch.tensor(positions, dtype=torch.long)
    config: Dict[str, Any] = {
        "vocab": vocab,
        "context": context,
        "embed": embed,
        "hidden": hidden,
        "batch_size": batch_size,
        "steps": steps,
        "lr": lr,
        "seed": seed,
        "train": _provenance(train_texts),
        "train_tokens": len(positions),
    }
    if validation_texts is not None:
        config["validation"] = _provenance(validation_texts)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = CharLM(len(vocab), context, embed, hidden)
    model = Model("char_lm", module, config)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(module.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    offsets = torch.arange(-context, 0)
    t0 = time.monotonic()
    step = 0
    while step < steps:
        module.train()
        at = targets_at[torch.randint(0, len(targets_at), (batch_size,), generator=gen)]
        windows, targets = data[at[:, None] + offsets], data[at]
        out_of_time = time_budget_s is not None and time.monotonic() - t0 > time_budget_s
        final = step == steps - 1 or out_of_time
        with _scope(emitter, step) as s:
            with s.phase("forward"):
                loss = loss_fn(module(windows), targets)
            with s.phase("backward"):
                opt.zero_grad()
                loss.backward()
            with s.phase("optimizer"):
                opt.step()
            record = {"step": step, "loss": float(loss)}
            if val and (final or (eval_every and step % eval_every == eval_every - 1)):
                ll = loglikelihood(model, val)
                record["val_loss"] = -sum(r.loglik for r in ll) / sum(r.tokens for r in ll)
                s.train(val_loss=record["val_loss"])
            s.train(loss=record["loss"], lr=lr)
            s.set(tokens=batch_size, samples=batch_size, seq_len=context)
        model.history.append(record)
        step += 1
        if out_of_time:
            break
    module.eval()
    model.step = step
    return model


@dataclasses.dataclass(frozen=True)
class LogLikelihood:
    """One text's log-likelihood in nats under the model: the sum over its
    characters and the end-of-text token (``tokens`` = characters + 1), with
    the text's UTF-8 ``bytes`` and whitespace-separated ``words`` for
    bits_per_byte and word_perplexity."""

    loglik: float
    tokens: int
    bytes: int
    words: int


def loglikelihood(model: Model, texts, batch_tokens: int = 16384) -> List[LogLikelihood]:
    """Per-text log-likelihoods, in the order given (each text scored on its
    own, from <pad>.. <bos>). texts: strings, datasets Items or a Subset."""
    if hasattr(texts, "texts"):
        texts = texts.texts()
    texts = [t.input if hasattr(t, "input") else t for t in texts]
    enc = _encoder(model.vocab)
    module = model.module
    context = module.context
    was_training = module.training
    module.eval()
    result: List[LogLikelihood] = []
    offsets = torch.arange(-context, 0)
    with torch.no_grad():
        pending: List[int] = []  # stream of the texts of this batch
        owners: List[int] = []  # per predicted position: its text
        at: List[int] = []

        def flush():
            if not at:
                return
            data = torch.tensor(pending, dtype=torch.long)
            where = torch.tensor(at, dtype=torch.long)
            logp = torch.log_softmax(module(data[where[:, None] + offsets]).double(), dim=1)
            picked = logp.gather(1, data[where][:, None])[:, 0]
            sums = torch.zeros(len(texts), dtype=torch.float64).index_add_(0, torch.tensor(owners), picked)
            for i in sorted(set(owners)):
                result[i] = dataclasses.replace(result[i], loglik=float(sums[i]))
            pending.clear(), owners.clear(), at.clear()

        for i, t in enumerate(texts):
            toks = enc(t)
            result.append(LogLikelihood(0.0, len(toks) + 1, len(t.encode("utf-8")), len(t.split())))
            base = len(pending)
            seq = _padded(toks, context)
            pending.extend(seq)
            at.extend(range(base + context, base + len(seq)))
            owners.extend([i] * (len(seq) - context))
            if len(at) >= batch_tokens:
                flush()
        flush()
    if was_training:
        module.train()
    return result


def complete(
    model: Model,
    prompts: Sequence[str],
    *,
    max_new_chars: int = 40,
    temperature: float = 0.0,
    top_k: Optional[int] = None,
    seed: int = 0,
    stop: Sequence[str] = (),
) -> List[str]:
    """Continues each prompt by up to ``max_new_chars`` characters, stopping at
    the end-of-text token or after a ``stop`` string (which is kept).
    ``temperature`` 0 is greedy; above 0 samples from softmax(logits / T)
    (over the ``top_k`` most likely when given) with a torch.Generator seeded
    from SHA-256(seed, prompt), so a prompt's completion does not depend on
    the batch or shard it is in. Special tokens other than <eos> are never
    produced."""
    enc = _encoder(model.vocab)
    vocab = model.vocab
    module = model.module
    context = module.context
    module.eval()
    outputs = []
    with torch.no_grad():
        for prompt in prompts:
            gen = None
            if temperature > 0:
                s = int.from_bytes(hashlib.sha256(f"{seed}\0{prompt}".encode("utf-8")).digest()[:8], "little")
                gen = torch.Generator().manual_seed(s & ((1 << 63) - 1))
            seq = _padded(enc(prompt), context)[:-1]  # without the <eos>
            out: List[str] = []
            for _ in range(max_new_chars):
                scores = module(torch.tensor([seq[-context:]]))[0].double()
                scores[[PAD, BOS, UNK]] = -math.inf
                if temperature <= 0:
                    nxt = int(scores.argmax())
                else:
                    scores = scores / temperature
                    if top_k is not None and top_k < len(scores):
                        kth = torch.topk(scores, top_k).values[-1]
                        scores = scores.masked_fill(scores < kth, -math.inf)
                    nxt = int(torch.multinomial(torch.softmax(scores, 0), 1, generator=gen))
                if nxt == EOS:
                    break
                out.append(vocab[nxt])
                seq.append(nxt)
                if stop and any("".join(out).endswith(x) for x in stop if x):
                    break
            outputs.append("".join(out))
    return outputs


# --- checkpoints -----------------------------------------------------------------


def _sidecar(path: pathlib.Path) -> pathlib.Path:
    return path.with_name(path.name + ".json")


def save_checkpoint(model: Model, path, *, extra: Optional[Dict[str, Any]] = None) -> str:
    """Writes ``path`` (torch.save of the state_dict; the same weights give
    the same bytes, whatever the file name) and ``PATH.json`` (format, kind,
    config, step, history's last record, sha256 and size of ``path``, torch
    version, ``extra``). Both are written to a temporary name and renamed.
    Returns the SHA-256 of ``path``."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()  # the archive's inner name comes from the file name; a buffer's is fixed
    torch.save({k: v.detach().cpu() for k, v in model.module.state_dict().items()}, buf)
    data = buf.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    meta = {
        "format": CHECKPOINT_FORMAT,
        "kind": model.kind,
        "config": model.config,
        "step": model.step,
        "last": model.history[-1] if model.history else None,
        "sha256": digest,
        "size_bytes": len(data),
        "torch_version": torch.__version__,
        "extra": extra or {},
    }
    for target, payload in ((path, data), (_sidecar(path), (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode())):
        tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
        tmp.write_bytes(payload)
        os.replace(tmp, target)
    return digest


def load_checkpoint(path, *, verify: bool = True) -> Model:
    """Loads a checkpoint written by save_checkpoint (on CPU, in eval mode).
    With ``verify``, the file's SHA-256 must be the sidecar's: a changed file
    raises CheckpointError."""
    path = pathlib.Path(path)
    try:
        meta = json.loads(_sidecar(path).read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no sidecar {_sidecar(path).name} (written by save_checkpoint)") from None
    if meta.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{_sidecar(path)}: format {meta.get('format')!r}, expected {CHECKPOINT_FORMAT!r}")
    data = path.read_bytes()
    if verify:
        digest = hashlib.sha256(data).hexdigest()
        if digest != meta["sha256"]:
            raise CheckpointError(f"{path}: SHA-256 is {digest}, but its sidecar says {meta['sha256']}: the file changed")
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except TypeError:  # torch before 1.13
        state = torch.load(io.BytesIO(data), map_location="cpu")
    module = _build(meta["kind"], meta["config"])
    module.load_state_dict(state, strict=True)
    module.eval()
    history = [meta["last"]] if meta.get("last") else []
    return Model(meta["kind"], module, meta["config"], history, int(meta.get("step") or 0))
