"""Shell words with their place in the text, so a finding names its line and `--fix` can edit in place.

`shlex` splits a line into words but forgets where each came from; a linter that must say "line 7"
and rewrite one JSON argument without touching the rest of a user's script needs the offsets. This
tokenizer knows the parts of POSIX shell that serving scripts use: single and double quotes, backslash
escapes, `\\`-newline continuations (one logical command over many lines), comments, `;` / `&&` / `||`
/ `|` / `&` separators, and `$(...)`/`${...}` kept as opaque text. It does not expand variables.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.errors import WorkbenchError

SEPARATORS = (";", "&&", "||", "|", "&")


@dataclass(frozen=True)
class Word:
    text: str  # the word after quote removal
    start: int  # offset of its first character in the input
    end: int  # offset after its last character
    line: int  # 1-based line of its first character
    quoted: bool = False


@dataclass(frozen=True)
class Command:
    """One simple command: its words (separators excluded), on one or more physical lines."""

    words: tuple[Word, ...]

    @property
    def line(self) -> int:
        return self.words[0].line


class ShellSyntaxError(WorkbenchError):
    pass


def commands(text: str, where: str = "input") -> list[Command]:
    """The simple commands of `text`, in order."""
    found: list[Command] = []
    current: list[Word] = []
    i, n, line = 0, len(text), 1

    def flush() -> None:
        if current:
            found.append(Command(tuple(current)))
            current.clear()

    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n and text[i + 1] == "\n":  # continuation
            i += 2
            line += 1
            continue
        if ch == "\n":
            flush()
            i += 1
            line += 1
            continue
        if ch in " \t\r":
            i += 1
            continue
        if ch == "#":  # a comment runs to the end of the line
            while i < n and text[i] != "\n":
                i += 1
            continue
        op = next((s for s in ("&&", "||", ";", "|", "&") if text.startswith(s, i)), None)
        if op == "&" and i > 0 and text[i - 1] in "<>":
            op = None  # 2>&1: part of a redirection, not a separator
        if op is not None:
            flush()
            i += len(op)
            continue
        word, i, line = _word(text, i, line, where)
        current.append(word)
    flush()
    return found


def _word(text: str, i: int, line: int, where: str) -> tuple[Word, int, int]:
    start, start_line = i, line
    out: list[str] = []
    quoted = False
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "&" and out and out[-1] in "<>":
            out.append(ch)  # 2>&1
            i += 1
            continue
        if ch in " \t\r\n;&|":
            break
        if ch == "\\":
            if i + 1 < n and text[i + 1] == "\n":
                i += 2
                line += 1
                continue
            if i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            i += 1
            continue
        if ch == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise ShellSyntaxError(
                    f"{where}:{line}: a single quote opened here is never closed; close it or remove it"
                )
            out.append(text[i + 1 : end])
            line += text.count("\n", i, end)
            i = end + 1
            quoted = True
            continue
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n and text[j + 1] in '"\\$`\n':
                    if text[j + 1] != "\n":
                        out.append(text[j + 1])
                    j += 2
                    continue
                out.append(text[j])
                j += 1
            if j >= n:
                raise ShellSyntaxError(
                    f"{where}:{line}: a double quote opened here is never closed; close it or remove it"
                )
            line += text.count("\n", i, j)
            i = j + 1
            quoted = True
            continue
        if ch == "$" and i + 1 < n and text[i + 1] in "({":
            close = ")" if text[i + 1] == "(" else "}"
            depth, j = 0, i + 1
            while j < n:
                if text[j] == text[i + 1]:
                    depth += 1
                elif text[j] == close:
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            out.append(text[i : j + 1])
            line += text.count("\n", i, j)
            i = j + 1
            continue
        out.append(ch)
        i += 1
    return Word("".join(out), start, i, start_line, quoted), i, line
