"""Connector sources without a database: sitemap parsing (gzip, refused DTDs, the item limit),
filenames, the directory confinement (links, and a parent swapped for a link mid-read), and
configuration validation."""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ultimate_rag.domain.errors import PermanentError, UltimateRagError
from ultimate_rag.services.connectors import directory
from ultimate_rag.services.connectors.base import ConnectorConfigError, name_from_url, with_extension
from ultimate_rag.services.connectors.directory import DirectorySource, confine
from ultimate_rag.services.connectors.sitemap import parse_sitemap
from ultimate_rag.services.connectors.sources import ConnectorLimits, validate_config

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
LIMITS = ConnectorLimits(max_item_bytes=10_000, fetch_timeout_seconds=5, max_items=3, sitemap_max_depth=1,
                         directory_roots="", outbound_allow_networks="", s3={})


def test_sitemaps_plain_and_gzipped() -> None:
    xml = f"<urlset {NS}><url><loc> https://a.example/x </loc></url><url><loc>https://a.example/y</loc></url></urlset>"
    assert parse_sitemap(xml.encode(), 10_000) == ("urlset", ["https://a.example/x", "https://a.example/y"])
    assert parse_sitemap(gzip.compress(xml.encode()), 10_000)[1] == ["https://a.example/x", "https://a.example/y"]
    with pytest.raises(PermanentError, match="larger than the limit of 10000 bytes"):
        parse_sitemap(gzip.compress(b" " * 50_000), 10_000)
    many = f"<urlset {NS}>" + "".join(f"<url><loc>https://a.example/{i}</loc></url>" for i in range(100)) + "</urlset>"
    assert parse_sitemap(many.encode(), 10_000, max_items=3) == \
        ("urlset", ["https://a.example/0", "https://a.example/1", "https://a.example/2"])


@pytest.mark.parametrize("data", [
    b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">]><urlset><url><loc>&lol;</loc></url></urlset>',
    b"<html><body>not a sitemap</body></html>", b"<urlset><url>", b"",
    # the same DTD in UTF-16: no "<!DOCTYPE" bytes to find, refused by the parser itself
    '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE u [<!ENTITY a "x">]><urlset><url><loc>&a;</loc></url></urlset>'
    .encode("utf-16"),
    b'<!DOCTYPE urlset SYSTEM "http://127.0.0.1:9/evil.dtd"><urlset/>',
    # truncated gzip; mtime fixed: the header's timestamp is part of the test's id, which every
    # xdist worker must compute alike (collected a second apart, they differed and the run stopped)
    gzip.compress(b"<urlset><url><loc>https://a.example/</loc></url></urlset>", mtime=0)[:-12],
])
def test_bad_sitemaps_are_refused(data: bytes) -> None:
    with pytest.raises(PermanentError):
        parse_sitemap(data, 10_000)


def test_filenames_follow_the_url_and_the_content_type() -> None:
    assert name_from_url("https://a.example/docs/guide%20one.md?x=1") == "guide one.md"
    assert name_from_url("https://a.example/") == "index"
    assert with_extension("index", "text/html; charset=utf-8") == "index.html"
    assert with_extension("notes.md", "text/html") == "notes.md"
    assert with_extension("blob", None) == "blob"


