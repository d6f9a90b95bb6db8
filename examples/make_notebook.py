"""Convert a jupytext "percent" script into a Jupyter notebook (nbformat 4.5 JSON), no deps.

    python examples/make_notebook.py            # examples/walkthrough.py -> walkthrough.ipynb
    python examples/make_notebook.py --check    # exit 1 when the .ipynb is out of date
    python examples/make_notebook.py --execute  # run every code cell, keep what it prints
    python examples/make_notebook.py SRC.py [DEST.ipynb]

Cells start at lines `# %%` (code) and `# %% [markdown]` (markdown, written as `# ` comment
lines). Lines before the first marker are ignored; blank lines around a cell are dropped. Cell
ids are numbered, so the same script always gives the same cells; --execute runs the code cells
in order in one namespace, as a kernel would, and stores what each printed as its output, so the
notebook reads on GitHub. tests/integration/test_examples.py checks that the committed notebook,
outputs aside, is what this makes of the script.
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


def render(src: Path, execute: bool = False) -> str:
    """The notebook of a script as JSON text; with the outputs of a run when execute."""
    nb = notebook(src.read_text())
    if execute:
        run(nb, src)
    return dumps(nb)


def dumps(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def without_outputs(nb: dict) -> dict:
    """The notebook with every code cell's outputs and execution count cleared."""
    cells = [dict(c, outputs=[], execution_count=None) if c["cell_type"] == "code" else c
             for c in nb["cells"]]
    return dict(nb, cells=cells)


def run(nb: dict, src: Path) -> None:
    """Run the code cells in order in one namespace; each gets what it printed as a stream
    output (stdout and stderr) and its execution count. A failing cell stops the run."""
    import contextlib
    import io
    import traceback

    namespace: dict = {"__name__": "__main__", "__file__": str(src)}
    count = 0
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        count += 1
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                exec(compile("".join(cell["source"]), f"<cell {count}>", "exec"), namespace)
            except Exception:
                traceback.print_exc()
                failed = True
            else:
                failed = False
        cell["execution_count"] = count
        cell["outputs"] = [{"name": name, "output_type": "stream",
                            "text": text.splitlines(keepends=True)}
                           for name, text in (("stdout", out.getvalue()),
                                              ("stderr", err.getvalue())) if text]
        if failed:
            raise SystemExit(f"cell {count} failed:\n{err.getvalue()}")


def main(argv: list[str]) -> int:
    check, execute = "--check" in argv, "--execute" in argv
    args = [a for a in argv if a not in ("--check", "--execute")]
    src = Path(args[0]) if args else HERE / "walkthrough.py"
    dest = Path(args[1]) if len(args) > 1 else src.with_suffix(".ipynb")
    text = render(src, execute)
    if check:
        stored = dest.read_text() if dest.exists() else ""
        if not stored or dumps(without_outputs(json.loads(stored))) != text:
            print(f"{dest} is out of date: run python examples/make_notebook.py", file=sys.stderr)
            return 1
        print(f"{dest} is up to date")
        return 0
    dest.write_text(text)
    print(f"wrote {dest} ({len(notebook(src.read_text())['cells'])} cells)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
