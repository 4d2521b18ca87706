"""The architecture page names every module."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("distill", "procedures")
MODULES = sorted(path.relative_to(ROOT).as_posix() for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def test_the_architecture_page_names_every_module():
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert [module for module in MODULES if f"`{module}`" not in page] == []
