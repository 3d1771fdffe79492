"""Help shared by both command lines: every flag's default in ``--help``, ``--version``,
usage errors in one line (``OneLineErrorParser``), and text-or-JSON output (``emit``).

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
import json
from collections.abc import Callable
from typing import Any, NoReturn

__all__ = [
    "DefaultsHelpFormatter",
    "OneLineErrorParser",
    "add_verb",
    "emit",
    "finish_parser",
    "package_version",
]


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


class OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr, exit 2 (no usage dump).

    Its subcommands' parsers are of the same class (argparse creates them with the parent's).
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_verb(
    sub: Any,
    name: str,
    summary: str,
    exits: str,
    fn: Callable[..., int] | None = None,
    description: str = "",
) -> argparse.ArgumentParser:
    """A subcommand with its one-line summary, a description and its exit codes as epilog.

    Args:
        sub: the parent's ``add_subparsers()`` action.
        name: the verb.
        summary: one line for the parent's ``--help`` (lower case, no full stop).
        exits: the verb's exit codes, e.g. ``"0 passed, 1 a fault, 2 usage"``.
        fn: the handler, stored as ``fn`` in the parsed namespace.
        description: the verb's own ``--help`` text (default: the summary as a sentence).

    Returns:
        The subcommand's parser.
    """
    p: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=description or summary[0].upper() + summary[1:] + ".",
        epilog=f"exit codes: {exits} (docs/exit-codes.md)",
    )
    if fn is not None:
        p.set_defaults(fn=fn)
    return p


def emit(args: argparse.Namespace, obj: dict[str, Any], text: str) -> None:
    """Print ``obj`` as one sorted JSON line when ``args.json``, else ``text`` (flushed)."""
    print(json.dumps(obj, sort_keys=True) if args.json else text, flush=True)


def package_version() -> str:
    """The installed ForkGate version ("unknown" when run from a bare checkout)."""
    from importlib import metadata  # only when asked: it costs start-up time to every verb

    try:
        return metadata.version("forkgate")
    except metadata.PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse.Action):
    """``--version``: print ``prog version`` and exit (the version looked up only then)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **_: Any) -> None:
        super().__init__(
            option_strings, dest, nargs=0, help="show program's version number and exit"
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        print(f"{parser.prog} {package_version()}")  # stdout, as argparse's own action
        parser.exit()


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found: list[argparse.ArgumentParser] = []
    for action in parser._actions:  # argparse exposes subparsers only through _actions
        if isinstance(action, argparse._SubParsersAction):
            found.extend(action.choices.values())
    return found


def finish_parser(parser: argparse.ArgumentParser, *, version: bool = False) -> None:
    """Show defaults in the help of ``parser`` and all its subcommands; add ``--version``."""
    if version:
        parser.add_argument("--version", action=_VersionAction)
    todo = [parser]
    while todo:
        p = todo.pop()
        p.formatter_class = DefaultsHelpFormatter
        todo.extend(_subparsers(p))
