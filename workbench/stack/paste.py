"""The stack a pasted environment report states, however it was pasted (docs/METHOD.md §2, §14).

Bug reports carry versions in every shape: vllm-ascend's `collect_env.py` output (whole, or crashed
halfway after the npu-smi table and the CANN info), `npu-smi info` (often cut off mid-table, or without
its header), `ascend_toolkit_install.info` / `version.info`, `pip list` / `pip freeze` / `pip show`,
`env` dumps whose paths carry a version (`/usr/local/Ascend/cann-8.5.1`), and free text: "CANN: 8.0.0",
"驱动：25.5.0", "vllm-ascend ==0.7.3rc1", a markdown table, an image tag `vllm-ascend:v0.19.1rc1-310p`,
a package file name `driver_25.5.2_linux-aarch64`. Pastes come markdown-wrapped, inside `<details>`, with
lines a browser wrapped or joined, and with Chinese full-width colons.

`read_paste` reads all of them at once and keeps, per version key, what the most structured source says
(a collect_env field over a pip line over a free-text line). Keys are the stack fingerprint's names
(`torch`, `torch_npu`, `vllm`, `vllm_ascend`, `transformers`, `python`, `cann_toolkit`, `driver`,
`firmware`, `chip`, `triton_ascend`); `missing` names what a triage would want and the paste does not say.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

# What a triage wants to know first (docs/METHOD.md §2: the versions that move in lock-step).
WANTED = ("torch", "torch_npu", "vllm", "vllm_ascend", "cann_toolkit", "driver")

# A version as packages and Ascend components write it: 2.5.1, 0.7.3rc1, 2.5.1.post1, 2.10.0+cpu,
# 0.9.1+empty, 8.1.RC1.alpha001, 8.5.0.B100, 25.0.rc1.1, 9.1.0-beta.1, 0.11.0rc1.dev, 3.2.0.dev20260105.
VERSION = r"v?\d+(?:\.\d+)*(?:(?:[.\-]?(?:rc|RC|post|dev|alpha|beta|B|T)\d*)|(?:\.\d+))*(?:\+[A-Za-z0-9.]+)?"
_VERSION = re.compile(VERSION)
_CHIP_NUMBER = r"(?:910|310|950)[0-9A-Za-z]*(?:-\d)?"  # 910B3, 310P, 950PR, 910A-2
_CHIP = re.compile(r"(?i)\b(?:ascend[\s_-]?)?(" + _CHIP_NUMBER + r"|Ascend910(?:_\d+)?)\b")

# Names people give each component -> the key. Matched on the normalised name (lowercase, [-_ ] removed).
ALIASES = {
    "torch": ("torch", "pytorch", "pytorchversion"),
    "torch_npu": ("torchnpu", "ptorchnpu"),
    "vllm": ("vllm", "vlllm", "vllmversion"),
    "vllm_ascend": ("vllmascend", "vllmascendversion"),
    "transformers": ("transformers",),
    "python": ("python", "pythonversion"),
    # 'toolkit' alone and the typo 'dirver': a pip-style list of the Ascend stack (vllm-ascend#8049)
    "cann_toolkit": ("cann", "cannversion", "cann包版本", "cann版本", "canntoolkit", "ascendtoolkit", "toolkit"),
    "driver": ("driver", "dirver", "驱动", "驱动版本", "hdk", "ascendhdk", "npudriver", "npusmi"),
    "firmware": ("firmware", "固件", "固件版本"),
    "triton_ascend": ("tritonascend",),
    "chip": ("npu", "chip", "chips", "硬件", "hardware", "芯片", "device", "soc", "gpu", "accelerator", "显卡"),
}
_KEY_OF = {alias: key for key, aliases in ALIASES.items() for alias in aliases}
# Sources, most structured first: a later source never overwrites an earlier one's key.
RANKS = ("collect_env", "pip", "npu_smi", "install_info", "image", "summary", "paths")


@dataclass(frozen=True)
class PastedStack:
    versions: dict[str, str]  # key -> version as written (rc spacing and a leading 'v' removed)
    sources: dict[str, str]  # key -> which kind of text it came from
    missing: tuple[str, ...]  # of WANTED, what the paste does not state

    def describe(self) -> str:
        said = ", ".join(f"{k} {v}" for k, v in self.versions.items()) or "no versions"
        return said + (f"; not stated: {', '.join(self.missing)}" if self.missing else "")


def clean(text: str) -> list[str]:
    """The paste's lines without markdown quotes, fences, HTML tags and list bullets, with a page's no-break
    spaces and a Chinese input method's full-width colons as their plain forms."""
    lines = []
    plain = text.replace("\r", "").replace("\u00a0", " ").replace("\uff1a", ":")
    for raw in plain.splitlines():
        line = re.sub(r"^\s*(?:>\s?)+", "", raw)  # a reply quoting the report ('> ', '> > ', '>> ')
        line = re.sub(r"</?(details|summary|pre|code|br)[^>]*>", " ", line)
        line = line.replace("```text", " ").replace("```", " ").replace("`", "")
        line = re.sub(r"^\s*(?:[-*•]|\d+\.)\s+", "", line)
        lines.append(line.rstrip())
    return _rejoined(lines)


