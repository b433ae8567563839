"""The `specdec` command: argument checking (`checks`) and the subcommands (`commands`), nothing else."""

from specdec.cli.commands import build_parser, main

__all__ = ["build_parser", "main"]
