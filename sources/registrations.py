"""What sources hands the loop, from SourcesConfig.ready: reading and correcting grants at their
source, through which the loop's witnessed connector reaches them
(reconciliation/connectors/at_source.py)."""

from reconciliation.connectors import at_source
from sources import actions


def register() -> None:
    """Once per process."""
    at_source.register(read_source=actions.read_source,
                       correct_at_source=actions.correct_at_source,
                       correct_tool_at_source=actions.correct_tool_at_source)
