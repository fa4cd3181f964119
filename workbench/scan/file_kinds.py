"""Which files the scan reads, and with which rules: decided by name (and, for files without an
extension, by a `#!` line naming a shell)."""

from __future__ import annotations

import enum
import fnmatch
import re


class FileKind(str, enum.Enum):
    PYTHON = "python"
    NOTEBOOK = "notebook"
    CUDA_SOURCE = "cuda_source"
    CPP = "cpp"
    SHELL = "shell"
    CONFIG = "config"  # YAML, JSON, TOML, INI, .env: keys, values, environment variables
    REQUIREMENTS = "requirements"  # requirements*.txt, lock files, pyproject.toml, conda environments
    DOCKERFILE = "dockerfile"
    CMAKE = "cmake"
    MAKEFILE = "makefile"
    BINARY_LIBRARY = "binary_library"  # compiled extensions: searched for the CUDA libraries they name
    TEMPLATE = "template"  # Go templates of Helm charts (.tpl): the same rules as configuration
    TERRAFORM = "terraform"  # .tf / .tfvars / .hcl: node pools, images and resources of the cluster

    @property
    def is_text(self) -> bool:
        return self is not FileKind.BINARY_LIBRARY


_SUFFIXES: dict[str, FileKind] = {
    ".py": FileKind.PYTHON,
    ".pyw": FileKind.PYTHON,
    ".ipynb": FileKind.NOTEBOOK,
    ".cu": FileKind.CUDA_SOURCE,
    ".cuh": FileKind.CUDA_SOURCE,
    **dict.fromkeys((".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".inl"), FileKind.CPP),
    **dict.fromkeys((".sh", ".bash", ".zsh", ".ksh"), FileKind.SHELL),
    **dict.fromkeys((".yaml", ".yml", ".json", ".toml", ".ini", ".cfg", ".conf", ".env"), FileKind.CONFIG),
    ".cmake": FileKind.CMAKE,
    **dict.fromkeys((".tpl", ".gotmpl"), FileKind.TEMPLATE),
    **dict.fromkeys((".tf", ".tfvars", ".hcl"), FileKind.TERRAFORM),
    ".mk": FileKind.MAKEFILE,
    **dict.fromkeys((".so", ".pyd", ".dll", ".dylib"), FileKind.BINARY_LIBRARY),
}
# Names matched before suffixes (fnmatch, case-sensitive; the first match wins).
_NAMES: tuple[tuple[str, FileKind], ...] = (
    ("requirements*.txt", FileKind.REQUIREMENTS),
    ("*requirements.txt", FileKind.REQUIREMENTS),
    ("*-requirements*.txt", FileKind.REQUIREMENTS),
    ("constraints*.txt", FileKind.REQUIREMENTS),
    ("requirements*.in", FileKind.REQUIREMENTS),
    ("pyproject.toml", FileKind.REQUIREMENTS),
    ("setup.cfg", FileKind.REQUIREMENTS),
    ("Pipfile", FileKind.REQUIREMENTS),
    ("Pipfile.lock", FileKind.REQUIREMENTS),
    ("poetry.lock", FileKind.REQUIREMENTS),
    ("uv.lock", FileKind.REQUIREMENTS),
    ("pdm.lock", FileKind.REQUIREMENTS),
    ("pylock*.toml", FileKind.REQUIREMENTS),
    ("environment*.yml", FileKind.REQUIREMENTS),
    ("environment*.yaml", FileKind.REQUIREMENTS),
    ("conda*.yml", FileKind.REQUIREMENTS),
    ("conda*.yaml", FileKind.REQUIREMENTS),
    ("Dockerfile", FileKind.DOCKERFILE),
    ("Dockerfile.*", FileKind.DOCKERFILE),
    ("*.Dockerfile", FileKind.DOCKERFILE),
    ("*.dockerfile", FileKind.DOCKERFILE),
    ("Containerfile*", FileKind.DOCKERFILE),
    ("CMakeLists.txt", FileKind.CMAKE),
    ("Makefile", FileKind.MAKEFILE),
    ("makefile", FileKind.MAKEFILE),
    ("GNUmakefile", FileKind.MAKEFILE),
    (".env", FileKind.CONFIG),
    (".env.*", FileKind.CONFIG),
)
_VERSIONED_LIBRARY = re.compile(r".+\.so(\.\d+)+")
_SHELL_SHEBANG = re.compile(rb"#!\s*\S*(?:/|env\s+)(?:ba|z|k|da)?sh\b")
_PYTHON_SHEBANG = re.compile(rb"#!\s*\S*(?:/|env\s+)python[\d.]*\b")


def kind_of(name: str) -> FileKind | None:
    """The kind of a file from its name alone ('requirements-cu121.txt' -> REQUIREMENTS), or None."""
    for pattern, kind in _NAMES:
        if fnmatch.fnmatchcase(name, pattern):
            return kind
    if _VERSIONED_LIBRARY.fullmatch(name):
        return FileKind.BINARY_LIBRARY
    dot = name.rfind(".")
    return _SUFFIXES.get(name[dot:].lower()) if dot > 0 else None


def kind_from_first_line(head: bytes) -> FileKind | None:
    """SHELL or PYTHON for a file starting with a #! line naming one (launch scripts often have no
    extension), else None."""
    if _SHELL_SHEBANG.match(head):
        return FileKind.SHELL
    return FileKind.PYTHON if _PYTHON_SHEBANG.match(head) else None