_LEADING_VERSION = re.compile(r"^\s*v?\d+\.\d")


def _wrapped_before_value(line: str) -> bool:
    """A line a browser wrapped between a name and its value: it ends in a key's colon ('npu-smi 25.2.0
    Version:') or in a component's name ('... CANN')."""
    text = line.rstrip()
    if text.endswith(":"):
        return True
    last = re.split(r"[\s,，;；(（]+", text)[-1] if text else ""
    latin = re.search(r"[A-Za-z][\w-]*$", last)  # Chinese prose runs into the name: '物理机部署CANN'
    return any(word and _key_of(word) is not None for word in (last, latin.group(0) if latin else ""))


def _rejoined(lines: list[str]) -> list[str]:
    """`lines` with each value a wrap moved to the next line put back after its name (the next line starts with
    a version, the line before ends in a name or a colon)."""
    out: list[str] = []
    for line in lines:
        if out and _LEADING_VERSION.match(line) and _wrapped_before_value(out[-1]):
            out[-1] = f"{out[-1]} {line.strip()}"
        else:
            out.append(line)
    return out


def _norm_name(name: str) -> str:
    return re.sub(r"[\s_\-:：.]+", "", name.strip().lower())


# words people add after a component's name: 'Transformers version', 'NPU type', 'CANN包版本'
_NAME_SUFFIXES = ("version", "versions", "type", "model", "版本", "型号")


def _key_of(name: str) -> str | None:
    """The version key a name stands for, with or without a trailing 'version' / 'type'."""
    norm = _norm_name(name)
    if norm in _KEY_OF:
        return _KEY_OF[norm]
    stem = next((norm[: -len(s)] for s in _NAME_SUFFIXES if norm.endswith(s) and len(norm) > len(s)), None)
    if stem and stem in _KEY_OF:
        return _KEY_OF[stem]
    # Chinese runs words together ('硬件场景', hardware setting): a name that starts with a Chinese alias
    return next((key for alias, key in _KEY_OF.items() if not alias.isascii() and norm.startswith(alias)), None)


def _version(text: str) -> str | None:
    """The first version in `text`, normalised: 'v0.7.3 rc1' -> '0.7.3rc1', '8.3rc2' kept."""
    joined = re.sub(r"(\d)\s+(rc\d+)", r"\1\2", text, flags=re.I)
    match = _VERSION.search(joined)
    return match.group(0).lstrip("vV") if match and re.search(r"\d\.\d|\d{2,}", match.group(0)) else None


def _chip(text: str) -> str | None:
    match = _CHIP.search(text)
    return match.group(1) if match else None


def _value_for(key: str, text: str) -> str | None:
    return _chip(text) if key == "chip" else _version(text)


# -- the sources ------------------------------------------------------------------------------------------


def _collect_env(lines: list[str]) -> Iterator[tuple[str, str]]:
    """collect_env's own fields ('PyTorch version: 2.5.1', upstream's 'PyTorch version : 2.7.1+cpu'), also
    when a browser joined them onto one line."""
    fields = {
        "torch": r"PyTorch version",
        "python": r"Python version",
        "vllm": r"vLLM Version",
        "vllm_ascend": r"vLLM Ascend Version",
    }
    for line in lines:
        for key, label in fields.items():
            match = re.search(rf"{label}\s*:\s*([^\s]+)", line)
            if match and _version(match.group(1)):
                yield key, _version(match.group(1))


