"""One rule for unknown fields inside a task, in every format that carries one (#31).

A generator puts an unknown field at every place of every domain's task (the domain's
object, Countdown ``rules``, a code ``cases`` item) and feeds it through each reader: the
task object, the deprecated flat form, a CLI ``--task``, a ``verify-batch`` line, a fork-tree
record as ``admit`` (the ratchet's parser) and ``metrics`` read it. Each refuses with one
line naming the field; none drops it.
"""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from certd.task_object import parse_task_object
from forkgate import as_task
from forkgate.cli import main
from forkgate.cli_io import task_arg
from forkgate.errors import InvalidRequestError
from forkgate.verify_jsonl import _request_of, _TaskCache

BASE: dict[str, dict[str, Any]] = {
    "countdown": {"numbers": [25, 5, 4, 3], "target": 83, "rules": {"at_most_once": False}},
    "math": {"gold": "1/2", "precision_digits": 0, "question": "What is 1/2?"},
    "code": {
        "language": "python",
        "cases": [{"stdin": "2 3\n", "stdout": "6\n"}],
        "compare": "whitespace",
    },
}


def _places(domain: str) -> Iterator[tuple[str, Callable[[dict[str, Any]], None]]]:
    """Every place an unknown field can sit in a domain's object."""
    yield "task", lambda t: t.update(extra=1)
    if domain == "countdown":
        yield "rules", lambda t: t["rules"].update(extra=1)
    if domain == "code":
        yield "cases[0]", lambda t: t["cases"][0].update(extra=1)


CASES = [(d, where, edit) for d in BASE for where, edit in _places(d)]
IDS = [f"{d}-{where}" for d, where, _ in CASES]


def _bad(domain: str, edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    task = copy.deepcopy(BASE[domain])
    edit(task)
    return task


@pytest.mark.parametrize("domain", list(BASE))
def test_the_honest_tasks_parse_in_every_form(domain: str) -> None:
    assert parse_task_object({"domain": domain, "task": BASE[domain]}).WhichOneof("domain")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert as_task({"domain": domain, **BASE[domain]}).WhichOneof("domain") == domain


@pytest.mark.parametrize(("domain", "where", "edit"), CASES, ids=IDS)
def test_an_unknown_task_field_is_refused_in_every_format(
    domain: str, where: str, edit: Callable[[dict[str, Any]], None], tmp_path: Path
) -> None:
    task = _bad(domain, edit)
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['extra'\]") as e:
        parse_task_object({"domain": domain, "task": task})  # the task object
    assert "\n" not in str(e.value) and where in str(e.value), e.value
    with warnings.catch_warnings(), pytest.raises(ValueError, match="extra"):
        warnings.simplefilter("ignore", DeprecationWarning)
        as_task({"domain": domain, **task})  # the flat form a fork-tree record carries
    with pytest.raises(InvalidRequestError, match="extra"):  # CLI --task (exit 2)
        task_arg("", json.dumps({"domain": domain, "task": task}))
    line = {"id": 1, "domain": domain, "task": task, "response": "x"}
    with pytest.raises(ValueError, match="extra"):  # a verify-batch line
        _request_of(line, 1, _TaskCache())
    record = {"task": {"domain": domain, **task}, "families": []}
    path = tmp_path / "trees.jsonl"
    path.write_text(json.dumps(record) + "\n")
    assert main(["metrics", "--in", str(path), "--json"]) == 1  # MALFORMED task
