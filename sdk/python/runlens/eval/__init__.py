"""runlens.eval: the model-quality side of runlens.

`runlens.eval.metrics` is the evaluation metrics library (BLEU, ROUGE, pass@k,
exact match, SQuAD, perplexity, classification, LLM-as-a-judge and safety
rates) that agrees with the reference implementations; see its docstring and
docs/evaluation.md.

Submodules imported on demand (`from runlens.eval import datasets`):
`datasets` (digits, iris, wine, breast cancer and fortunes from Debian
packages, with content hashes and seeded splits), `models` (small PyTorch
models, checkpoints and inference; needs torch), `code` (a code benchmark, a
sandboxed runner and a mutation sampler for pass@k).

The metrics library is pure Python (numpy for the array form of pass@k) and needs neither the
native module runlens._native nor a collector: with only sdk/python on
sys.path, `import runlens.eval.metrics` works (runlens/__init__.py then
stands a stub in for the native module, and only the emitter refuses to start).
"""

from . import metrics

__all__ = ["metrics"]
