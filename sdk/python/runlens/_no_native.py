"""Stands in for runlens._native when it is not built or cannot load.

The pure-Python subpackages (runlens.eval) need no native code, so
`import runlens` must not fail for them; the emitter and decode_batch do need
it, and raise ImportError with the original reason when used.
"""

error = None  # the ImportError that loading runlens._native raised

# Only what runlens/__init__.py reads at import time.
FIELDS = {"step": (), "train": ()}


def _missing(*_args, **_kwargs):
    raise ImportError(
        f"runlens._native is not available ({error}); build it with "
        "`cmake --build build --target runlens_python` and put build/python on sys.path"
    )


Emitter = _missing
decode_batch = _missing
decode_progress = _missing
