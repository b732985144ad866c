"""docs/coverage.md is generated from the registry and must not go stale."""

from tests import coverage


def test_coverage_doc_is_current():
    assert coverage.PATH.read_text() == coverage.markdown(), (
        "docs/coverage.md is stale: run python -m tests.coverage --write"
    )


def test_coverage_counts_at_least_150_functions():
    rows = coverage.rows()
    assert len(rows) >= 150
    assert all(r[2] in (coverage.YES, coverage.NO_DERIVATIVE) for r in rows)
