"""A process's start-up with the cyclic garbage collector paused.

Loading the product makes ~300,000 objects that live as long as the process, and the
collector walked them three full times while they were being made: a quarter of the CPU
of loading `config.asgi` (~0.87 s against ~0.65 s; bench/RESULTS.md, 2026-12-06, second
session). The entry points (manage.py, `agentgov`, config/asgi.py) pause it before
they import Django; the last installed app's `ready()`, the end of `django.setup()`, moves
what was loaded out of its reach and starts it again. Start-up leaves a few thousand
objects of garbage: they are frozen with the rest (a full collection to free them costs
~0.15 s, as much as the pause saves)."""

import gc

from django.apps import AppConfig, apps


def pause_collector() -> None:
    """Before the imports of a start. Where Django is set up already (an entry point called
    inside a running process) the start is over: nothing would turn the collector back on."""
    if not apps.ready:
        gc.disable()


def resume_collector() -> None:
    """Start-up is over: what it loaded is kept for life, out of the collector's reach, and
    the collector runs again (also in a process that never paused it)."""
    gc.freeze()
    gc.enable()


class StartedConfig(AppConfig):
    """Last in INSTALLED_APPS: its `ready()` runs when every other app is ready."""

    name = "config.startup"
    label = "startup"
    verbose_name = "Start-up"

    def ready(self) -> None:
        resume_collector()
