"""Reading and correcting an agent's grants at a permission source, for the witnessed connector
(reconciliation/connectors/witnessed.py). sources, which owns the sources and their readings,
sits above the loop and registers its actions from its AppConfig.ready. Fails closed: with
nothing registered, a source bound to an agent is never read as "no access" nor skipped; the
pass fails with a ConnectorError."""

from collections.abc import Callable
from typing import Any

from config.permission_sources import Source
from reconciliation.connectors.base import ConnectorError
from registry.models import Agent

_actions: dict[str, Callable[..., Any]] = {}


def register(*, read_source: Callable[[Source, Agent], Any],
             correct_at_source: Callable[..., dict[str, Any]],
             correct_tool_at_source: Callable[..., dict[str, Any]]) -> None:
    """sources' `read_source(source, agent)`, `correct_at_source(source, agent, resource,
    wanted, *, key)` and `correct_tool_at_source(source, agent, tool, wanted, *, key)`
    (sources/actions.py), once per process."""
    _actions.update(read_source=read_source, correct_at_source=correct_at_source,
                    correct_tool_at_source=correct_tool_at_source)


def _action(name: str) -> Callable[..., Any]:
    if name not in _actions:
        raise ConnectorError("permission sources are bound to this agent but cannot be reached "
                             "(is sources in INSTALLED_APPS?)")
    return _actions[name]


def read_source(source: Source, agent: Agent) -> Any:
    """What `agent`'s role can do at `source` now (a reading with `.access`)."""
    return _action("read_source")(source, agent)


def correct_at_source(source: Source, agent: Agent, resource: str, wanted: str | None,
                      *, key: str) -> dict[str, Any]:
    """Bring `agent`'s role to `wanted` on `resource` at the source; what was done."""
    return _action("correct_at_source")(source, agent, resource, wanted, key=key)


def correct_tool_at_source(source: Source, agent: Agent, tool: str, wanted: bool,
                           *, key: str) -> dict[str, Any]:
    """Take `tool` from `agent`'s role at the source; what was done."""
    return _action("correct_tool_at_source")(source, agent, tool, wanted, key=key)
