"""The documentation runs: every Python block of README.md and docs/*.md, a page's blocks in
order in one fresh Python process (a block may use what an earlier one made), in an empty
directory, as a user pastes them. And every install line names the distribution that
pyproject.toml builds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```python\n(.*?)^```\n", re.M | re.S)
MARK = "@@docs-block"


def python_blocks(page: Path) -> list[tuple[int, str]]:
    """(line, code) of each ```python block of a page."""
    text = page.read_text()
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in _FENCE.finditer(text)]


def _script(page: Path) -> str:
    parts = []
    for k, (line, code) in enumerate(python_blocks(page)):
        parts.append(f"print({MARK + f' {k} line {line}'!r}, flush=True)\n"
                     f"exec(compile({code!r}, {f'{page.name}:{line}'!r}, 'exec'))\n")
    return "".join(parts)


@pytest.mark.spark
@pytest.mark.tf
@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)],
                         ids=lambda p: p.name)
def test_every_python_block_of_the_page_runs(page, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env.update(TF_CPP_MIN_LOG_LEVEL="3", PYTHONHASHSEED="0")
    done = subprocess.run([sys.executable, "-c", _script(page)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        last = [ln for ln in done.stdout.splitlines() if ln.startswith(MARK)]
        where = last[-1].removeprefix(MARK).strip() if last else "before the first block"
        pytest.fail(f"{page.name}: block {where} failed:\n{done.stderr[-4000:]}")


def test_the_documentation_has_python_blocks_to_run():
    assert len(python_blocks(ROOT / "README.md")) >= 5
    assert sum(len(python_blocks(p)) for p in PAGES) >= 20


def test_every_install_line_names_the_distribution():
    """`pip install tfspark` installs another project: each install line names ours."""
    import tomllib

    name = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
    files = [*PAGES, *(ROOT / "examples").glob("*.py"), *(ROOT / "jobs").glob("*.py")]
    wrong = []
    for path in files:
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            for m in re.finditer(r"pip install ((?:'[^']*'|\S+)(?: (?:'[^']*'|[^\s`|]+))*)",
                                 line):
                targets = [t.strip("'\"`") for t in m.group(1).split()]
                ours = [t for t in targets if re.match(r"(tfspark|pyspark-tfrecord)\b", t)]
                if any(not t.startswith(name) for t in ours):
                    wrong.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not wrong, "install lines that name another distribution:\n" + "\n".join(wrong)
    readme = (ROOT / "README.md").read_text()
    assert f"pip install '{name}[spark]'" in readme
