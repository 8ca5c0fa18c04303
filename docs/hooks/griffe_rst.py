"""A griffe extension for the API reference: the package's reStructuredText docstrings as Markdown.

The docstrings of ``llm_connect`` are written for reading in the source and in ``help()``, in
reStructuredText: ``:func:`name``` roles, ``::`` literal blocks, ``>>>`` examples and simple tables
bordered by ``=====``. mkdocstrings renders docstrings as Markdown, where those would come out as
stray colons, block quotes and run-on lines. This extension rewrites each docstring once griffe has
loaded the package (``on_object``), leaving the text itself alone:

- a role becomes a cross-reference when its target is documented in the site, else inline code
  (``<autoref ... optional>``: an unresolved target is not a warning, so ``--strict`` keeps
  passing when a role names a private module or the standard library);
- a literal block (``text::`` and an indented block) becomes a fenced code block;
- a doctest paragraph (``>>>``) becomes a fenced ``pycon`` block;
- a simple table becomes a Markdown table (a row whose first cell is blank continues the row above);
- numpydoc's See Also entries become a list of cross-references.

Named in ``mkdocs.yml`` (``plugins.mkdocstrings.handlers.python.options.extensions``).
"""

from __future__ import annotations

import ast
import html
import re
import textwrap
from typing import Any

from griffe import Extension, Object

ROLE = re.compile(r":(?:py:)?(func|meth|class|mod|attr|data|exc|obj|const|ref):`([^`]+)`")
TABLE_BORDER = re.compile(r"^(\s*)(=+)( +=+)+\s*$")
_CALLABLE_ROLES = {"func", "meth"}


def _role(match: re.Match[str], context: Object) -> str:
    kind, text = match.group(1), match.group(2).strip()
    explicit = re.fullmatch(r"(.+?)\s*<(.+)>", text)  # :func:`title <target>`
    if explicit:
        title, target = explicit.group(1), explicit.group(2)
    else:
        target = text
        short = target.startswith("~")
        target = target.lstrip("~.")
        title = target.rsplit(".", 1)[-1] if short else target
        if kind in _CALLABLE_ROLES and not title.endswith(")"):
            title += "()"
    return _reference(target, title, context)


def _reference(target: str, title: str, context: Object) -> str:
    """An optional cross-reference to ``target`` (resolved as Sphinx would), shown as ``title`` in code."""
    identifier = _qualify(target.lstrip("~."), context)
    return (
        f'<code><autoref identifier="{html.escape(identifier, quote=True)}" optional hover>'
        f"{html.escape(title)}</autoref></code>"
    )


SEE_ALSO = re.compile(r"^See Also\n-+\n", re.M)
SECTION_START = re.compile(r"^\S.*\n-{3,}\s*$", re.M)


def _see_also(text: str, context: Object) -> str:
    """numpydoc's See Also entries (``name : description``, ``a, b : description``, a bare ``name``; a
    description may continue on indented lines) as a Markdown list of cross-references; the section heading
    stays for the numpy parser (which shows the section as a "See Also" block)."""
    match = SEE_ALSO.search(text)
    if not match:
        return text
    start = match.end()
    following = SECTION_START.search(text, start)
    end = following.start() if following else len(text)
    entries: list[tuple[str, list[str]]] = []
    for line in text[start:end].split("\n"):
        if not line.strip():
            continue
        if line[0] in " \t" and entries:
            entries[-1][1].append(line.strip())
            continue
        names, _, description = line.partition(" : ")
        entries.append((names.strip(), [description.strip()] if description.strip() else []))
    items = []
    for names, description in entries:
        refs = ", ".join(_reference(name.strip(), name.strip(), context) for name in names.split(",") if name.strip())
        items.append(f"- {refs}" + (f": {' '.join(description)}" if description else ""))
    return text[:start] + "\n".join(items) + "\n\n" + text[end:].lstrip("\n")