_PIP_LINE = re.compile(
    r"^(?:\[(?:pip3?|conda)\]\s*)?([A-Za-z][\w.-]*)\s*(?:==|\s{2,}|\s+\(|\s+in\s.*\()\s*(" + VERSION + r")"
)
_PIP_IN = re.compile(r"^([A-Za-z][\w.-]*) in \S+ \((" + VERSION + r")\)")


def _pip(lines: list[str]) -> Iterator[tuple[str, str]]:
    """[pip3] torch-npu==2.5.1, freeze lines, `pip list` columns, `pip show` Name/Version pairs, and pip's
    'torch-npu in /path (2.4.0.post2)'."""
    shown: str | None = None
    for line in lines:
        text = line.strip()
        show_name = re.match(r"^Name:\s*(\S+)", text)
        if show_name:
            shown = show_name.group(1)
            continue
        show_version = re.match(r"^Version:\s*(\S+)", text)
        if show_version and shown:
            key = _key_of(shown)
            if key:
                yield key, _version(show_version.group(1)) or show_version.group(1)
            shown = None
            continue
        match = _PIP_IN.match(text) or _PIP_LINE.match(text)
        if match:
            key = _key_of(match.group(1))
            if key and key != "chip":
                yield key, match.group(2).lstrip("v")


_NPU_SMI_HEADER = re.compile(r"npu-smi\s+(\S+)\s+Version:\s*(\S+)")
_CHIP_ROW = re.compile(r"^\|\s*\d+\s+([A-Za-z]*\d[\w-]*)\s*\|\s*(?:OK|Warning|Alarm|Critical|UNKNOWN)", re.I)


def _npu_smi(lines: list[str]) -> Iterator[tuple[str, str]]:
    """The header's driver version and the chip name of the table's rows, from any fragment of the table
    (tabs, missing separators, a table cut off mid-row)."""
    for line in lines:
        header = _NPU_SMI_HEADER.search(line)
        if header:
            yield "driver", header.group(2)
        row = _CHIP_ROW.match(line.replace("\t", " ").strip())
        if row:
            yield "chip", row.group(1)


def _install_info(lines: list[str]) -> Iterator[tuple[str, str]]:
    """ascend_toolkit_install.info (package_name=Ascend-cann-toolkit, version=...), version.cfg, a driver's or
    firmware's version.info after a `cat .../driver/version.info`."""
    package = None
    for line in lines:
        text = line.strip()
        name = re.match(r"^package_name\s*=\s*(\S+)", text)
        if name:
            package = name.group(1).lower()
            continue
        value = re.match(r"^[Vv]ersion\s*=\s*(\S+)", text)
        if value and package and "toolkit" in package:
            yield "cann_toolkit", value.group(1)
        running = re.match(r"^toolkit_running_version=\[[^:\]]+:([^\]]+)\]", text)
        if running:
            yield "cann_toolkit", running.group(1)
        # a CANN component's version.info: Version= is the inner build (7.8.T5.0.B028), version_dir= the
        # release name people state (8.2.RC1), as workbench.stack.infofiles reads an installed one
        release = re.match(r"^version_dir\s*=\s*(\S+)", text)
        if release:
            yield "cann_toolkit", release.group(1)


_IMAGE = re.compile(r"vllm-ascend:v?(" + VERSION + r")(?=[-\s\u4e00-\u9fff]|$)")
# '090rc2': a release written without its dots (0.9.0rc2), as people shorten an image tag
_DOTLESS = re.compile(r"(\d)(\d)(\d)((?:rc|post)\d+)?")


def _image(lines: list[str]) -> Iterator[tuple[str, str]]:
    """An image tag names the release it ships: quay.io/ascend/vllm-ascend:v0.19.1rc1-openeuler."""
    for line in lines:
        for match in _IMAGE.finditer(line):
            tag = match.group(1).lstrip("v")
            dotless = _DOTLESS.fullmatch(tag)
            yield "vllm_ascend", ".".join(dotless.groups()[:3]) + (dotless.group(4) or "") if dotless else tag


