"""The workbench's scripts (api/web/*.js) are ES modules loaded from one entry module, each under
300 lines: no classic script, no inline code, no module left out of the import graph. Whether they
load and run in a browser is checked by tests/browser/test_workbench.py."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import ultimate_rag

WEB = Path(ultimate_rag.__file__).parent / "api" / "web"
IMPORT = re.compile(r'^\s*import\s+(?:[\w*{}\s,$]+\s+from\s+)?"\./([\w.-]+\.js)";', re.MULTILINE)


class _Scripts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts.append(dict(attrs))


def _modules() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(WEB.glob("*.js"))}


def test_every_script_is_a_module_under_300_lines() -> None:
    modules = _modules()
    assert len(modules) >= 10
    for name, text in modules.items():
        lines = text.count("\n")
        assert lines < 300, f"{name} has {lines} lines"
        assert '"use strict"' not in text, f"{name} is written as a classic script"
        assert re.search(r"^(import|export) ", text, re.MULTILINE), f"{name} neither imports nor exports"


def test_the_page_loads_one_entry_module_and_it_reaches_every_script() -> None:
    parser = _Scripts()
    parser.feed((WEB / "index.html").read_text(encoding="utf-8"))
    assert parser.scripts == [{"type": "module", "src": "/web/app.js"}]
    modules = _modules()
    reached, todo = set(), ["app.js"]
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        assert name in modules, f"an import names {name}, which does not exist"
        reached.add(name)
        todo.extend(IMPORT.findall(modules[name]))
    assert reached == set(modules), f"never imported: {sorted(set(modules) - reached)}"
