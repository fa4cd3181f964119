"""One process-wide lock around first uses of transformers, for code that may run on several threads.

transformers resolves its top-level names lazily: the first `from transformers import X` (or
`transformers.X`, or a `from_pretrained` that picks a class by name) imports X's submodule at that
moment. Two threads doing that at once can see a name missing (ImportError or AttributeError). Seen
here twice: `sweep --parallel 2` loading its first two tokenizers at the same moment, and a sweep
building the embedded `tiny` model on a fresh machine while its background tokenizer import ran.
So the workbench's paths that can meet on threads — loading a tokenizer, building an embedded model —
hold this lock while they touch transformers. It is reentrant: a model build may load a tokenizer.
"""

from __future__ import annotations

import threading
from typing import Any

TRANSFORMERS_IMPORT = threading.RLock()


def auto_tokenizer() -> Any:
    """transformers.AutoTokenizer, imported under the lock (waits for an import another thread started)."""
    with TRANSFORMERS_IMPORT:
        from transformers import AutoTokenizer
    return AutoTokenizer
