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


def test_near_mode_signatures_count_images_too() -> None:
    from ultimate_rag.domain.dedup import DedupMode, estimated_jaccard
    from ultimate_rag.services.dedup import compute_signature

    text = " ".join(f"Pier {i}: the harbour ferry leaves every twenty minutes." for i in range(30))
    one, two = Content(text, ("a" * 64,)), Content(text, ("b" * 64,))
    a, b = compute_signature(one, DedupMode.NEAR), compute_signature(two, DedupMode.NEAR)
    assert a.text_hash != b.text_hash
    assert a.hashvalues and b.hashvalues and 0.9 < estimated_jaccard(a.hashvalues, b.hashvalues) < 1.0
    assert compute_signature(Content(text, ("a" * 64,)), DedupMode.NEAR) == a
