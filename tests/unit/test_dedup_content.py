"""What deduplication compares: a document's own text (figure placeholders left out), its assets'
bytes, and how much content it has."""

from __future__ import annotations

from ultimate_rag.domain.dedup import Content, content_hash, document_content
from ultimate_rag.domain.models import Block, ParsedAsset, ParsedDocument


def doc(*blocks: Block, assets: tuple[ParsedAsset, ...] = ()) -> ParsedDocument:
    return ParsedDocument(blocks=blocks, assets=assets)


def test_figure_placeholders_are_not_content() -> None:
    red, blue = ParsedAsset("page-1/xref-5", b"red pixels", "image/png", 1), ParsedAsset("page-1/xref-5", b"blue", "image/png", 1)
    a = document_content(doc(Block("figure", "[Image on page 1]", asset_ids=("page-1/xref-5",)), assets=(red,)))
    b = document_content(doc(Block("figure", "[Image on page 1]", asset_ids=("page-1/xref-5",)), assets=(blue,)))
    assert a.text == b.text == "" and a.amount == 0
    assert a.fingerprint() != b.fingerprint()  # different image bytes


def test_same_text_different_assets_are_different_and_same_assets_the_same() -> None:
    text = Block("paragraph", "The harbour ferry leaves every twenty minutes from pier four.")
    fig = Block("figure", "[Image: Pier map]", asset_ids=("img-1",))
    one = document_content(doc(text, fig, assets=(ParsedAsset("img-1", b"\x89PNG one", "image/png"),)))
    two = document_content(doc(text, fig, assets=(ParsedAsset("img-1", b"\x89PNG two", "image/png"),)))
    again = document_content(doc(text, Block("figure", "[Image: other alt]", asset_ids=("img-1",)),
                                 assets=(ParsedAsset("img-1", b"\x89PNG one", "image/png"),)))
    assert one.text == two.text and one.fingerprint() != two.fingerprint()
    assert one.fingerprint() == again.fingerprint()


def test_without_assets_the_fingerprint_is_the_text_hash_recorded_before() -> None:
    assert Content("Hello  World").fingerprint() == content_hash("hello world")


def test_amount_counts_non_space_characters_of_the_normalized_text() -> None:
    assert Content("TEST").amount == 4 and Content("  Te st \n").amount == 4
    assert Content("港口渡轮 每二十分钟").amount == 9
