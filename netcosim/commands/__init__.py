"""CLI subcommands. Every module here that defines ``register(subparsers)`` is a subcommand:
``register`` adds its parser (``subparsers.add_parser(...)``) and sets ``func=handler`` with
``set_defaults``; ``handler(args) -> int`` returns the exit status. See netcosim/cli.py."""
