"""The reference generated from the key declaration (:mod:`fl.config.keys`): the run-config block of
``pyproject.toml`` and the table of ``docs/configuration.md``.

``sanitas config-reference`` writes both; tests check that the committed files equal what this
module generates, so the declaration, Flower's defaults and the documentation cannot drift apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fl.config.keys import DECLARED, SECTION_CLASSES

#: The line that starts the run-config block; the block runs to the end of ``pyproject.toml``.
PYPROJECT_HEADER = "[tool.flwr.app.config]"
PYPROJECT_COMMENT = (
    "# Run-config keys, generated from fl/config/keys.py by `sanitas config-reference` (docs/configuration.md\n"
    "# documents each one); override with flwr run . --run-config 'key=value'.\n"
)


def toml_value(value: Any) -> str:
    """A default as TOML (booleans lower case, strings double-quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def pyproject_block() -> str:
    """The ``[tool.flwr.app.config]`` block: every key and its default, one section after another."""
    lines = [PYPROJECT_COMMENT + PYPROJECT_HEADER]
    current = ""
    for section, name, default, _, _ in DECLARED:
        if section != current:
            lines.append(f"# --- {section}")
            current = section
        lines.append(f"{name} = {toml_value(default)}")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Table-cell text: pipes escaped, angle brackets as entities (not HTML tags)."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def markdown() -> str:
    """``docs/configuration.md``: one table per section (key, default, allowed values, meaning)."""
    out = [
        "# Configuration",
        "",
        "Every run-config key, its default and what it does. The same flat, kebab-case keys go in a "
        "`sanitas run` TOML file, after `--set KEY=VALUE`, as keyword arguments of `simulations.run` "
        "(snake_case) and in Flower's run config (`flwr run . --run-config 'key=value'`). In code, a "
        "resolved config is a `fl.config.RunConfig` of typed sections: `cfg.release.sentence_epsilon`.",
        "",
        "This page is generated from the declaration in `fl/config/keys.py` by `sanitas config-reference`; "
        "a test checks that it is current.",
    ]
    current = ""
    for section, name, default, doc, choices in DECLARED:
        if section != current:
            cls = SECTION_CLASSES[section]
            summary = " ".join((cls.__doc__ or "").split())
            out += [
                "",
                f"## `{section}`",
                "",
                summary,
                "",
                "| key | default | allowed | meaning |",
                "|---|---|---|---|",
            ]
            current = section
        allowed = ", ".join(f"`{c}`" for c in choices) if choices else ""
        out.append(f"| `{name}` | `{_cell(toml_value(default))}` | {allowed} | {_cell(doc)} |")
    return "\n".join(out) + "\n"


def with_pyproject_block(text: str) -> str:
    """``pyproject.toml``'s text with its run-config block (and the comment above it) regenerated."""
    start = text.index(PYPROJECT_HEADER)
    comment = text.rfind("\n\n", 0, start) + 2  # the comment lines directly above the header go too
    return text[:comment] + pyproject_block()


def write(repo: Path) -> list[Path]:
    """Regenerate the block of ``repo/pyproject.toml`` and ``repo/docs/configuration.md``; the files written."""
    pyproject, page = repo / "pyproject.toml", repo / "docs" / "configuration.md"
    pyproject.write_text(with_pyproject_block(pyproject.read_text()))
    page.write_text(markdown())
    return [pyproject, page]
