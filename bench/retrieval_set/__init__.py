"""The retrieval evaluation set (written for this repository, CC0): documents in English, Chinese
and Korean, and questions that name the one document answering them. See ``documents.py``,
``questions.py``; ``build.py`` turns the documents into files (multi-page PDFs included)."""
