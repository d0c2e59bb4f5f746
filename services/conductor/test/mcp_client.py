"""The official MCP Python client (the `mcp` package) calling Tempora's conductor: initialize, list the
tools, call `converse` once, and print what came back as one JSON line. Arguments: the MCP URL, the
access token, the request."""
import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


async def main(url: str, token: str, content: str) -> None:
    async with streamablehttp_client(url, headers={"Authorization": f"Bearer {token}"}) as (read, write, _):
        async with ClientSession(read, write) as session:
            initialized = await session.initialize()
            tools = await session.list_tools()
            result = await session.call_tool("converse", {"content": content})
            print(json.dumps({
                "server": initialized.serverInfo.name,
                "tools": [tool.name for tool in tools.tools],
                "is_error": bool(result.isError),
                "structured": result.structuredContent,
            }))


asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
