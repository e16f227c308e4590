"""What the core hands on, field by field: blocks, traces, the tool's JSON, effective settings, errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rag_eval.core import errors
from rag_eval.core.config import RagConfig
from rag_eval.core.errors import ConfigError
from rag_eval.core.lookup import LookupKnowledge, Pipeline
from rag_eval.core.postprocess import LegacyPostProcessor, Stage
from rag_eval.core.types import KnowledgeSearchHit, KnowledgeSearchRequest, SearchMode, to_candidates

from ..helpers import hit
from ..rowkit import HINTS


def test_blocks_carry_position_identity_and_metadata_of_their_first_copy() -> None:
    first = KnowledgeSearchHit(
        id="1",
        content="abc",
        score=0.9,
        doc_id="d",
        chunk_index=0,
        vector_id="1",
        source="kb/d.md",
        title="D",
        category="db",
        metadata={"char_start": 4},
    )
    copy = KnowledgeSearchHit(id="2", content="abc", score=0.5, doc_id="d", chunk_index=0, vector_id="2")
    result = Pipeline(RagConfig()).process(HINTS, [first, copy, hit("3", 0.4, "e", 1)]).result
    b1, b2 = result.blocks
    assert (b1.key, b1.position, b1.doc_id, b1.source, b1.title, b1.category) == (
        "d#chunk-0",
        1,
        "d",
        "kb/d.md",
        "D",
        "db",
    )
    assert dict(b1.metadata) == {"char_start": 4} and [r.vector_id for r in b1.hit_reasons] == ["1", "2"]
    assert [(m.key, m.start, m.end) for m in b1.members] == [("d#chunk-0", 0, 3)]
    assert b2.position == 2 and result.outcome.stage_counts()["dedup"] == 1


def test_legacy_blocks_and_trace_positions() -> None:
    hits = [
        hit("1", 0.9, "d", 0),
        hit("2", 0.8, "e", 0),
        hit("3", 0.7, "d", 1),
        hit("4", 0.6, "f", 0),
        hit("5", 0.5, "d", 2),
    ]
    out = LegacyPostProcessor(top_k=2)(to_candidates(hits))
    trace = [(e.vector_id, e.stage, e.position, e.merged_into) for e in out.trace]
    assert trace == [
        ("1", Stage.RETURNED, 1, None),
        ("2", Stage.RETURNED, 2, None),
        ("3", Stage.MERGED, 1, "kb/d.md"),
        ("4", Stage.TRUNCATION, None, None),
        ("5", Stage.MERGED, 1, "kb/d.md"),
    ]
    assert [r.vector_id for r in out.selected[0].hit_reasons] == ["1", "3", "5"]
    assert out.stage_counts() == {
        "returned": 2,
        "dedup": 0,
        "cap": 0,
        "truncation": 1,
        "merged": 2,
        "document_dedup": 0,
        "content_dedup": 0,
    }
    blocks = Pipeline(RagConfig.from_mapping({"rag.pipeline": "legacy", "rag.top-k": 5})).process(HINTS, hits)
    assert [b.position for b in blocks.result.blocks] == [1, 2, 3]
    assert [(m.start, m.end) for m in blocks.result.blocks[0].members] == [(0, 9), (11, 20), (22, 31)]


def test_the_tools_json() -> None:
    payload = Pipeline(RagConfig()).process(HINTS, [hit("1", 0.9, "d", 0, content="abc")]).payload
    assert payload.as_dict() == {
        "query": "why is the replica behind",
        "evidence": [
            {
                "document_id": "d#chunk-0",
                "source": "kb/d.md",
                "title": "Title d",
                "content": "abc",
                "score": 0.9,
                "rank": 1,
                "truncated": False,
            }
        ],
        "hints": {
            "level": "L0",
            "normalized_query": "why is the replica behind",
            "keywords": ["replica", "behind"],
            "identifiers": [],
        },
    }


def test_dropped_blocks_record_their_full_length_and_later_blocks_still_count() -> None:
    hits = [hit(str(i), 1 - i / 10, f"d{i}", 0, content="x" * (10 + i)) for i in range(4)]
    record = Pipeline(RagConfig(max_blocks=2)).process(HINTS, hits)
    assert [(c.document_id, c.chars_before, c.chars_after) for c in record.payload.cuts] == [
        ("d2#chunk-0", 12, 0),
        ("d3#chunk-0", 13, 0),
    ]
    doubled = record.result.blocks[:1] * 2 + record.result.blocks[1:2]
    from dataclasses import replace

    payload = Pipeline(RagConfig()).projector.project(replace(record.result, blocks=doubled))
    assert payload.document_ids == ("d0#chunk-0", "d1#chunk-0")
    assert [(c.budget.value, c.chars_before, c.chars_after) for c in payload.cuts] == [("duplicate_document_id", 10, 0)]
    # a one-character block given twice: the second copy is dropped whole, its member lost with it
    tiny = replace(record.result.blocks[0], content="x", members=(replace(record.result.blocks[0].members[0], end=1),))
    once = Pipeline(RagConfig()).projector.project(replace(record.result, blocks=(tiny, tiny)))
    assert [(c.chars_before, c.chars_after) for c in once.cuts] == [(1, 0)]
    assert [(m.key, m.budget.value) for m in once.member_losses] == [("d0#chunk-0", "duplicate_document_id")]
    starved = Pipeline(RagConfig(max_total_chars=10)).process(HINTS, hits).payload
    assert starved.document_ids == ("d0#chunk-0",) and len(starved.cuts) == 3  # later blocks each recorded


@dataclass
class Recorder:
    hits: tuple[KnowledgeSearchHit, ...]
    requests: list[KnowledgeSearchRequest] = field(default_factory=list)

    def search(self, request: KnowledgeSearchRequest) -> tuple[KnowledgeSearchHit, ...]:
        self.requests.append(request)
        return self.hits

    def close(self) -> None:
        pass


def test_the_port_gets_the_configs_width_filter_mode_and_group_size_and_stages_are_timed() -> None:
    port = Recorder((hit("1", 0.9, "d", 0),))
    config = RagConfig(retrieve_k=7, return_n=3, max_chunks_per_document=3, category_filter="db")
    record = LookupKnowledge(port, config, mode=SearchMode.GROUPED).run("  why is the replica behind ")  # type: ignore[arg-type]
    assert port.requests == [
        KnowledgeSearchRequest(
            query="why is the replica behind", top_k=7, category_filter="db", mode=SearchMode.GROUPED, group_size=3
        )
    ]
    t = record.timings
    for ns in (t.transform_ns, t.search_ns, t.postprocess_ns, t.projection_ns):
        assert 0 < ns < 60 * 10**9  # a duration, not a clock reading
    assert t.total_ns == t.transform_ns + t.search_ns + t.postprocess_ns + t.projection_ns
    assert Pipeline(config).process(HINTS, port.hits).timings.search_ns == 0


def test_search_requests_need_a_positive_width() -> None:
    assert KnowledgeSearchRequest(query="q", top_k=1).top_k == 1
    with pytest.raises(ValueError, match="top_k must be >= 1, got 0"):
        KnowledgeSearchRequest(query="q", top_k=0)


def test_effective_settings_as_properties() -> None:
    config = RagConfig.from_properties_text("rag.top-k=8\nrag.category-filter=db")
    assert config.as_properties() == {
        "rag.pipeline": "evidence",
        "rag.retrieve-k": "8",
        "rag.return-n": "8",
        "rag.max-chunks-per-document": "2",
        "rag.projector.max-excerpt-chars": "2000",
        "rag.projector.max-total-chars": "12000",
        "rag.projector.max-blocks": "8",
        "rag.top-k": "8",
        "rag.category-filter": "db",
    }
    assert RagConfig.from_mapping(config.as_properties()) == config


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"rag.return-n": "30"}, "return-n (30) must not exceed retrieve-k (20) @ rag.return-n"),
        ({"rag.top-k": "30", "rag.retrieve-k": "10"}, "return-n (30) must not exceed retrieve-k (10) @ rag.top-k"),
        ({"rag.retrieve-k": "0"}, "must be > 0, got 0 @ rag.retrieve-k"),
        ({"rag.retrieve-k": "2 # width"}, "'2 # width' is not an integer (in .properties a comment starts only at"),
        ({"rag.return-n": "3!"}, "'3!' is not an integer (in .properties a comment starts only at"),
        ({"rag.return-n": "three"}, "'three' is not an integer @ rag.return-n"),
        ({"rag.return-n": True}, "True is not an integer @ rag.return-n"),
        ({"rag.pipeline": "fast"}, "'fast' is not one of evidence, legacy-merge, legacy-first, legacy @ rag.pipeline"),
        (
            {"rag.pipeline": "legacy", "rag.return-n": 3},
            "not used by rag.pipeline=legacy-merge (one width: set rag.top-k)",
        ),
        ({"rag.retreive-k": 3}, "unknown key (did you mean 'rag.retrieve-k'?) @ rag.retreive-k"),
        ({"rag.retrieve-k": 1, "rag.return-n": 2}, "return-n (2) must not exceed retrieve-k (1) @ rag.return-n"),
        ({"rag.retrieve-k": 2147483648}, "2147483648 is outside the 32-bit integer range the service reads"),
        ({"rag.retrieve-k": "-2147483649"}, "-2147483649 is outside the 32-bit integer range the service reads"),
        ({"rag.zzz": 3}, "unknown key (known: rag.category-filter, rag.max-chunks-per-document, rag.pipeline, "),
        # 'rag.cap' is 0.625 alike with 'rag.top-k' (difflib's ratio): under the 0.75 cutoff, so no guess
        ({"rag.cap": 3}, "unknown key (known: rag.category-filter, rag.max-chunks-per-document, rag.pipeline, "),
    ],
)
def test_config_problems_are_named_with_their_keys(source: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        RagConfig.from_mapping(source, source="prod.properties")
    assert message in str(err.value)
    assert str(err.value).startswith("prod.properties: 1 configuration problem: ")


def test_ints_at_javas_bounds_are_read_and_a_short_key_without_rag_gets_its_guess() -> None:
    # Integer.parseInt reads -2147483648 and 2147483647; only the range check of the value follows
    assert RagConfig.from_mapping({"rag.retrieve-k": "2147483647"}).retrieve_k == 2147483647
    with pytest.raises(ConfigError) as err:
        RagConfig.from_mapping({"rag.retrieve-k": "-2147483648"})
    assert str(err.value) == "1 configuration problem: must be > 0, got -2147483648 @ rag.retrieve-k"
    with pytest.raises(ConfigError) as err:  # 'rag.top' is 0.875 alike with 'rag.top-k'; 'top' alone is not
        RagConfig.from_mapping({"top": 5}, strict=True)
    assert "unknown key (rag settings start with 'rag.') (did you mean 'rag.top-k'?) @ top" in str(err.value)


def test_config_errors_from_files_and_texts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        RagConfig.from_mapping({"retrieve-k": 3, "rag.return-n": 0}, strict=True)
    assert str(err.value) == (
        "2 configuration problems: unknown key (rag settings start with 'rag.') (did you mean 'rag.retrieve-k'?)"
        " @ retrieve-k; must be > 0, got 0 @ rag.return-n"
    )
    with pytest.raises(ConfigError, match=r"^x.toml: 1 configuration problem: not valid TOML: .* @ \(file\)$"):
        RagConfig.from_toml_text("[rag", source="x.toml")
    with pytest.raises(ConfigError, match=r"^x.toml: 1 configuration problem: unknown key") as err:
        RagConfig.from_toml_text("[rag]\nretreive-k = 3\n", source="x.toml")
    missing = tmp_path / "none.properties"
    with pytest.raises(ConfigError) as err:
        RagConfig.from_properties_file(missing)
    assert str(err.value) == f"{missing}: 1 configuration problem: cannot read: No such file or directory @ (file)"
    latin = tmp_path / "latin.properties"
    latin.write_bytes("rag.category-filter=caf\xe9\nrag.retrieve-k=x".encode("latin-1"))
    with pytest.raises(ConfigError) as err:
        RagConfig.from_properties_file(latin)
    assert err.value.path == str(latin) and "'x' is not an integer @ rag.retrieve-k" in str(err.value)
    utf8 = tmp_path / "utf8.properties"
    utf8.write_text("rag.category-filter=café\n", encoding="utf-8")
    assert RagConfig.from_properties_file(utf8).category_filter == "café"
    with pytest.raises(ConfigError, match=r"^p: 1 configuration problem: not a .properties text: .* @ \(file\)$"):
        RagConfig.from_properties_text("rag.pipeline=\\u12", source="p")
    with pytest.raises(TypeError, match=r"^unknown RagConfig fields: \['cap', 'width'\]$"):
        RagConfig().with_(width=3, cap=1)
    with pytest.raises(ConfigError, match=r"must be > 0, got -1 @ rag\.projector\.max-blocks"):
        RagConfig().with_(max_blocks=-1)


def test_error_types_carry_their_fields() -> None:
    e = errors.DatasetError("bad JSON", path="c.jsonl", line=3, field="text")
    assert (str(e), e.message, e.path, e.line, e.field) == (
        "c.jsonl:3: field 'text': bad JSON",
        "bad JSON",
        "c.jsonl",
        3,
        "text",
    )
    assert str(errors.DatasetError("empty", path="q.jsonl")) == "q.jsonl: empty"
    m = errors.EmbeddingMismatchError("wrong model", path="v.npy")
    assert (str(m), m.path) == ("v.npy: wrong model", "v.npy")
    s = errors.SearchRequestError("too wide", uri="u")
    assert (str(s), s.uri) == ("too wide", "u")
    f = errors.UnsupportedFeatureError("no BM25", feature="hybrid", uri="u")
    assert (str(f), f.feature, f.uri) == ("no BM25", "hybrid", "u")
    for unreachable in (errors.SearchUnavailableError, errors.SearchBackendError, errors.LoadClientError):
        a = unreachable("down", uri="u")
        assert (str(a), a.uri, a.exit_code) == ("down", "u", 3)
    for cls in (errors.CollectionNotFoundError, errors.CollectionNotLoadedError):
        c = cls("gone", collection="kb", uri="u")
        assert (str(c), c.collection, c.uri) == ("gone", "kb", "u")
    g = errors.GatesError("unknown measure", path="gates.toml", line=4, check="cap_ok == 1")
    assert (str(g), g.message, g.path, g.line, g.check) == (
        "gates.toml:4: check 'cap_ok == 1': unknown measure",
        "unknown measure",
        "gates.toml",
        4,
        "cap_ok == 1",
    )
    assert str(errors.GatesError("empty", path="gates.toml")) == "gates.toml: empty"
    ri = errors.ReportInputError("not a number", path="summary.json", field="chunk:P@5")
    assert (str(ri), ri.message, ri.path, ri.field) == (
        "summary.json: field 'chunk:P@5': not a number",
        "not a number",
        "summary.json",
        "chunk:P@5",
    )
    assert str(errors.ReportInputError("missing", path="summary.json")) == "summary.json: missing"
    d = errors.RunDirectoryError("no summary.json", path="runs/a")
    assert (str(d), d.path, d.exit_code) == ("runs/a: no summary.json", "runs/a", 2)
    r = errors.RunStoreError("disk full", path="out")
    assert (str(r), r.path) == ("out: disk full", "out")
