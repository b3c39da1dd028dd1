"""Framework adapters: govern an existing agent object in a few lines.

    from agentgov.adapters.pydantic_ai import govern      # or .langgraph, .openai_agents
    governor = govern(agent, client=Client.from_env(), name="refund-agent").start()

Each framework module needs its optional extra (`pip install 'agentgov-client[pydantic-ai]'`);
this package itself imports no framework."""

from agentgov.adapters.governed import Binding, Governor, ToolRefused

__all__ = ["Binding", "Governor", "ToolRefused"]
