"""Where things live: the repository's assets, the local caches, the run store."""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
ASSETS_DIR = Path(os.environ.get("RNNCON_ASSETS", REPO_ROOT / "assets"))
MODELS_DIR = ASSETS_DIR / "models"
# Offline data packages (npm) are installed here by scripts/setup.sh.
DEPS_DIR = Path(os.environ.get("RNNCON_DEPS", REPO_ROOT / ".deps"))
NPM_MODULES = DEPS_DIR / "npm" / "node_modules"
CACHE_DIR = Path(os.environ.get("RNNCON_CACHE", REPO_ROOT / ".cache"))
RUNS_DIR = Path(os.environ.get("RNNCON_RUNS", REPO_ROOT / "runs"))


def ensure_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
