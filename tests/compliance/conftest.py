"""The clients' fixtures (a real daphne server, the refund agent on push and its key) and the
MCP proxy's (a real MCP server), for the stop tests that run what agents run."""

from tests.clients.conftest import agent_key, keys, push_agent, server  # noqa: F401
from tests.clients.test_mcp_proxy import http_upstream, state  # noqa: F401
