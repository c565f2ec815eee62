"""What the upload (and the worker) says about a file no parser takes, when the answer is not
"another format": empty, damaged, encrypted, or text in an encoding we do not read (issue's
real files: a zero-byte and a corrupt PDF, a password-protected DOCX (as Office writes it), EUC-TW and
ISO-2022-CN text). Damaged, empty and encrypted files are InvalidDocumentError (422); an encoding
or a legacy format we do not read is UnsupportedFormatError (415, with the supported formats)."""

from __future__ import annotations

import io
import random

import docx
import pytest

from tests.unit.office_builders import encrypted_ooxml
from ultimate_rag.adapters.parsers import default_registry
from ultimate_rag.adapters.parsers.diagnose import OLE_MAGIC
from ultimate_rag.domain.errors import InvalidDocumentError, UnsupportedFormatError
from ultimate_rag.domain.models import DocumentSource


def refusal(name: str, content: bytes) -> Exception:
    with pytest.raises((InvalidDocumentError, UnsupportedFormatError)) as caught:
        default_registry().resolve(DocumentSource(None, name, "application/octet-stream", content))
    return caught.value


def docx_bytes(text: str) -> bytes:
    document = docx.Document()
    document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def euc_tw_text() -> bytes:
    """EUC-TW's shape: ASCII, CNS 11643 plane 1 as two bytes A1-FE, other planes as 8E A2-B0 xx xx."""
    rnd = random.Random(3)
    parts = []
    for _ in range(600):
        kind = rnd.random()
        if kind < 0.2:
            parts.append(b"abc ")
        elif kind < 0.8:
            parts.append(bytes([rnd.randrange(0xC4, 0xFD), rnd.randrange(0xA1, 0xFE)]))
        else:
            parts.append(bytes([0x8E, 0xA2, rnd.randrange(0xA1, 0xF2), rnd.randrange(0xA1, 0xFE)]))
    return b"".join(parts)


def test_a_zero_byte_pdf_is_empty() -> None:
    error = refusal("scan.pdf", b"")
    assert isinstance(error, InvalidDocumentError) and str(error) == "the file is empty (0 bytes): there is no PDF to read"


def test_a_pdf_without_objects_is_damaged() -> None:
    error = refusal("report.pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n" + random.Random(1).randbytes(3000))
    assert isinstance(error, InvalidDocumentError) and "the PDF is damaged" in str(error)


def test_a_password_protected_docx_is_encrypted() -> None:
    error = refusal("protected.docx", encrypted_ooxml(docx_bytes("a secret plan")))
    assert isinstance(error, InvalidDocumentError)
    assert str(error) == "the DOCX file is encrypted with a password; remove the password in Word and upload it again"


def test_a_legacy_office_file_named_as_ooxml_says_so() -> None:
    error = refusal("old.xlsx", OLE_MAGIC + bytes(4000))
    assert isinstance(error, UnsupportedFormatError) and "legacy Excel document (.xls" in str(error)
    assert ".xlsx" in error.supported_formats


@pytest.mark.parametrize(("content", "named"), [
    (euc_tw_text(), "EUC-TW (CNS 11643)"),
    (b"\x1b$)A" + b"\x0e" + b"VP" * 200 + b"\x0f end\n", "ISO-2022-CN"),
])
def test_text_in_an_encoding_we_do_not_read_is_named(content: bytes, named: str) -> None:
    error = refusal("notes.txt", content)
    assert isinstance(error, UnsupportedFormatError)
    assert f"the text is in {named}, an encoding we do not read" in str(error)


def test_noise_is_still_binary_data() -> None:
    assert "content is binary data" in str(refusal("noise.txt", random.Random(9).randbytes(4000)))
