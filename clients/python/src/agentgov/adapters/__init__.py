"""Framework adapters: govern an existing agent object in a few lines.

    from agentgov.adapters.pydantic_ai import govern      # or .langgraph, .openai_agents
    governor = govern(agent, client=Client.from_env(), name="refund-agent").start()

Each framework module needs its optional extra (`pip install 'agentgov-client[pydantic-ai]'`);
this package itself imports no framework."""

from agentgov.adapters.governed import (
    Binding,
    CredentialsRefused,
    Governor,
    ToolRefused,
    Ungovernable,
)

__all__ = ["Binding", "CredentialsRefused", "Governor", "ToolRefused", "Ungovernable"]
