#!/usr/bin/env python
from __future__ import annotations

import os
import sys

# Commands that never open a database connection.
NO_DATABASE_COMMANDS = {
    "help",
    "version",
    "--help",
    "-h",
    "--version",
    "makemigrations",
    "collectstatic",
    "check",
    # Run by `make install` before any database exists: it only reads and writes files.
    "export_embedding_model",
}


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    command = sys.argv[1] if len(sys.argv) > 1 else "help"
    if not os.environ.get("DATABASE_URL") and command not in NO_DATABASE_COMMANDS:
        from config import embedded

        if embedded.postgres_address() is None:
            sys.stderr.write(embedded.NOT_RUNNING_HELP + "\n")
            sys.exit(1)
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
