"""Build the reference language means shipped with the product (adapters/embedders/language_prior.npz):
per script language, the mean dense (``passage:``) and learned sparse vector of the local model over
a reference corpus (both as the product computes them: adapters/embedders/pair.py), so that language
centring works in a knowledge base from its first document (docs/search.md). The corpus is the
project's own generated multilingual text (shared/bench/corpus.py, English, Chinese and Korean, 100
documents each, chunked as it chunks them); its SHA-256 is stored with the means.

    ULTIMATE_RAG_CORPUS=/path/to/shared/bench/corpus.py .venv/bin/python scripts/language_prior.py
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

import numpy as np

from ultimate_rag.adapters.embedders.language_prior import PRIOR_FILE
from ultimate_rag.adapters.embedders.local import MODEL_NAME
from ultimate_rag.adapters.embedders.pair import encode_pairs, load_model
from ultimate_rag.adapters.embedders.sparse import SPARSE_DIMENSION
from ultimate_rag.domain.search import script_language

PER_LANGUAGE = 40  # documents per language (the first 40 of the corpus: about 240 chunks each)


def main() -> None:
    path = Path(os.environ.get("ULTIMATE_RAG_CORPUS", "../shared/bench/corpus.py"))
    spec = importlib.util.spec_from_file_location("corpus", path)
    assert spec is not None and spec.loader is not None
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    texts = [chunk for doc in corpus.make_corpus(per_lang=PER_LANGUAGE)
             for chunk in corpus.chunk_text(doc["text"], doc["lang"])]
    model = load_model(None, single_pass=True)
    by_language: dict[str, list[str]] = {}
    for text in texts:
        by_language.setdefault(script_language(text), []).append(text)
    languages = sorted(by_language)
    dense, sparse, counts = [], [], []
    for language in languages:
        group = by_language[language]
        print(f"{language}: {len(group)} chunks", file=sys.stderr)
        pairs = encode_pairs(model, group, query=False, top_k=256)  # the product's recipe (pair.py)
        dense.append(np.asarray([d for d, _ in pairs], dtype=np.float32).mean(axis=0))
        total = np.zeros(SPARSE_DIMENSION, dtype=np.float64)
        for _, vector in pairs:
            for index, weight in vector.items():
                total[index] += weight
        sparse.append((total / len(group)).astype(np.float32))
        counts.append(len(group))
    np.savez_compressed(PRIOR_FILE, model=np.array(MODEL_NAME), languages=np.array(languages),
                        counts=np.array(counts), dense=np.stack(dense), sparse=np.stack(sparse),
                        source=np.array(f"shared/bench/corpus.py sha256={hashlib.sha256(path.read_bytes()).hexdigest()}"
                                        " (prefixed single-pass recipe)"))
    print(f"wrote {PRIOR_FILE}", file=sys.stderr)


if __name__ == "__main__":
    main()
