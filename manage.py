#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys

from config import process_role, startup

# Commands that never touch Redis: they must not start the embedded server.
WITHOUT_REDIS = {"check", "collectstatic", "diffsettings", "help", "makemigrations", "migrate",
                 "showmigrations", "spectacular", "sqlmigrate", "version"}


def main() -> None:
    startup.pause_collector()  # until django.setup() ends (config/startup.py)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.umask(0o077)  # what the product writes under var/ (and elsewhere) is its owner's only
    command = sys.argv[1] if len(sys.argv) > 1 else "help"
    process_role.mark_command(command)  # a worker's process replaces itself (config/worker.py)
    if not os.environ.get("REDIS_URL") and command not in WITHOUT_REDIS and (
            not command.startswith("-")):
        from config import embedded_redis
        from config.private_files import var_dir

        embedded_redis.serve_this_process(var_dir() / "redis")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