def test_directory_confinement(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (root / "out").symlink_to(tmp_path / "outside")
    roots = [root.resolve()]
    assert confine(str(root / "docs"), roots) == (root / "docs").resolve()
    for bad in (str(tmp_path / "outside"), str(root / "out"), str(root / "docs" / ".." / ".."), "docs", "", 5):
        with pytest.raises(ConnectorConfigError):
            confine(bad, roots)
    with pytest.raises(ConnectorConfigError, match="disabled"):
        confine(str(root), [])


async def test_directory_source_lists_regular_files_only_and_caps_size(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text("hidden")
    (root / "a.txt").write_text("a")
    (root / "big.txt").write_bytes(b"b" * 101)
    (tmp_path / "secret").write_text("s")
    (root / "link.txt").symlink_to(tmp_path / "secret")
    source = DirectorySource(str(root), [root.resolve()], max_bytes=100, max_items=10)
    items = await source.discover()
    assert [i.external_id for i in items] == ["a.txt", "big.txt"]
    fetched = await source.fetch(items[0], None)
    assert fetched.content == b"a" and fetched.etag == items[0].version
    from ultimate_rag.services.connectors.base import Known

    assert (await source.fetch(items[0], Known(etag=items[0].version))).content is None  # not even read
    with pytest.raises(PermanentError, match="limit"):
        await source.fetch(items[1], None)


class SwapOnOpen:
    """Stands in for the ``os`` module inside ``directory.py``: just before the ``os.open`` call
    that ``when`` picks, it runs ``swap`` (once). This hits the window between a path check and the
    open deterministically — the race an attacker who can write in the directory would try to win."""

    def __init__(self, when: Callable[[Any], bool], swap: Callable[[], None]) -> None:
        self._when, self._swap, self.swapped = when, swap, False

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def open(self, path: Any, flags: int, *args: Any, **kw: Any) -> int:
        if not self.swapped and self._when(path):
            self.swapped = True
            self._swap()
        return os.open(path, flags, *args, **kw)


@pytest.mark.parametrize("moment", ["first open of the read", "open of the file itself"])
async def test_a_parent_swapped_for_a_link_mid_read_never_reads_outside(tmp_path: Path, monkeypatch, moment) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "file.txt").write_text("inside")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "file.txt").write_text("SECRET admin key")
    source = DirectorySource(str(root), [root.resolve()], max_bytes=1000, max_items=10)
    items = await source.discover()
    assert [i.external_id for i in items] == ["sub/file.txt"]

    def swap() -> None:  # the checked parent becomes a link out of the root
        (root / "sub").rename(tmp_path / "moved")
        (root / "sub").symlink_to(tmp_path / "outside")

    first = moment.startswith("first")
    hook = SwapOnOpen(lambda path: first or str(path).endswith("file.txt"), swap)
    monkeypatch.setattr(directory, "os", hook)
    try:
        content = (await source.fetch(items[0], None)).content
    except UltimateRagError as exc:
        content = None
        assert "symbolic link" in exc.message
    assert hook.swapped
    assert content != b"SECRET admin key"
    assert content in (None, b"inside")  # refused, or the file of the directory that was opened


async def test_links_out_are_never_listed_or_read(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (root / "real" / "a.txt").write_text("a")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("s")
    (root / "dirlink").symlink_to(tmp_path / "outside")
    (root / "inlink.txt").symlink_to(root / "real" / "a.txt")  # even a link inside is not followed
    source = DirectorySource(str(root), [root.resolve()], max_bytes=100, max_items=10)
    assert [i.external_id for i in await source.discover()] == ["real/a.txt"]
    from ultimate_rag.services.connectors.base import RemoteItem

    for rel in ("dirlink/secret.txt", "inlink.txt", "../outside/secret.txt", "real/../dirlink/secret.txt"):
        with pytest.raises(PermanentError):
            await source.fetch(RemoteItem(rel, "x"), None)
    # the connector's directory itself replaced by a link after it was checked
    root.rename(tmp_path / "old-root")
    root.symlink_to(tmp_path / "outside")
    with pytest.raises(PermanentError, match="without following a link"):
        await source.discover()


def test_config_validation() -> None:
    assert validate_config("urls", {"urls": ["https://a.example/x", "https://a.example/x"], "extra": 1}, LIMITS) \
        == {"urls": ["https://a.example/x"]}
    assert validate_config("s3", {"bucket": "my-bucket", "prefix": "/docs/"}, LIMITS) == \
        {"bucket": "my-bucket", "prefix": "docs"}
    for kind, config in (("urls", {"urls": ["https://a.example/"] * 2 + ["https://b.example/", "https://c.example/",
                                                                        "https://d.example/"]}),
                         ("urls", {"urls": ["https://a.example/\x00"]}), ("sitemap", {"url": "ftp://x/"}),
                         ("s3", {"bucket": "UPPER"}), ("s3", {"bucket": "ok-bucket", "prefix": "a/../b"}),
                         ("directory", {"path": "/tmp"}), ("nope", {})):
        with pytest.raises(ConnectorConfigError):
            validate_config(kind, config, LIMITS)
