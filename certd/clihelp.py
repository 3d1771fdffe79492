"""Help shared by both command lines: every flag's default in ``--help``, and ``--version``.

Example:
    >>> import argparse
    >>> p = argparse.ArgumentParser(prog="x")
    >>> _ = p.add_argument("--n", type=int, default=3, help="how many")
    >>> finish_parser(p)
    >>> "how many (default: 3)" in p.format_help()
    True
"""

from __future__ import annotations

import argparse
from importlib import metadata

__all__ = ["DefaultsHelpFormatter", "finish_parser", "package_version"]


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Append ``(default: …)`` to each option with a meaningful default (not None/False/''/[])."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or default is None
            or default is argparse.SUPPRESS
            or isinstance(default, bool)
            or default in ("", [])
            or not action.option_strings
        ):
            return text
        return f"{text} (default: %(default)s)".lstrip()


def package_version() -> str:
    """The installed ForkGate version ("unknown" when run from a bare checkout)."""
    try:
        return metadata.version("forkgate")
    except metadata.PackageNotFoundError:
        return "unknown"


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found: list[argparse.ArgumentParser] = []
    for action in parser._actions:  # argparse exposes subparsers only through _actions
        if isinstance(action, argparse._SubParsersAction):
            found.extend(action.choices.values())
    return found


def finish_parser(parser: argparse.ArgumentParser, *, version: bool = False) -> None:
    """Show defaults in the help of ``parser`` and all its subcommands; add ``--version``."""
    if version:
        parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    todo = [parser]
    while todo:
        p = todo.pop()
        p.formatter_class = DefaultsHelpFormatter
        todo.extend(_subparsers(p))
