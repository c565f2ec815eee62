"""Parse children (the processes that open hostile files) and the forkserver they come from see no
secret of the worker's environment. Run in a fresh interpreter: the forkserver is process-wide and
must be started after the secrets are in the environment, as in a real worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from ultimate_rag.adapters.parsers.child_env import clean_environment

SECRETS = {
    "ULTIMATE_RAG_ADMIN_KEY": "admin-key-must-not-leak-1",
    "ULTIMATE_RAG_DATABASE_URL": "postgresql://app:pw-must-not-leak-2@db.internal/rag",
    "DATABASE_URL": "postgresql://app:pw-must-not-leak-3@db.internal/rag",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-must-not-leak-4",
    "AWS_ACCESS_KEY_ID": "AKIAMUSTNOTLEAK5",
    "PGPASSWORD": "pg-password-must-not-leak-6",
    "OPENAI_API_KEY": "sk-must-not-leak-7",
    "PYTHON_TOKEN": "token-must-not-leak-8",
}

SCRIPT = textwrap.dedent("""
    import asyncio, json
    import multiprocessing.forkserver as forkserver
    import psutil
    from ultimate_rag.adapters.parsers.html import HtmlParser
    from ultimate_rag.adapters.parsers.isolation import ParseRunner
    from ultimate_rag.domain.models import DocumentSource

    async def main():
        runner = ParseRunner(timeout_seconds=60)
        page = b"<html><body><h1>Ferry</h1><p>The ferry leaves from pier four.</p></body></html>"
        parsed = await runner.parse(HtmlParser(), DocumentSource(None, "a.html", "text/html", page))
        server = psutil.Process(forkserver._forkserver._forkserver_pid)
        out = {"text": " ".join(b.text for b in parsed.blocks), "forkserver": server.environ()}
        if hasattr(runner, "probe_environment"):
            out["child"] = await runner.probe_environment()
        print(json.dumps(out))

    asyncio.run(main())
""")


def test_parse_children_and_their_forkserver_get_no_secrets() -> None:
    env = {**os.environ, **SECRETS, "LC_ALL": "C.UTF-8"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert "pier four" in report["text"]  # parsing works with the clean environment (PYTHONPATH kept)
    seen = json.dumps(report)
    leaked = [name for name, value in SECRETS.items() if value in seen]
    assert leaked == [], f"the parse processes saw {leaked}"
    child = report["child"]["os.environ"]
    assert child.get("LC_ALL") == "C.UTF-8" and child.get("PATH") == os.environ["PATH"]
    assert "ULTIMATE_RAG_ADMIN_KEY" not in report["child"]["proc"] and "ULTIMATE_RAG_ADMIN_KEY" not in child


def test_the_clean_environment_is_an_allow_list() -> None:
    env = {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_CTYPE": "C", "PYTHONPATH": "/src",
           "ULTIMATE_RAG_S3_SECRET_ACCESS_KEY": "x", "GITHUB_TOKEN": "x", "SOME_SERVICE_DSN": "x", "PGUSER": "u",
           "HTTPS_PROXY": "http://u:p@proxy/", "PYTHONSTARTUP_PASSWORD": "x"}
    assert clean_environment(env) == {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_CTYPE": "C",
                                      "PYTHONPATH": "/src"}
