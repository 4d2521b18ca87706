"""Sphinx configuration: Markdown pages (MyST) with $math$, autodoc for the API, the CLI from click."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import distill  # noqa: E402  (after the path is set)

project = "distill"
author = "the distill authors"
copyright = "the distill authors, Apache-2.0"
release = version = distill.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx_click",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}

html_theme = "furo"
html_title = f"distill {release}"
