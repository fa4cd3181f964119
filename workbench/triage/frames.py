"""Python frames of a traceback, and the last one that belongs to the serving code.

`File "/vllm-workspace/vllm-ascend/vllm_ascend/quantization/w8a8.py", line 95, in apply` is a frame.
The frame that "called it" is the last one outside torch, torch_npu and the Python standard library:
torch's `_ops.py` and `module.py` only forward the call, so the frame above them (vllm-ascend's
`w8a8.py:95 apply` calling `torch_npu.npu_quant_matmul`) is the one to read. An error raised at a
synchronisation point ("ACL stream synchronize failed" at `.tolist()`) names where the host waited, not
where the kernel failed; the diagnosis says so for those codes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<function>[\w<>.]+)')
# Path pieces of code that forwards calls rather than makes them.
_LIBRARY_PARTS = (
    "/torch/",
    "/torch_npu/",
    "<frozen ",
    "/asyncio/",
    "/concurrent/",
    "/multiprocessing/",
    "/uvloop/",
    "/contextlib.py",
    "/threading.py",
    "/functools.py",
    "/runpy.py",
)
_STDLIB = re.compile(r"/lib/python3\.\d+/[^/]+\.py$")


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.short_path}:{self.line} in {self.function}"

    @property
    def short_path(self) -> str:
        """From the package root on: '/x/site-packages/vllm_ascend/worker/worker.py' -> 'vllm_ascend/worker/worker.py'."""
        for root in ("vllm_ascend/", "vllm/", "vllm_omni/", "torch_npu/", "torch/"):
            at = self.path.rfind("/" + root)
            if at >= 0:
                return self.path[at + 1 :]
        return self.path

    @property
    def is_library(self) -> bool:
        return any(part in self.path for part in _LIBRARY_PARTS) or bool(_STDLIB.search(self.path))


def find_frames(text: str) -> list[Frame]:
    """The frames one line names, in order (a paste that lost its line breaks holds several)."""
    return [Frame(m["path"], int(m["line"]), m["function"]) for m in _FRAME.finditer(text)]


def calling_frame(frames: tuple[Frame, ...]) -> Frame | None:
    """The last frame outside torch, torch_npu and the standard library (else the last frame)."""
    own = [f for f in frames if not f.is_library]
    return own[-1] if own else (frames[-1] if frames else None)