def _qualify(target: str, context: Object) -> str:
    """``name`` or ``Class.method`` relative to the docstring's class or module, as Sphinx reads it."""
    if target.startswith("llm_connect"):
        return target
    head = target.split(".", 1)[0]
    scope: Any = context if context.is_class or context.is_module else context.parent
    while scope is not None:
        try:
            if head in scope.members:
                return f"{scope.path}.{target}"
        except Exception:  # an alias that does not resolve: try the next scope
            pass
        scope = scope.parent
    return target


def _fence(lines: list[str], indent: str) -> list[str]:
    body = textwrap.dedent("\n".join(lines)).strip("\n")
    try:
        ast.parse(body)
        language = "python"
    except SyntaxError:
        language = "text"
    return [f"{indent}```{language}", *[f"{indent}{line}" if line else "" for line in body.split("\n")], f"{indent}```"]


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _literal_blocks(lines: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.rstrip()
        if stripped.endswith("::") and not stripped.strip().startswith(">>>"):
            base = _indent_of(line)
            # "text::" -> "text:"; "text ::" -> "text"; a lone "::" disappears
            if stripped.strip() != "::":
                text = stripped[:-2].rstrip() if stripped[:-2].endswith(" ") else stripped[:-1]
                out.append(text)
            j = i + 1
            block: list[str] = []
            while j < len(lines) and (not lines[j].strip() or _indent_of(lines[j]) > base):
                block.append(lines[j])
                j += 1
            while block and not block[-1].strip():
                block.pop()
            if block:
                out.append("")
                out.extend(_fence(block, " " * base))
                out.append("")
                i = j
                continue
            i += 1
            continue
        if line.lstrip().startswith(">>>") and (not out or not out[-1].strip()):
            base = _indent_of(line)
            j = i
            block = []
            while j < len(lines) and lines[j].strip():
                block.append(lines[j])
                j += 1
            indent = " " * base
            out.extend([f"{indent}```pycon", *(b[base:] if len(b) >= base else b for b in block), f"{indent}```"])
            i = j
            continue
        out.append(line)
        i += 1
    return out


def _cells(line: str, starts: list[int]) -> list[str]:
    bounds = [*starts[1:], None]
    return [line[start:end].strip() if len(line) > start else "" for start, end in zip(starts, bounds, strict=True)]


def _tables(lines: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(lines):
        border = TABLE_BORDER.match(lines[i])
        if not border:
            out.append(lines[i])
            i += 1
            continue
        indent = border.group(1)
        starts = [m.start() for m in re.finditer(r"=+", lines[i])]
        borders = [i]
        j = i + 1
        while j < len(lines) and lines[j].strip() and len(borders) < 3:
            if TABLE_BORDER.match(lines[j]):
                borders.append(j)
            j += 1
        # three borders: a header between the first two; two: no header (blank cells head it)
        if len(borders) == 2:
            header_lines, body_lines, end = [], lines[borders[0] + 1 : borders[1]], borders[1]
        else:
            header_lines = lines[borders[0] + 1 : borders[1]]
            body_lines, end = lines[borders[1] + 1 : borders[2]], borders[2]
        rows: list[list[str]] = []
        for line in body_lines:
            cells = _cells(line, starts)
            if rows and not cells[0]:
                rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
            else:
                rows.append(cells)
        header = [" ".join(parts).strip() for parts in zip(*(_cells(h, starts) for h in header_lines), strict=True)]
        if not header:
            header = [""] * len(starts)
        out.append("")
        for row in [header, ["---"] * len(starts), *rows]:
            out.append(indent + "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
        out.append("")
        i = end + 1
    return out


def rst_to_markdown(text: str, context: Object) -> str:
    text = _see_also(text, context)
    lines = text.split("\n")
    lines = _tables(lines)
    lines = _literal_blocks(lines)
    converted = "\n".join(lines)
    # roles outside code: the fenced blocks just made are left alone
    parts = re.split(r"(```.*?```)", converted, flags=re.S)
    return "".join(part if part.startswith("```") else ROLE.sub(lambda m: _role(m, context), part) for part in parts)


class RstToMarkdown(Extension):
    """Rewrites every loaded docstring from reStructuredText to Markdown (see the module docstring)."""

    def on_object(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.is_alias or obj.docstring is None:
            return
        obj.docstring.value = rst_to_markdown(obj.docstring.value, obj)
