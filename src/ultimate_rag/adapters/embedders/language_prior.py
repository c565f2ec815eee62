"""Reference language means shipped with the product (``language_prior.npz``, built by
scripts/language_prior.py): per script language, the local model's mean dense and learned sparse
vector over public parallel text (the Universal Declaration of Human Rights in English, Chinese,
Korean, Japanese, Russian and Arabic; source, commit and licence in docs/search.md).
Language centring blends them with a knowledge base's own means, so that it works from the first
document and moves smoothly towards the knowledge base's own as it grows (docs/search.md)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

PRIOR_FILE = Path(__file__).with_name("language_prior.npz")


@dataclass(frozen=True)
class LanguagePrior:
    """Per language: (dense mean, sparse mean) of ``model``'s vectors."""

    model: str
    means: dict[str, tuple[np.ndarray, np.ndarray]]


@cache
def shipped_prior() -> LanguagePrior | None:
    """The shipped means (None when the file is missing: centring then uses a knowledge base's own)."""
    if not PRIOR_FILE.exists():
        return None
    with np.load(PRIOR_FILE) as data:
        languages = [str(x) for x in data["languages"]]
        means = {lang: (data["dense"][i].astype(np.float32), data["sparse"][i].astype(np.float32))
                 for i, lang in enumerate(languages)}
        return LanguagePrior(str(data["model"]), means)
