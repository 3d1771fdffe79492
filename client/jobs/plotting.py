"""The jobs' one plotting stack: matplotlib, off-screen (Agg), each plot a PNG beside its JSON.

Example::

    plt = pyplot()
    fig, ax = plt.subplots()
    ax.plot([1, 2, 4], [0.3, 0.5, 0.6])
    save(Path("out/report"), "pass_at_k", fig, {"k": [1, 2, 4], "pass_at_k": [0.3, 0.5, 0.6]})

Every report of the jobs (the run report, the support report of ``forkgate guard`` and the
guard demo, the experiment's analysis, the κ calibration) draws through ``pyplot``;
matplotlib comes with the ``train`` extra.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import SetupError

__all__ = ["pyplot", "save"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the off-screen Agg backend.

    Raises:
        SetupError: matplotlib is not installed (the ``train`` extra).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise SetupError("the plots need matplotlib: pip install 'forkgate[train]'") from e
    return plt


def save(out: Path, name: str, fig: Any, payload: Any) -> Path:
    """Write ``NAME.png`` and ``NAME.json`` (exactly the numbers drawn) into ``out``; close.

    Returns:
        The PNG's path.
    """
    plt = pyplot()
    fig.tight_layout()
    png = out / f"{name}.png"
    fig.savefig(png, dpi=96)
    plt.close(fig)
    (out / f"{name}.json").write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    return png
