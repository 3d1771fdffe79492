"""docs/notebooks.md's examples run as written (doctest): in-process Countdown and LocalCertd.

The second example starts a real ``certd serve`` child process on 127.0.0.1.
"""

from __future__ import annotations

import doctest
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "notebooks.md"


def test_notebooks_page_runs() -> None:
    result = doctest.testfile(str(DOC), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 10 and result.failed == 0, result
