"""DOCX beyond the body's paragraphs, on files python-docx writes here: tables nested in cells
(the structure of python-docx's ``blk-paras-and-tables.docx``), one-cell layout tables, footnotes
and endnotes (parts python-docx cannot write: added to the zip as Word writes them), comments with
their authors, and page headers and footers (indexed once; page numbers and title repeats not)."""

from __future__ import annotations

import io
import re
import zipfile

import docx
import pytest
from docx.oxml import OxmlElement
from docx.oxml.ns import qn

from ultimate_rag.adapters.parsers.docx import DocxParser
from ultimate_rag.domain.errors import InvalidDocumentError
from ultimate_rag.domain.models import DocumentSource

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def save(document) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def parse(content: bytes):
    return DocxParser().parse(DocumentSource(None, "a.docx", "application/octet-stream", content))


def nested_tables_docx() -> bytes:
    document = docx.Document()
    document.add_paragraph("Paragraph before the tables.")
    outer = document.add_table(rows=2, cols=2)
    outer.cell(0, 0).text, outer.cell(0, 1).text = "Pier", "Departures"
    outer.cell(1, 0).text = "Four"
    inner = outer.cell(1, 1).add_table(rows=2, cols=2)
    for r, (a, b) in enumerate([("Weekday", "06:00"), ("Sunday", "08:30")]):
        inner.cell(r, 0).text, inner.cell(r, 1).text = a, b
    deeper = inner.cell(1, 1).add_table(rows=1, cols=2)
    deeper.cell(0, 0).text, deeper.cell(0, 1).text = "Holiday", "09:15"
    frame = document.add_table(rows=1, cols=1)  # a layout frame around a heading, text and a table
    cell = frame.cell(0, 0)
    cell.paragraphs[0].text = "Night service"
    cell.paragraphs[0].style = document.styles["Heading 2"]
    cell.add_paragraph("The last ferry leaves at midnight.")
    framed = cell.add_table(rows=2, cols=2)
    framed.cell(0, 0).text, framed.cell(0, 1).text = "Pier", "Last"
    framed.cell(1, 0).text, framed.cell(1, 1).text = "Two", "23:59"
    document.add_paragraph("Paragraph after the tables.")
    return save(document)


def test_nested_tables_are_indexed_after_their_table() -> None:
    parsed = parse(nested_tables_docx())
    tables = [b.text for b in parsed.blocks if b.kind == "table"]
    assert tables[0] == "| Pier | Departures |\n|---|---|\n| Four | [nested table] |"
    assert tables[1] == "| Weekday | 06:00 |\n|---|---|\n| Sunday | 08:30 [nested table] |"
    assert tables[2] == "| Holiday | 09:15 |\n|---|---|"
    assert [(b.kind, b.text) for b in parsed.blocks][4:6] == [
        ("heading", "Night service"), ("paragraph", "The last ferry leaves at midnight.")]
    assert tables[3] == "| Pier | Last |\n|---|---|\n| Two | 23:59 |"
    assert parsed.blocks[0].text == "Paragraph before the tables."
    assert parsed.blocks[-1].text == "Paragraph after the tables."


def test_hostile_table_nesting_is_flattened_not_recursed() -> None:
    document = docx.Document()
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text = "top"
    for depth in range(40):
        cell = table.cell(0, 1)
        cell.paragraphs[0].text = f"level {depth}"
        table = cell.add_table(rows=1, cols=2)
        table.cell(0, 0).text = f"cell {depth}"
    text = parse(save(document)).text
    assert all(f"cell {depth}" in text for depth in range(40))


def add_notes(content: bytes, kind: str, notes: dict[int, str]) -> bytes:
    """Adds a footnotes or endnotes part, its relationship and its content type, as Word does."""
    tag = kind[:-1]
    body = "".join(
        f'<w:{tag} w:id="{n}"><w:p><w:r><w:t xml:space="preserve">{text}</w:t></w:r></w:p></w:{tag}>'
        for n, text in notes.items())
    part = (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:{kind} xmlns:w="{W}">'
            f'<w:{tag} w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:{tag}>'
            f'<w:{tag} w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/></w:r></w:p>'
            f'</w:{tag}>{body}</w:{kind}>')
    source = zipfile.ZipFile(io.BytesIO(content))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "[Content_Types].xml":
                data = data.replace(b"</Types>", (
                    f'<Override PartName="/word/{kind}.xml" ContentType="application/vnd.openxmlformats-'
                    f'officedocument.wordprocessingml.{kind}+xml"/></Types>').encode())
            elif item.filename == "word/_rels/document.xml.rels":
                data = data.replace(b"</Relationships>", (
                    f'<Relationship Id="rId{kind}" Type="http://schemas.openxmlformats.org/officeDocument/'
                    f'2006/relationships/{kind}" Target="{kind}.xml"/></Relationships>').encode())
            target.writestr(item, data)
        target.writestr(f"word/{kind}.xml", part)
    return out.getvalue()


