"""Hostile and oversized documents, built here byte by byte: the probes a documents folder
must survive (skip and count, in bounded memory and time). The regression tests and
``benchmarks/document_bombs.py`` share them."""

from __future__ import annotations

import io
import struct
import zipfile

import docx

SPACES = b" " * 2**20


def small_docx() -> bytes:
    """A real one-paragraph DOCX file written by python-docx."""
    document = docx.Document()
    document.add_paragraph("The Rhone flows through Lyon.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def docx_with(document_xml: bytes | None = None, padding_mb: int = 0,
              method: int = zipfile.ZIP_DEFLATED) -> bytes:
    """``small_docx`` with its ``word/document.xml`` replaced (None: kept), or grown by
    ``padding_mb`` MB of spaces inside its paragraph's text (deflated about 1,000:1,
    streamed, so building a 1 GB entry takes little memory), stored with ``method``."""
    source = zipfile.ZipFile(io.BytesIO(small_docx()))
    xml = source.read("word/document.xml") if document_xml is None else document_xml
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as bomb:
        for info in source.infolist():
            if info.filename != "word/document.xml":
                bomb.writestr(info.filename, source.read(info.filename))
                continue
            head, tail = xml.split(b"Lyon.", 1) if padding_mb else (xml, b"")
            with bomb.open(info.filename, "w", force_zip64=padding_mb > 1024) as entry:
                entry.write(head)
                for _ in range(padding_mb):
                    entry.write(SPACES)
                entry.write(b"Lyon." + tail if padding_mb else b"")
    return out.getvalue()


def docx_entity_bomb() -> bytes:
    """A DOCX whose document.xml declares the billion laughs: ten entities, each ten of
    the one before (10^9 characters once expanded)."""
    xml = small_docx_xml()
    laughs = ['<!ENTITY l0 "lol">'] + [f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">'
                                       for i in range(1, 10)]
    declaration, body = xml.split(b"?>", 1)
    doctype = f"<!DOCTYPE w:document [{''.join(laughs)}]>".encode()
    return docx_with(declaration + b"?>" + doctype + body.replace(b"Lyon.", b"&l9;"))


def docx_malformed() -> bytes:
    """A DOCX whose document.xml is cut short (its closing tags missing)."""
    return docx_with(small_docx_xml()[:-40])


def docx_damaged_deflate() -> bytes:
    """A DOCX whose document.xml is stored plain but declared deflated, so inflating it
    fails inside zlib (as a byte flipped in a deflate stream does), not in zipfile."""
    data = bytearray(docx_with(method=zipfile.ZIP_STORED))
    name = b"word/document.xml"
    for signature, method_at, length_at, name_at in ((b"PK\x03\x04", 8, 26, 30),
                                                     (b"PK\x01\x02", 10, 28, 46)):
        at = data.find(signature)
        while at >= 0:
            length = struct.unpack("<H", data[at + length_at:at + length_at + 2])[0]
            if data[at + name_at:at + name_at + length] == name:
                data[at + method_at:at + method_at + 2] = struct.pack("<H", zipfile.ZIP_DEFLATED)
            at = data.find(signature, at + 4)
    return bytes(data)


def small_docx_xml() -> bytes:
    return zipfile.ZipFile(io.BytesIO(small_docx())).read("word/document.xml")


def html_nested(depth: int, tag: str = "div") -> bytes:
    """``depth`` elements each inside the one before, each with a word of text."""
    return (f"<html><body>{f'<{tag}>x' * depth}{f'</{tag}>' * depth}</body></html>").encode()


def html_attributes(count: int) -> bytes:
    """One element with ``count`` attributes of distinct names."""
    names = " ".join(f"a{i}" for i in range(count))
    return f"<html><body><p {names}>x</p></body></html>".encode()


def html_elements(count: int) -> bytes:
    """``count`` empty line breaks: a few bytes each in the file, a node each in the tree."""
    return f"<html><body><p>x{'<br>' * count}</p></body></html>".encode()


def html_blocks(count: int) -> bytes:
    """``count`` one-word paragraphs: the most blocks (text, tree nodes) for the bytes."""
    return f"<html><body>{'<p>w</p>' * count}</body></html>".encode()


def docx_paragraphs(count: int) -> bytes:
    """A real DOCX file of ``count`` paragraphs under headings, written by python-docx."""
    document = docx.Document()
    for i in range(count):
        if i % 50 == 0:
            document.add_heading(f"Chapter {i // 50}", level=1)
        document.add_paragraph(f"Paragraph {i} tells of the old bridge over the river, "
                               f"built in {1800 + i % 200}, and of the town around it.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def html_paragraphs(megabytes: float) -> bytes:
    """A plain page of headed sections and paragraphs, about ``megabytes`` MB long."""
    section = ("<h2>Section {i}</h2><p>Paragraph {i} tells of the old bridge over the river, "
               "built in {year}, and of the <b>town</b> around it.</p>"
               "<ul><li>Item one</li><li>Item <a href='/x?id={i}'>two</a></li></ul>\n")
    parts, size, i = ["<html><head><title>Bridges</title></head><body>"], 0, 0
    while size < megabytes * 2**20:
        parts.append(section.format(i=i, year=1800 + i % 200))
        size += len(parts[-1])
        i += 1
    return ("".join(parts) + "</body></html>").encode()
