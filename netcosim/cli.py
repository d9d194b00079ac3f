"""The `netcosim` command.

Subcommands live in netcosim/commands/, one module each; a module that defines
``register(subparsers)`` is picked up automatically, so adding a command means adding a file.

Errors: bad input (``InputError``) prints one line ``netcosim: error: <message>`` on stderr and
exits with status 2, without a traceback. A result that cannot be written once the run has
started (``netcosim.outpaths.OutputError``) is one line and status 1. Anything else is a bug:
one line naming the command and the exception, status 1; ``--debug`` (anywhere on the command
line) or ``NETCOSIM_DEBUG=1`` shows the full traceback instead.
"""
from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import traceback

from topo.errors import InputError

PROG = "netcosim"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("netcosim")
    except Exception:  # not installed (running from a source tree)
        return "unknown"


def _broken_command(sub, name: str, exc_text: str) -> None:
    """A command module that fails to import must not take the other commands down with it;
    running it shows the import error in full."""

    def fail(args):
        sys.stderr.write(exc_text)
        return 1

    p = sub.add_parser(name, help="(unavailable: the module failed to import)")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=fail)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Network co-simulator for AI-cluster fabrics: how long does this "
                    "communication take on this fabric, with these faults?")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an unexpected error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    import netcosim.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        try:
            mod = importlib.import_module(f"netcosim.commands.{info.name}")
        except Exception:
            _broken_command(sub, info.name, traceback.format_exc())
            continue
        if hasattr(mod, "register"):
            mod.register(sub)
    for p in sub.choices.values():  # --debug after the command too (netcosim run S --debug)
        if "--debug" not in p._option_string_actions:
            p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                           help="show the full traceback of an unexpected error")
    return parser


# --------------------------------------------------------------------------- shared by commands
def add_scenario_arguments(p: argparse.ArgumentParser) -> None:
    """SCENARIO and --set, the arguments every scenario-taking command shares."""
    p.add_argument("scenario", metavar="SCENARIO", help="scenario file (.toml or .json)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario value by its dotted path, e.g. --set topology.k=8 "
                        "--set workload.bytes=1GiB (TOML literal; bare words are strings); "
                        "repeatable, applied in order")


def load_from_args(args, engine: str | None = None):
    from netcosim.scenario import load_scenario

    return load_scenario(args.scenario, args.overrides, engine=engine)


def _one_line(msg: str) -> str:
    return " ".join(part.strip() for part in str(msg).splitlines() if part.strip())


def _debug(args) -> bool:
    return bool(getattr(args, "debug", False)) or os.environ.get("NETCOSIM_DEBUG", "") not in (
        "", "0")


def main(argv=None) -> int:
    from netcosim.outpaths import OutputError
    from netcosim.sweep.execute import WorkerLost

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return int(e.code) if isinstance(e.code, int) else 2
    try:
        return int(args.func(args) or 0)
    except InputError as e:
        print(f"{PROG}: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except (OutputError, WorkerLost) as e:  # after the run started: written or run failed
        print(f"{PROG}: error: {_one_line(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `netcosim topo x | head`
        return 0
    except Exception as e:  # a bug (or a limit nobody checked): one line unless --debug
        if _debug(args):
            raise
        what = _one_line(e) or "(no message)"
        if len(what) > 500:
            what = what[:497] + "..."
        print(f"{PROG} {args.command}: internal error: {type(e).__name__}: {what} (run again "
              f"with --debug for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
