"""Text (IMDB) models: offline WordNet, EDA, coverage-targeted EDA and gradient-guided synonym
substitution generators, and a word-level diff for display.

Importing this package adds the generators ``eda`` and ``synonym-gradient`` to the strategies'
registry (``rnncon_core.registry.GENERATORS``, loaded from ``rnncon_core.text.generators`` on
first use); TensorFlow and NLTK load only when they are used.
"""
from __future__ import annotations

from ..registry import GENERATORS

GENERATORS.declare({"eda": "rnncon_core.text.generators:CoverageEDA",
                    "synonym-gradient": "rnncon_core.text.generators:SynonymGradient"})
