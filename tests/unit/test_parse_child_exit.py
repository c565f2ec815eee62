"""A parse child whose worker is gone (killed: nobody reads its pipe any more) ends quietly, with
exit code 0 and no BrokenPipeError traceback. A real child process, started like the worker does."""

from __future__ import annotations

from uuid import uuid4

from ultimate_rag.adapters.parsers.isolation import _child, _mp_context
from ultimate_rag.adapters.parsers.limits import ParseLimits
from ultimate_rag.adapters.parsers.parse_time import TimeLimits
from ultimate_rag.domain.models import DocumentSource


def test_a_parse_child_whose_reader_is_gone_exits_quietly(capfd) -> None:
    ctx = _mp_context()
    receive, send = ctx.Pipe(duplex=False)
    receive.close()  # the worker died: the reading end of the pipe is closed
    text = "A paragraph that parses fine. " * 20000  # more than a pipe buffer: send() must write for real
    source = DocumentSource(uuid4(), "doc.txt", "text/plain", text.encode())
    process = ctx.Process(target=_child, name="ultimate-rag-parse-text", daemon=True,
                          args=(send, "text", source, ParseLimits(), 0, TimeLimits(60.0, 60.0, 60.0)))
    process.start()
    send.close()
    process.join(60)
    assert process.exitcode == 0
    assert "BrokenPipeError" not in capfd.readouterr().err
