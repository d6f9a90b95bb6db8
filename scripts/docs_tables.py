"""Write the generated tables into the documentation, between their markers:

    <!-- generated: write-settings -->
    ...
    <!-- end generated -->

Run `python scripts/docs_tables.py` after changing a table (the settings of the writers or the
readers); `python scripts/docs_tables.py --check` exits 1 when a page is out of date (a test
runs it)."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tables() -> dict[str, Callable[[], str]]:
    from tfspark.store import options

    return {"write-settings": options.settings_markdown,
            **({"read-settings": options.read_settings_markdown}
               if hasattr(options, "read_settings_markdown") else {})}


def render(text: str) -> str:
    """`text` with every generated section made anew."""
    made = tables()

    def fill(m: re.Match[str]) -> str:
        return f"{m.group(1)}\n{made[m.group(2)]()}\n{m.group(3)}"

    return re.sub(r"(<!-- generated: ([\w-]+) -->)\n(?:.*?\n)?(<!-- end generated -->)", fill,
                  text, flags=re.S)


def main(argv: list[str]) -> int:
    stale = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = page.read_text()
        new = render(text)
        if new != text:
            stale.append(page)
            if "--check" not in argv:
                page.write_text(new)
    if stale and "--check" in argv:
        print("out of date (run python scripts/docs_tables.py): " +
              ", ".join(str(p.relative_to(ROOT)) for p in stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
