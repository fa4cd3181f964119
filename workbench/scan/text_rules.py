"""Rules for everything that is not Python: one pass over the lines of a file, with regular
expressions chosen by the file's kind (shell, configuration, requirements, Dockerfile, CMake, C/C++,
CUDA sources). Commented-out lines are skipped: a `# export CUDA_VISIBLE_DEVICES=0` ties nothing."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from workbench.scan import catalog
from workbench.scan.file_kinds import FileKind
from workbench.scan.findings import Hit
from workbench.scan.rule_ids import Rule

_EXCERPT_CHARS = 160
# A finder reads one line and yields (rule, detail, column of the match, 0-based).
Finder = Callable[[str], Iterator[tuple[Rule, str, int]]]

_OPTION_RE = re.compile(
    r"(?<![\w-])(?:--)?(attention[-_]backend|quantization|kv[-_]cache[-_]dtype|device|cudagraph[-_]mode"
    r"|cudagraph[-_]capture[-_]sizes|cuda[-_]graph[-_]sizes|max[-_]cudagraph[-_]capture[-_]size"
    r"|full[-_]cuda[-_]graph|max[-_]seq[-_]len[-_]to[-_]capture)[\"']?[ \t]*(?:=|:|,|[ \t])[ \t]*[\"']?([\w:.\-]*)"
)
_GPU_RUNTIME_RE = re.compile(
    r"--gpus\b|--runtime[= ]nvidia|\bruntime:\s*[\"']?nvidia|\bdriver:\s*[\"']?nvidia|nvidia-container-runtime"
    r"|nvidia-docker|capabilities:\s*\[\s*[\"']?gpu"
)
_SIMPLE: tuple[tuple[re.Pattern[str], Rule], ...] = (
    (re.compile(r"nvidia\.com/gpu(?![\w.-])"), Rule.K8S_GPU_RESOURCE),
    (re.compile(r"runtimeClassName:\s*[\"']?nvidia\b"), Rule.K8S_RUNTIME_CLASS),
    # MIG slices, HAMi's memory and core shares, time-sliced GPUs
    (re.compile(r"nvidia\.com/(?:mig-[\w.-]+|gpumem(?:-percentage)?|gpucores|gpu\.shared)"), Rule.K8S_GPU_SHARING),
    (re.compile(r"(?:docker\.io/)?lmcache/vllm-openai[\w.:-]*"), Rule.KV_CACHE_CUDA_IMAGE),
    # UCX's CUDA transports (cuda_copy, cuda_ipc, gdr_copy) and KV buffers placed on the GPU (NIXL, connectors)
    (
        re.compile(
            r"UCX_TLS\W+[^\n]*\b(?:cuda\w*|gdr_copy)|(?:nixlBufferDevice|kv_buffer_device)[\"']?\s*[:=]\s*[\"']?cuda",
            re.I,
        ),
        Rule.TRANSPORT_CUDA,
    ),
    (re.compile(r"\bnvidia-smi\b"), Rule.TOOL_NVIDIA_SMI),
    (re.compile(r"(?<![\w/.-])(?:\S*/)?nvcc\b"), Rule.NATIVE_CUDA_BUILD),
    (re.compile(r"/usr/local/cuda\b"), Rule.ENV_CUDA_TOOLKIT),
    (_GPU_RUNTIME_RE, Rule.DOCKER_GPU_RUNTIME),
    (re.compile(r"\+cu\d{2,3}\b|download\.pytorch\.org/whl/cu\d+|/whl/cu\d{2,3}\b"), Rule.DEPS_CUDA_WHEEL),
)
_PIP_INSTALL_RE = re.compile(r"\b(?:pip3?|uv\s+pip|conda|mamba)\s+install\s+(.*)")
_OPTIONS_WITH_VALUE = frozenset(
    {
        "-r",
        "-c",
        "-i",
        "-f",
        "-e",
        "--index-url",
        "--extra-index-url",
        "--find-links",
        "--requirement",
        "--constraint",
        "--editable",
        "--channel",
        "--target",
        "-t",
    }
)
_REQUIREMENT_NAME = re.compile(r"[\"']?([A-Za-z0-9][A-Za-z0-9._-]*)")
_FROM_RE = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)", re.I)
_KERNEL_RE = re.compile(r"__global__\s+(?:\w+\s+)*?(\w+)\s*\(")
_CUDA_DISPATCH_RE = re.compile(
    r"TORCH_LIBRARY_IMPL\s*\(\s*\w+\s*,\s*CUDA\s*,|DispatchKey::CUDA\b|torch::kCUDA\b|\bkCUDA\b"
)
_CUDA_API_RE = re.compile(
    r"#\s*include\s*[<\"](?:(?:cuda|cublas|cudnn|nccl|curand|cusparse|cufft|cusolver|nvrtc|nvToolsExt|nvtx3|thrust"
    r"|cub|cutlass|cute)\w*[/.]|ATen/cuda/|c10/cuda/|torch/csrc/cuda/|ATen/native/cuda/)"
    r"|\bcuda(?:Malloc|Free|Memcpy|Memset|Stream|Event|DeviceSynchronize|GetDevice|SetDevice|LaunchKernel)\w*\b"
    r"|\b(?:c10|at)::cuda::|<<<"
)
_CMAKE_CUDA_RE = re.compile(
    r"enable_language\s*\(\s*CUDA\b|\bLANGUAGES\b[^)]*\bCUDA\b|project\s*\([^)]*\bCUDA\b"
    r"|find_package\s*\(\s*(?:CUDA|CUDAToolkit)\b|CMAKE_CUDA_\w+|CUDA_ARCHITECTURES|\bCUDA::\w+|[\w/.-]+\.cuh?\b"
)


def _env_names(line: str) -> Iterator[tuple[Rule, str, int]]:
    for match in catalog.ENV_NAME_RE.finditer(line):
        rule = catalog.env_rule(match.group())
        if rule is not None:
            yield rule, match.group(), match.start()


def _options(line: str) -> Iterator[tuple[Rule, str, int]]:
    for match in _OPTION_RE.finditer(line):
        rule = catalog.option_rule(match.group(1), match.group(2) or None)
        if rule is not None:
            yield rule, f"{match.group(1)} {match.group(2)}".strip(), match.start()


def _simple(line: str) -> Iterator[tuple[Rule, str, int]]:
    for pattern, rule in _SIMPLE:
        match = pattern.search(line)
        if match is not None:
            yield rule, match.group().strip(), match.start()


def _images(line: str) -> Iterator[tuple[Rule, str, int]]:
    match = catalog.CUDA_IMAGE_RE.search(line)
    if match is not None:
        yield Rule.DOCKER_CUDA_BASE, match.group(), match.start()


def _from_line(line: str) -> Iterator[tuple[Rule, str, int]]:
    """FROM <image>: any image named after CUDA counts (e.g. mycorp/base:12.1-cuda), not only NVIDIA's."""
    match = _FROM_RE.match(line)
    if match is not None and (catalog.CUDA_IMAGE_RE.match(match.group(1)) or "cuda" in match.group(1).lower()):
        yield Rule.DOCKER_CUDA_BASE, match.group(1), match.start(1)


