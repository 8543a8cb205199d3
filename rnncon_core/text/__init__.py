"""Text (IMDB) models: offline WordNet, EDA, coverage-targeted EDA and gradient-guided synonym
substitution generators, and a word-level diff for display.

The generators ``eda`` and ``synonym-gradient`` are in ``rnncon_core.generate``'s registry
(loaded from ``rnncon_core.text.generators`` on first use); TensorFlow and NLTK load only when
they are used.
"""
from __future__ import annotations