def reference(paragraph, kind: str, ident: int) -> None:
    run = paragraph.add_run()
    ref = OxmlElement(f"w:{kind}Reference")
    ref.set(qn("w:id"), str(ident))
    run._r.append(ref)


def notes_docx() -> bytes:
    document = docx.Document()
    first = document.add_paragraph("Ferries run every twenty minutes")
    reference(first, "footnote", 1)
    first.add_run(" except on holidays.")
    document.add_paragraph("Tickets are sold on board.")
    table = document.add_table(rows=2, cols=1)
    table.cell(0, 0).text = "Fare"
    reference(table.cell(1, 0).paragraphs[0], "footnote", 2)
    last = document.add_paragraph("See the harbour office")
    reference(last, "endnote", 1)
    return add_notes(add_notes(save(document), "footnotes", {1: "Holiday timetable on the website.",
                                                               2: "Children travel free.",
                                                               3: "A footnote nothing references."}),
                     "endnotes", {1: "Harbour office, pier one, 8:00–17:00."})


def test_footnotes_and_endnotes_follow_their_reference_with_a_marker() -> None:
    parsed = parse(notes_docx())
    texts = [b.text for b in parsed.blocks]
    assert texts[:3] == ["Ferries run every twenty minutes[^1] except on holidays.",
                         "[^1] Holiday timetable on the website.", "Tickets are sold on board."]
    assert texts[3] == "| Fare |\n|---|\n| [^2] |" and texts[4] == "[^2] Children travel free."
    assert texts[5:7] == ["See the harbour office[^e1]", "[^e1] Harbour office, pier one, 8:00–17:00."]
    assert texts[7] == "[^3] A footnote nothing references."  # never lost


def test_notes_part_with_a_dtd_is_refused() -> None:
    content = add_notes(save(docx.Document()), "footnotes", {1: "x"})
    source = zipfile.ZipFile(io.BytesIO(content))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "word/footnotes.xml":
                data = re.sub(rb"\?>", b'?><!DOCTYPE x [<!ENTITY a "aaaa">]>', data, count=1)
            target.writestr(item, data)
    with pytest.raises(InvalidDocumentError, match=r"footnotes\.xml declares a DTD"):
        parse(out.getvalue())


def test_comments_follow_their_paragraph_with_their_author() -> None:
    document = docx.Document()
    paragraph = document.add_paragraph("The night ferry stops at eleven.")
    document.add_comment(paragraph.runs, text="Check the winter timetable.", author="Min-jun Kim", initials="MK")
    document.add_paragraph("Tickets are sold on board.")
    parsed = parse(save(document))
    assert [b.text for b in parsed.blocks] == [
        "The night ferry stops at eleven.", "[Comment by Min-jun Kim: Check the winter timetable.]",
        "Tickets are sold on board."]


def page_field(paragraph) -> None:
    paragraph.add_run("Page ")
    begin, instr, sep, end = (OxmlElement("w:fldChar"), OxmlElement("w:instrText"), OxmlElement("w:fldChar"),
                              OxmlElement("w:fldChar"))
    begin.set(qn("w:fldCharType"), "begin")
    instr.text = " PAGE "
    sep.set(qn("w:fldCharType"), "separate")
    end.set(qn("w:fldCharType"), "end")
    for element in (begin, instr, sep):
        paragraph.add_run()._r.append(element)
    paragraph.add_run("1")
    paragraph.add_run()._r.append(end)


def test_headers_and_footers_once_unless_page_numbers_or_the_title() -> None:
    document = docx.Document()
    document.core_properties.title = "Ferry Manual"
    document.sections[0].header.paragraphs[0].text = "ACME Ferries — internal use only"
    page_field(document.sections[0].footer.paragraphs[0])
    document.add_paragraph("Section one text.")
    document.add_section()
    document.sections[1].header.is_linked_to_previous = False
    document.sections[1].header.paragraphs[0].text = "Ferry Manual"  # the title again
    document.sections[1].footer.is_linked_to_previous = False
    document.sections[1].footer.paragraphs[0].text = "Printed copies are not controlled."
    document.add_paragraph("Section two text.")
    texts = [b.text for b in parse(save(document)).blocks]
    assert texts == ["[Header: ACME Ferries — internal use only]", "Section one text.", "Section two text.",
                     "[Footer: Printed copies are not controlled.]"]