def _package_names(tokens: list[str]) -> Iterator[str]:
    """Requirement names among the arguments of one install command (options and their values skipped)."""
    skip_next = False
    for token in tokens:
        if skip_next or token == "\\":
            skip_next = False
            continue
        if token.startswith("-"):
            skip_next = token in _OPTIONS_WITH_VALUE
            continue
        match = _REQUIREMENT_NAME.match(token)
        if match:
            yield match.group(1)


def _pip_installs(line: str) -> Iterator[tuple[Rule, str, int]]:
    """Packages installed by `pip install` / `uv pip install` / `conda install` commands on the line."""
    offset = 0
    for command in re.split(r"&&|\|\||;", line):
        match = _PIP_INSTALL_RE.search(command)
        if match is not None:
            for name in _package_names(match.group(1).split()):
                rule = catalog.package_rule(name)
                if rule is not None:
                    yield rule, f"installs {name}", offset + match.start()
        offset += len(command) + 1


# Requirement names on a line of requirements.txt, pyproject.toml, a lock file, Pipfile or environment.yml.
_REQUIREMENT_PATTERNS = (
    re.compile(r"^\s*(?:-\s+)?[\"']?([A-Za-z0-9][A-Za-z0-9._-]*)"),  # 'flash-attn>=2', '- cudatoolkit', 'x = "^1"'
    re.compile(r"\bname\s*=\s*[\"']([A-Za-z0-9][A-Za-z0-9._-]*)"),  # lock files: name = "flash-attn"
    re.compile(r"[\[,]\s*[\"']([A-Za-z0-9][A-Za-z0-9._-]*)"),  # inline arrays: ["torch", "xformers>=0.0.23"]
)


