"""Build the reference language means shipped with the product (adapters/embedders/language_prior.npz):
per script language, the mean dense (``passage:``) and learned sparse vector of the local model over
public reference text, so that language centring works in a knowledge base from its first document
(docs/search.md).

The text is the Universal Declaration of Human Rights in six languages, one per script the
centring tells apart (English for Latin script, Simplified Chinese, Korean, Japanese, Russian for
Cyrillic, Arabic), as the "UDHR in Unicode" project publishes it in plain text (git mirror
github.com/unicode-corpus/udhr-in-unicode, folder ``data/txt``; © OHCHR, whose translations may be
freely reproduced — docs/search.md names the commit). It is the same text in every language, so
the means differ by language, not by topic: what centring needs. Nothing of it is in this
repository; only the means are.

Each text is cut by the product's chunker at the default chunk size (one paragraph a line) and
embedded with the product's recipe (adapters/embedders/pair.py); the chunks' script languages are
checked against the one expected.

    .venv/bin/python scripts/language_prior.py --udhr /path/to/udhr-in-unicode/data/txt [--commit SHA]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from uuid import uuid4

import numpy as np

from ultimate_rag.adapters.chunking.chunker import StructuredChunker
from ultimate_rag.adapters.embedders.language_prior import PRIOR_FILE
from ultimate_rag.adapters.embedders.local import MODEL_NAME
from ultimate_rag.adapters.embedders.pair import encode_pairs, load_model
from ultimate_rag.adapters.embedders.sparse import SPARSE_DIMENSION
from ultimate_rag.adapters.parsers.text import paragraph_blocks
from ultimate_rag.domain.models import KnowledgeBaseSettings, ParsedDocument
from ultimate_rag.domain.search import script_language

FILES = {"latin": "udhr_eng.txt", "zh": "udhr_cmn_hans.txt", "ko": "udhr_kor.txt", "ja": "udhr_jpn.txt",
         "cyrillic": "udhr_rus.txt", "arabic": "udhr_arb.txt"}


def body(text: str) -> str:
    """The declaration itself: the project's header (title, copyright, "---") left out, one
    paragraph a line."""
    declaration = text.split("\n---\n", 1)[1]
    return "\n\n".join(line.strip() for line in declaration.splitlines() if line.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--udhr", type=Path, required=True, help="the UDHR in Unicode project's data/txt folder")
    parser.add_argument("--commit", default="", help="the mirror's commit, recorded with the means")
    args = parser.parse_args()
    model = load_model(None, single_pass=True)
    chunker = StructuredChunker(lambda t: int(model.token_count(t)))
    defaults = KnowledgeBaseSettings()
    languages, dense, sparse, counts, digests = [], [], [], [], []
    for language, name in FILES.items():
        raw = (args.udhr / name).read_bytes()
        parsed = ParsedDocument(blocks=tuple(paragraph_blocks(body(raw.decode("utf-8")))))
        chunks = chunker.split(parsed, document_id=uuid4(), knowledge_base_id=uuid4(), revision=1,
                               chunk_size=defaults.chunk_size_tokens, overlap=defaults.chunk_overlap_tokens)
        texts = [c.embedding_text for c in chunks if script_language(c.content) == language]
        print(f"{language}: {name}, {len(texts)} of {len(chunks)} chunks", file=sys.stderr)
        pairs = encode_pairs(model, texts, query=False, top_k=256)  # the product's recipe (pair.py)
        total = np.zeros(SPARSE_DIMENSION, dtype=np.float64)
        for _, vector in pairs:
            for index, weight in vector.items():
                total[index] += weight
        languages.append(language)
        dense.append(np.asarray([d for d, _ in pairs], dtype=np.float32).mean(axis=0))
        sparse.append((total / len(texts)).astype(np.float32))
        counts.append(len(texts))
        digests.append(f"{name} sha256={hashlib.sha256(raw).hexdigest()}")
    source = (f"UDHR in Unicode, github.com/unicode-corpus/udhr-in-unicode {args.commit} data/txt"
              f" (c) OHCHR: {'; '.join(digests)} (prefixed single-pass recipe, chunk size"
              f" {defaults.chunk_size_tokens})")
    np.savez_compressed(PRIOR_FILE, model=np.array(MODEL_NAME), languages=np.array(languages),
                        counts=np.array(counts), dense=np.stack(dense), sparse=np.stack(sparse),
                        source=np.array(source))
    print(f"wrote {PRIOR_FILE}", file=sys.stderr)


if __name__ == "__main__":
    main()
