"""Text (IMDB) models: offline WordNet, EDA, coverage-targeted EDA and gradient-guided synonym
substitution generators, and a word-level diff for display.

Importing the package registers the generators ``eda`` and ``synonym-gradient`` with
``rnncon_core.generate``; TensorFlow and NLTK load only when they are used.
"""
from __future__ import annotations

from ..generate import register_generator
from .generators import CoverageEDA, SynonymGradient

register_generator("eda")(CoverageEDA)
register_generator("synonym-gradient")(SynonymGradient)

__all__ = ["CoverageEDA", "SynonymGradient"]
