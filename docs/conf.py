"""Sphinx configuration of mpicoll's documentation.

Build (from the repository root, with the ``docs`` extra installed)::

    python -m sphinx -W --keep-going -b html docs build/docs

The algorithm gallery (``docs/gallery/``, not committed) is generated at every
build from the registry and the algorithms' plans by ``_ext/gallery.py``.
CuPy is mocked while autodoc imports mpicoll (``autodoc_mock_imports``). torch cannot be
(mpicoll.torch computes its dtype table from torch at import), so the API page of
:mod:`mpicoll.torch` is conditional: with torch installed (as in CI) it documents every
member; without, it shows the module's docstring read from the source and says why
(``_ext/apiref.py``, directive ``mpicoll-torch``).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))          # mpicoll from this checkout
sys.path.insert(0, os.path.join(HERE, "_ext"))

import mpicoll  # noqa: E402

project = "mpicoll"
author = "the mpicoll authors"
copyright = "the mpicoll authors"
release = version = mpicoll.__version__

extensions = [
    "sphinx.ext.autodoc",
    "gallery",            # _ext/gallery.py: the algorithm gallery, generated at build time
    "apiref",             # _ext/apiref.py: the function lists read from the registry
]

exclude_patterns = ["_ext", "_build", "Thumbs.db", ".DS_Store"]
templates_path = []
html_static_path = ["_static"]

html_theme = "pydata_sphinx_theme"
html_title = f"mpicoll {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"index": []}
html_show_sourcelink = False
html_copy_source = False

autodoc_mock_imports = ["cupy", "cupyx"]
autodoc_member_order = "bysource"
autodoc_typehints = "none"

nitpicky = False
default_role = "literal"