def _requirements(line: str) -> Iterator[tuple[Rule, str, int]]:
    if line.lstrip().startswith(("-r", "-c", "-e", "--")):
        return  # options; their URLs are read by the +cu/whl/cu rule
    seen: set[str] = set()
    for pattern in _REQUIREMENT_PATTERNS:
        for match in pattern.finditer(line):
            name = match.group(1)
            rule = catalog.package_rule(name)
            if rule is not None and name not in seen:
                seen.add(name)
                yield rule, f"requires {name}", match.start(1)


def _kernels(line: str) -> Iterator[tuple[Rule, str, int]]:
    match = _KERNEL_RE.search(line)
    if match is not None:
        yield Rule.NATIVE_CUDA_SOURCE, f"kernel {match.group(1)}", match.start()


def _pattern(regex: re.Pattern[str], rule: Rule) -> Finder:
    def find(line: str) -> Iterator[tuple[Rule, str, int]]:
        for match in regex.finditer(line):
            yield rule, match.group().strip(), match.start()

    return find


_FINDERS: dict[FileKind, tuple[Finder, ...]] = {
    FileKind.SHELL: (_env_names, _options, _simple, _images, _pip_installs),
    FileKind.MAKEFILE: (
        _env_names,
        _options,
        _simple,
        _images,
        _pip_installs,
        _pattern(_CMAKE_CUDA_RE, Rule.NATIVE_CUDA_BUILD),
    ),
    FileKind.CONFIG: (_env_names, _options, _simple, _images),
    FileKind.TEMPLATE: (_env_names, _options, _simple, _images),
    FileKind.TERRAFORM: (_env_names, _options, _simple, _images),
    FileKind.DOCKERFILE: (_from_line, _env_names, _options, _simple, _images, _pip_installs),
    FileKind.REQUIREMENTS: (_requirements, _simple),
    FileKind.CMAKE: (_env_names, _simple, _pattern(_CMAKE_CUDA_RE, Rule.NATIVE_CUDA_BUILD)),
    FileKind.CPP: (_pattern(_CUDA_API_RE, Rule.NATIVE_CUDA_API), _pattern(_CUDA_DISPATCH_RE, Rule.EXT_CUDA_DISPATCH)),
    FileKind.CUDA_SOURCE: (_kernels, _pattern(_CUDA_DISPATCH_RE, Rule.EXT_CUDA_DISPATCH)),
}
_COMMENTS: dict[FileKind, tuple[str, ...]] = {
    FileKind.CPP: ("//", "/*", "*"),
    FileKind.CUDA_SOURCE: ("//", "/*", "*"),
}


def _excerpt(line: str, column: int) -> str:
    """The line, or a window around the match when the match is past what an excerpt shows."""
    text = line.strip()
    if len(text) <= _EXCERPT_CHARS:
        return text
    start = max(0, column - (len(line) - len(line.lstrip())) - 60)
    return ("…" if start else "") + text[start : start + _EXCERPT_CHARS]


def _hit(path: str, number: int, line: str, rule: Rule, detail: str, column: int) -> Hit:
    return Hit(path, number, column + 1, rule.value, _excerpt(line, column), detail)


def _whole_cuda_file(path: str, lines: list[str], hits: list[Hit]) -> list[Hit]:
    """A .cu/.cuh file is CUDA even without a __global__ kernel (device functions, headers): one hit for it."""
    if any(h.rule == Rule.NATIVE_CUDA_SOURCE.value for h in hits):
        return hits
    number, line = next(((n, text) for n, text in enumerate(lines, 1) if text.strip()), (1, ""))
    return [_hit(path, number, line, Rule.NATIVE_CUDA_SOURCE, "CUDA source without a __global__ kernel", 0), *hits]


def text_hits(path: str, kind: FileKind, text: str) -> list[Hit]:
    """Every hit in a non-Python text file of `kind`."""
    lines = text.splitlines()
    finders = _FINDERS.get(kind, ())
    comments = _COMMENTS.get(kind, ("#",))
    hits: list[Hit] = []
    for number, line in enumerate(lines, 1):
        stripped = line.lstrip()
        if not stripped or stripped.startswith(comments):
            continue
        for finder in finders:
            hits.extend(_hit(path, number, line, rule, detail, column) for rule, detail, column in finder(line))
    return _whole_cuda_file(path, lines, hits) if kind is FileKind.CUDA_SOURCE else hits
