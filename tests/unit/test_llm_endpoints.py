"""The provider timeout a chat endpoint gets when none is configured: minutes for a model on this
machine or the local network (a CPU reads a long prompt slowly), a minute for a hosted API; and a
local endpoint's timeout is not retried (its server is still busy with the abandoned request)."""

from __future__ import annotations

import pytest

from ultimate_rag.adapter_factories import make_chat_model
from ultimate_rag.adapters.llm import OpenAICompatibleChat, is_local_endpoint, provider_timeout
from ultimate_rag.settings import Settings


@pytest.mark.parametrize(("url", "local"), [
    ("http://127.0.0.1:8080/v1", True), ("http://localhost:11434/v1", True), ("http://[::1]:8000/v1", True),
    ("http://192.168.1.20:11434/v1", True), ("http://10.0.0.5/v1", True), ("http://ollama:11434/v1", True),
    ("http://host.docker.internal:11434/v1", True), ("http://gpu-box.local:8000/v1", True),
    ("https://api.openai.com/v1", False), ("https://dashscope.aliyuncs.com/compatible-mode/v1", False),
    ("http://8.8.8.8/v1", False), ("not a url", False),
])
def test_local_endpoints_are_told_from_the_url(url: str, local: bool) -> None:
    assert is_local_endpoint(url) is local
    assert provider_timeout(url, None) == (300.0 if local else 60.0)
    assert provider_timeout(url, 12.5) == 12.5  # a configured timeout is kept


@pytest.mark.parametrize(("url", "seconds", "retried"), [("http://127.0.0.1:8080/v1", 300.0, False),
                                                          ("https://api.openai.com/v1", 60.0, True)])
def test_the_chat_model_gets_the_timeout_of_its_endpoint(tmp_path, url: str, seconds: float, retried: bool) -> None:
    settings = Settings(data_dir=tmp_path, llm_base_url=url, llm_model="m")
    chat = make_chat_model(settings)
    assert isinstance(chat, OpenAICompatibleChat)
    assert chat._seconds == seconds and chat._retry_timeouts is retried
