"""What is wrong with a file that no parser accepts, when it is not merely another format: the
registry asks before answering "unsupported file format", so that the answer says what the
user must do.

* an empty file named as a binary format (``.pdf``, ``.docx``): "the file is empty";
* a PDF with no readable object: damaged (truncated or corrupt);
* an OLE compound file named ``.docx``/``.xlsx``/``.pptx``: Office encrypts OOXML with a password
  by wrapping it in one (``EncryptionInfo`` and ``EncryptedPackage`` streams): encrypted;
  without those streams it is a legacy binary document (``.doc``, ``.xls``, ``.ppt``) renamed;
* text in an encoding there is no decoder for here (EUC-TW, ISO-2022-CN): named, with what to do.

Damaged, empty and encrypted files are ``InvalidDocumentError`` (422 at upload: the format is
read, this file cannot be); an encoding or a legacy format we do not read is
``UnsupportedFormatError`` (415, with the supported formats).
"""

from __future__ import annotations

from ultimate_rag.domain.errors import InvalidDocumentError, UltimateRagError, UnsupportedFormatError

from .detect import OCTET_STREAM
from .text_encodings import ISO2022_CN_ESCAPES, looks_like_euc_tw

OLE_MAGIC = bytes.fromhex("D0CF11E0A1B11AE1")
_ENCRYPTED_PACKAGE = "EncryptedPackage".encode("utf-16-le")
_OOXML = {".docx": ("Word", ".doc"), ".xlsx": ("Excel", ".xls"), ".pptx": ("PowerPoint", ".ppt"),
          ".docm": ("Word", ".doc"), ".xlsm": ("Excel", ".xls"), ".pptm": ("PowerPoint", ".ppt")}
_BINARY_EXTENSIONS = frozenset({".pdf", ".docx", ".xlsx", ".pptx", ".epub", ".odt", ".ods", ".odp", ".png", ".jpg",
                                ".jpeg", ".tif", ".tiff", ".webp"})


def diagnose(content: bytes, extension: str, kind: str,
             supported: tuple[str, ...]) -> UltimateRagError | None:
    """The error that says what is wrong with a file no parser accepted, or None when "another
    format" is the right answer."""
    if not content and extension in _BINARY_EXTENSIONS:
        return InvalidDocumentError(f"the file is empty (0 bytes): there is no {extension[1:].upper()} to read")
    if kind == "binary:application/pdf" and extension == ".pdf":
        return InvalidDocumentError("the PDF is damaged: no PDF object can be read in it (the file is truncated "
                                    "or corrupt)")
    if content.startswith(OLE_MAGIC) and extension in _OOXML:
        app, legacy = _OOXML[extension]
        if _ENCRYPTED_PACKAGE in content:
            return InvalidDocumentError(f"the {extension[1:].upper()} file is encrypted with a password; remove the "
                                        f"password in {app} and upload it again")
        return UnsupportedFormatError(
            f"unsupported file format: the file is a legacy {app} document ({legacy}, Office 97-2003) named "
            f"{extension}; save it as {extension} and upload it again", supported_formats=supported)
    if kind == f"binary:{OCTET_STREAM}":
        encoding = unreadable_encoding(content)
        if encoding:
            return UnsupportedFormatError(
                f"unsupported file format: the text is in {encoding}, an encoding we do not read; convert it "
                "to UTF-8 and upload it again", supported_formats=supported)
    return None


def unreadable_encoding(content: bytes) -> str:
    """The name of a text encoding the content is written in and no decoder here reads, or ""."""
    head = content[:65536]
    if b"\x1b" in head and max(head[:4096], default=0) < 0x80 and any(e in head for e in ISO2022_CN_ESCAPES):
        return "ISO-2022-CN"
    if looks_like_euc_tw(content):
        return "EUC-TW (CNS 11643)"
    return ""
