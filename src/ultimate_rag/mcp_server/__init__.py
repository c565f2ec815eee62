"""The Model Context Protocol server: the same tools over stdio (``ultimate-rag mcp``) and over
Streamable HTTP at ``/mcp`` on the API (:mod:`.http`)."""
