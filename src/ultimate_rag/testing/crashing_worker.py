"""TEST ONLY: a worker process that dies at once (SIGKILL, as a segfault in a native library
running in-process would) when it starts parsing a file whose name begins with ``poison``.

Acceptance tests run it as ``python -m ultimate_rag.testing.crashing_worker`` to reproduce a file
that kills every worker taking it. A crash of the parse *child* is already survived (the document
fails with a reason); this reproduces the case where the worker process itself goes. Nothing in the
product imports this module."""

from __future__ import annotations

import os
import signal
from typing import Any

from ..adapters.parsers.isolation import ParseRunner
from ..domain.models import DocumentSource

POISON_PREFIX = "poison"
_parse = ParseRunner.parse


async def _parse_or_die(self: ParseRunner, parser: Any, source: DocumentSource, *args: Any, **kwargs: Any) -> Any:
    if source.filename.startswith(POISON_PREFIX):
        os.kill(os.getpid(), signal.SIGKILL)
    return await _parse(self, parser, source, *args, **kwargs)


ParseRunner.parse = _parse_or_die  # type: ignore[method-assign]  # the test-only worker's one difference

if __name__ == "__main__":
    from ..worker import main

    main()
