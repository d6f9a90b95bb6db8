"""Convert a jupytext "percent" script into a Jupyter notebook (nbformat 4.5 JSON), no deps.

    python examples/make_notebook.py            # examples/walkthrough.py -> walkthrough.ipynb
    python examples/make_notebook.py --check    # exit 1 when the .ipynb is out of date
    python examples/make_notebook.py SRC.py [DEST.ipynb]

Cells start at lines `# %%` (code) and `# %% [markdown]` (markdown, written as `# ` comment
lines). Lines before the first marker are ignored; blank lines around a cell are dropped. The
notebook has no outputs, and cell ids are numbered, so the same script always gives the same
file (tests/integration/test_examples.py checks that the committed notebook is in sync).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARKER = re.compile(r"^# %%(?P<rest>.*)$")


def cells(script: str) -> list[tuple[str, list[str]]]:
    """[(cell_type, source lines without newlines)] of a percent-format script."""
    out: list[tuple[str, list[str]]] = []
    for line in script.splitlines():
        m = MARKER.match(line)
        if m:
            kind = "markdown" if m["rest"].strip().startswith("[markdown]") else "code"
            out.append((kind, []))
        elif out:
            out[-1][1].append(line)
    result = []
    for kind, lines in out:
        if kind == "markdown":
            lines = [_uncomment(x) for x in lines]
        while lines and not lines[0].strip():
            lines = lines[1:]
        while lines and not lines[-1].strip():
            lines = lines[:-1]
        if lines:
            result.append((kind, lines))
    return result


def _uncomment(line: str) -> str:
    if line.startswith("# "):
        return line[2:]
    if line.rstrip() in ("#", ""):
        return ""
    raise ValueError(f"a markdown cell line must be a '# ' comment, got {line!r}")


def notebook(script: str) -> dict:
    nb_cells = []
    for i, (kind, lines) in enumerate(cells(script), 1):
        source = [x + "\n" for x in lines[:-1]] + [lines[-1]]
        cell: dict = {"cell_type": kind, "id": f"cell-{i:02d}", "metadata": {}, "source": source}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        nb_cells.append(cell)
    return {
        "cells": nb_cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def render(src: Path) -> str:
    return json.dumps(notebook(src.read_text()), indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    src = Path(args[0]) if args else HERE / "walkthrough.py"
    dest = Path(args[1]) if len(args) > 1 else src.with_suffix(".ipynb")
    text = render(src)
    if check:
        if not dest.exists() or dest.read_text() != text:
            print(f"{dest} is out of date: run python examples/make_notebook.py", file=sys.stderr)
            return 1
        print(f"{dest} is up to date")
        return 0
    dest.write_text(text)
    print(f"wrote {dest} ({len(notebook(src.read_text())['cells'])} cells)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
