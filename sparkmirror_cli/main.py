"""The ``sparkmirror`` command.

Each subcommand lives in its own module that exposes ``register(subparsers)``;
this module only wires them together and turns SparkmirrorError into one line
on stderr and its exit code (2 for usage and config errors).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from sparkmirror import __version__
from sparkmirror import logsetup
from sparkmirror.errors import SparkmirrorError
from sparkmirror.logsetup import LOG_FORMATS

# module path -> registers one or more subcommands. Imported lazily so that
# `sparkmirror validate` never pays for importing pyspark.
SUBCOMMAND_MODULES = [
    "sparkmirror_cli.validate",
    "sparkmirror_cli.decode",
    "sparkmirror_cli.inspect_topic",
    "sparkmirror_cli.dev",
    "sparkmirror_cli.demo",
    "replicator.command",
    "sparkmirror_cli.translate",
    "sparkmirror_cli.failback",
    "sparkmirror_cli.ctl",
    "sparkmirror_cli.audit",
    "monitor.command",
]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 already; keep its format
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="sparkmirror",
        description=(
            "Replicate Kafka topics between clusters with MirrorMaker 2 semantics on "
            "Apache Spark, and watch how far the copy is behind. Reads MM2's own "
            "mm2.properties."
        ),
    )
    parser.add_argument("--version", action="version", version=f"sparkmirror {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="text",
                        help="text (default) or json: one JSON object per line for log shippers")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(sub)
    # Also accepted after the subcommand (`sparkmirror replicate --log-format json ...`).
    for subparser in {id(p): p for p in sub.choices.values()}.values():
        subparser.add_argument("--log-format", choices=LOG_FORMATS, default=argparse.SUPPRESS,
                               help="text (default) or json: one JSON object per line for log shippers")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logsetup.configure(args.log_format, args.verbose)
    # py4j logs every gateway connection at INFO; nobody needs that.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # ...and logs an abandoned foreachBatch (a query stopped mid-batch) as an error with
    # a traceback; real batch failures reach the user through the query's exception.
    logging.getLogger("py4j.clientserver").setLevel(logging.CRITICAL)
    try:
        return int(args.func(args) or 0)
    except SparkmirrorError as exc:
        line = f"sparkmirror: error: {exc}" if not exc.location() else str(exc)
        if logsetup.current_format() == "json":  # a log shipper reads stderr: keep it JSON
            logging.getLogger("sparkmirror").error("%s", line)
        else:
            print(line, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `sparkmirror validate ... | head`: the reader left, which is not an error to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush at exit
        return 141  # 128 + SIGPIPE, as a shell reports a command its pipe closed


if __name__ == "__main__":
    sys.exit(main())
