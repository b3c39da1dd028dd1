"""What kind of process this is, for the settings and the worker to read: set by an entry point
before Django reads its settings (config/asgi.py marks the web server's processes, manage.py
and `agentgov` the worker's). A module attribute, not an environment variable, so a process
one of them starts is not taken for one."""

WEB = "web"
WORKER = "worker"  # the worker command (`manage.py rqworker`, `agentgov worker`)
role = ""


def mark_command(command: str) -> None:
    """Called by the command-line entry points with the management command they run."""
    global role
    if command == "rqworker":
        role = WORKER
