"""An MCP client on the official Python SDK (PyPI `mcp`), driven by tests/it/python_sdk.rs.

Usage: client.py GATEWAY_MCP_URL AGENT_MCP_URL MCP_TOKEN ADMIN_TOKEN PAGE_URL

Over Streamable HTTP it initializes, lists tools, calls `fetch` ungated on the agent scope,
calls `fetch` gated on the gateway scope (it parks), approves the call over the admin API and
awaits the result with `airlock_await_decision`. The last stdout line is a JSON summary.
"""

import json
import sys

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def session_on(url, token, run):
    headers = {"authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await run(session)


def body(result):
    return (result.structured_content or {}).get("body")


async def main(gateway, agent, token, admin, page):
    summary = {}

    async def ungated(session):
        tools = await session.list_tools()
        summary["agent_tools"] = [t.name for t in tools.tools]
        result = await session.call_tool("fetch", {"url": page})
        summary["ungated"] = {"is_error": result.is_error, "body": body(result)}

    async def gated(session):
        tools = await session.list_tools()
        summary["tools"] = [t.name for t in tools.tools]
        print("tools:", ", ".join(summary["tools"]), file=sys.stderr)
        parked = await session.call_tool("fetch", {"url": page})
        status = parked.structured_content or {}
        summary["parked"] = {"is_error": parked.is_error, "status": status.get("status")}
        invocation = status["invocation_id"]
        base = gateway.rsplit("/mcp", 1)[0]
        async with httpx2.AsyncClient(timeout=30) as http:
            approved = await http.post(
                f"{base}/v1/invocations/{invocation}/approve",
                headers={"authorization": f"Bearer {admin}"},
                json={},
            )
        summary["approve_status"] = approved.status_code
        done = await session.call_tool(
            "airlock_await_decision", {"invocation_id": invocation, "wait_seconds": 10}
        )
        settled = done.structured_content or {}
        summary["awaited"] = {
            "is_error": done.is_error,
            "status": settled.get("status"),
            "decided_by": settled.get("decided_by"),
            "body": (settled.get("result") or {}).get("body"),
        }

    await session_on(agent, token, ungated)
    await session_on(gateway, token, gated)
    print(json.dumps(summary))


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:6])