def _summary(lines: list[str]) -> Iterator[tuple[str, str]]:
    """Free text: 'CANN: 8.0.0', '驱动：25.5.0', 'vllm-ascend ==0.7.3rc1', '| vLLM | 0.23.0 |', 'torch 2.5.1',
    several on one line ('vllm-ascend 0.9.1-dev torch 2.5.1 hdk 25.1.rc2 cann 8.2.rc1')."""
    for line in lines:
        text = line.strip().strip("|").strip()
        if _CHIP.fullmatch(text):  # a line that is only the chip's name ('310p', 'Ascend 910B3')
            yield "chip", _chip(text) or text
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.count("|") >= 2 else []
        if len(cells) >= 2:
            key = _key_of(cells[0])
            value = _value_for(key, cells[1]) if key else None
            if key and value:
                yield key, value
            continue
        for name, rest in _name_value_pairs(text):
            key = _key_of(name)
            value = _value_for(key, rest) if key else None
            if key and value:
                yield key, value
        named = _NAMED_CHIP.search(text)
        if named:
            yield "chip", _chip(named.group(0)) or named.group(1)
        driver_file = re.search(r"driver_(" + VERSION + r")_linux", text)
        if driver_file:
            yield "driver", driver_file.group(1)
        firmware_file = re.search(r"firmware_(" + VERSION + r")", text)
        if firmware_file:
            yield "firmware", firmware_file.group(1)
        # CANN's installer is named for the toolkit it installs, Ascend-cann-toolkit_8.1.RC1_linux-aarch64.run
        # (vllm-ascend's docs/source/installation.md); the kernels / ops packages beside it are not the toolkit
        toolkit_file = re.search(r"(?i)cann-toolkit_(" + VERSION + r")_linux", text)
        if toolkit_file:
            yield "cann_toolkit", toolkit_file.group(1)


_PAIR = re.compile(
    r"(?P<name>[A-Za-z\u4e00-\u9fff][\w\u4e00-\u9fff-]*(?: [A-Za-z]+)?)\s*(?:[:：=]+|==|\s)\s*\[?(?P<value>v?\d[^\s,，;；)\]|\u4e00-\u9fff]*(?: rc\d+)?)"
)


# 'on Ascend 910B3 with ...', '在昇腾910B3上': prose that names the chip after the word Ascend (or 昇腾, its
# Chinese name); the word is what makes a number in running text a chip, so a bare '910' is not read here.
# Chinese letters count as word characters, so the edges are looked at explicitly instead of with \b.
# Chinese runs a few words in between without spaces ('昇腾环境910B4', Ascend environment 910B4, #6018).
_NAMED_CHIP = re.compile(
    r"(?i)(?<![A-Za-z0-9])(?:ascend|昇腾|升腾)(?:[\s_-]?|[\u4e00-\u9fff]{1,4})"
    r"(" + _CHIP_NUMBER + r")(?![A-Za-z0-9])"
)

_JOINER = r"\s*(?:&|和|\band\b)\s*"
_SHARED = re.compile(
    r"^([\w.-]+?(?:" + _JOINER + r"[\w.-]+?)+)\s*(?:版本|[Vv]ersions?)?\s*(?:==|[:：=]|\s)\s*(" + VERSION + ")"
)
# a component's name run into its version: 'cann8.1.rc1', 'python3.10', 'CANN8.2RC' after Chinese prose, and
# a package name joined to its version by a hyphen as wheels and sdists are named ('vllm-ascend-0.14.0rc2')
_GLUED = re.compile(
    r"(?i)(?<![A-Za-z0-9_/.-])(?:(cann|hdk|python)|(torch_npu|torch-npu|torch|vllm-ascend|vllm_ascend|vllm)-?)(?=\d)"
)


