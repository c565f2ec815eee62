"""Search request and response (SPEC §10). ``SearchFiltersIn`` forbids unknown keys: a misspelt
filter is a 422, never a filter silently ignored. Reusable by any endpoint that retrieves."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ..domain.metadata import source_path
from ..domain.metadata_filter import parse as parse_metadata_filter
from ..domain.models import SearchResult
from ..domain.search import SearchFilters, SearchMode, glob_to_regex
from .schemas import Text


def _aware(value: datetime) -> datetime:
    """An ISO 8601 time without an offset is taken as UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _bounded_glob(value: str) -> str:
    glob_to_regex(value)  # too many wildcards: ValueError, a 422
    return value


Instant = Annotated[datetime, AfterValidator(_aware)]
MimeType = Annotated[str, Field(min_length=3, max_length=255, pattern=r"^[\w.+-]+/[\w.+-]+$")]


class SearchFiltersIn(BaseModel):
    """All optional, combined with AND. Dates are inclusive bounds."""

    model_config = ConfigDict(extra="forbid")

    document_ids: list[UUID] | None = Field(default=None, min_length=1, max_length=1000)
    filename: Annotated[Text, Field(min_length=1, max_length=255), AfterValidator(_bounded_glob)] | None = Field(
        default=None, description='a glob on the whole file name: "*.pdf", "report-202?-*.docx" '
                                  '(at most 16 `*` and 32 `?` or `[...]`)')
    mime_types: list[MimeType] | None = Field(default=None, min_length=1, max_length=100)
    created_after: Instant | None = None
    created_before: Instant | None = None
    updated_after: Instant | None = None
    updated_before: Instant | None = None
    connector_id: UUID | None = None
    heading: Text | None = Field(default=None, min_length=1, max_length=500,
                                 description="text contained in the heading path (case-insensitive)")
    metadata: dict[str, Any] | None = Field(
        default=None, description='the documents\' own fields: {"field": value | {"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|'
                                  '"$lte"|"$in"|"$nin"|"$contains"|"$exists": value}}, "$and"/"$or" lists of such '
                                  'objects; a dotted field names a nested key (docs/metadata.md)')

    def to_domain(self) -> SearchFilters:
        return SearchFilters(
            document_ids=tuple(self.document_ids) if self.document_ids is not None else None,
            filename=self.filename, mime_types=tuple(self.mime_types) if self.mime_types is not None else None,
            created_after=self.created_after, created_before=self.created_before,
            updated_after=self.updated_after, updated_before=self.updated_before,
            connector_id=self.connector_id, heading=self.heading,
            metadata=parse_metadata_filter(self.metadata) if self.metadata is not None else None)


class SearchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: Text = Field(min_length=1)
    top_k: int = Field(default=10, ge=1)
    mode: SearchMode = SearchMode.HYBRID
    filters: SearchFiltersIn | None = None
    min_score: float | None = Field(default=None, ge=-1, le=1)
    group_by_document: bool = False


SOURCE_PATH = Field(default=None, description="the document's path in the folder or connector it came from "
                                           "(its metadata's source.path; null: uploaded as a single file)")
DENSE_SCORE = Field(default=None, description="the chunk's dense (embedding) cosine similarity to the query, "
                                           "whatever the mode: a relevance scale that means the same in hybrid, "
                                           "dense and sparse search (score may be a fusion)")


class SearchHit(BaseModel):
    chunk_id: UUID
    document_id: UUID
    filename: str
    source_path: str | None = SOURCE_PATH
    content: str
    score: float
    dense_score: float | None = DENSE_SCORE
    heading_path: list[str]
    locator: dict[str, Any]
    highlights: list[tuple[int, int]] = Field(description="[start, end) character offsets in content of what "
                                                          "matched the query")
    assets: list[dict[str, Any]]
    metadata: dict[str, Any] = Field(default_factory=dict, description="the document's own fields")

    @classmethod
    def of(cls, r: SearchResult) -> SearchHit:
        return cls(chunk_id=r.chunk_id, document_id=r.document_id, filename=r.filename,
                   source_path=source_path(r.metadata),
                   content=r.content, score=r.score, dense_score=r.dense_score, heading_path=list(r.heading_path),
                   locator=r.locator.to_metadata(),
                   highlights=[(start, end) for start, end in r.highlights], assets=list(r.assets),
                   metadata=r.metadata)


class SearchOut(BaseModel):
    results: list[SearchHit]
    unmatched_identifiers: list[str] = Field(
        default_factory=list, description="identifiers the query names (codes, ticket, part, clause or version "
                                          "numbers) that no chunk this search could return holds, as the query "
                                          "wrote them; the results are then ranked as usual")
