"""pgvector recognises scipy arrays by looking ``scipy.sparse`` up in ``sys.modules``. When pymilvus
(a Milvus search in a worker thread) or datasketch (the dedup step) imported scipy for the first time
while the event loop built a sparse vector, that lookup met the half-initialised module and the
search answered 500 ("partially initialized module 'scipy.sparse' has no attribute 'sparray'"; seen
on the first hybrid search of a fresh `up` with Milvus). The database adapter now imports it first."""

from __future__ import annotations

import subprocess
import sys


def test_the_database_adapter_leaves_scipy_sparse_fully_imported() -> None:
    probe = ("import sys; import ultimate_rag.adapters.postgres.database; "
             "m = sys.modules.get('scipy.sparse'); "
             "sys.exit(0 if m is not None and hasattr(m, 'sparray') and hasattr(m, 'spmatrix') else 3)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