def _name_value_pairs(text: str) -> Iterator[tuple[str, str]]:
    text = _GLUED.sub(lambda m: (m.group(1) or m.group(2)) + " ", text)
    # 'torch & torch-npu==2.5.1', 'vllm和vllm-ascend版本 v0.11.0': one value for every name joined by '&' / '和'
    shared = _SHARED.match(text)
    if shared:
        for name in re.split(_JOINER, shared.group(1)):
            yield name, shared.group(2)
    for match in _PAIR.finditer(text):
        yield _known_tail(match.group("name")), match.group("value")
    # the version before the name: '安装了2.7.1版本的torch_npu' (version 2.7.1 of torch_npu, Ascend/pytorch#99)
    for match in _VERSION_OF.finditer(text):
        yield match.group("name"), match.group("value")
    # a label that goes on after 'version': 'vLLM version shown in logs: 0.18.0' (vllm-ascend#8370)
    label = _LONG_LABEL.match(text)
    if label:
        yield label.group("name"), label.group("value")
    # '<name>版本<version>' without a separator, or with 是 ('is') or a few Chinese words between:
    # 'torch版本2.1' (Ascend/pytorch#24), '驱动版本也核对无误7.0.RC1' (the driver version, checked: ..., #7)
    for match in _NAME_VERSION_CN.finditer(text):
        yield _cjk_alias_tail(match.group("name")), match.group("value")
    # 'NPU: 910B4', '硬件：910B3', 'Hardware | Ascend 910B3 ×8': a chip is a name, not a version
    chip = re.match(
        r"^(?:[-*]\s+)?(?P<name>[A-Za-z\u4e00-\u9fff][A-Za-z \u4e00-\u9fff]*?)\s*[:：]\s*(?P<value>.*(?:910|310|950).*)$",
        text,
    )
    if chip:
        yield chip.group("name"), chip.group("value")


_VERSION_OF = re.compile(
    r"(?i)(?<![A-Za-z0-9.])(?P<value>" + VERSION + r")\s*版本的?\s*(?P<name>[A-Za-z][A-Za-z0-9_-]*)"
)
_LONG_LABEL = re.compile(r"^(?P<name>[A-Za-z][\w-]*)\s+(?:version|版本)\b[^:：]*[:：]\s*(?P<value>v?\d\S*)", re.I)
# the name is a Latin word or a run of Chinese letters; at most six Chinese letters stand between 版本 and the
# version, so a number further on in the sentence is not taken for it
_NAME_VERSION_CN = re.compile(
    r"(?P<name>[A-Za-z][A-Za-z0-9_-]*|[\u4e00-\u9fff]+)版本号?[\u4e00-\u9fff]{0,6}(?P<value>" + VERSION + r")"
)


def _cjk_alias_tail(name: str) -> str:
    """'安装的驱动' -> '驱动': a run of Chinese letters ends with the component's name (Latin names are kept)."""
    if name.isascii():
        return name
    return next((alias for alias in _KEY_OF if not alias.isascii() and name.endswith(alias)), name)


def _known_tail(name: str) -> str:
    """'物理机部署CANN' -> 'CANN': words run together in Chinese prose end with the component's name."""
    if _key_of(name) is not None:
        return name
    # the Latin word after the last Chinese letter: 'conda环境并安装torch' -> 'torch' (vllm-ascend#6134)
    tail = re.search(r"[A-Za-z][A-Za-z0-9_-]*$", name)
    return tail.group(0) if tail and _key_of(tail.group(0)) is not None else name


_VERSIONED_PATH = re.compile(r"/Ascend/(?:cann|ascend-toolkit)[-/](" + VERSION + r")(?=/|$|:)")


def _paths(lines: list[str]) -> Iterator[tuple[str, str]]:
    """An env dump's paths name the CANN they point into: ASCEND_HOME_PATH=/usr/local/Ascend/cann-8.5.1."""
    for line in lines:
        for match in _VERSIONED_PATH.finditer(line):
            yield "cann_toolkit", match.group(1)


SOURCES = {
    "collect_env": _collect_env,
    "pip": _pip,
    "npu_smi": _npu_smi,
    "install_info": _install_info,
    "image": _image,
    "summary": _summary,
    "paths": _paths,
}


def read_paste(text: str) -> PastedStack:
    """Every version the paste states, with the source each came from, and what it does not state."""
    lines = clean(text)
    versions: dict[str, str] = {}
    sources: dict[str, str] = {}
    for rank in RANKS:
        for key, value in SOURCES[rank](lines):
            if key not in versions and value:
                versions[key], sources[key] = value, rank
    missing = tuple(key for key in WANTED if key not in versions)
    return PastedStack(versions, sources, missing)
