import pytest

from autodiff._core import current_interpreters


@pytest.fixture(autouse=True)
def _interpreter_stack_is_restored():
    """Every test must leave the interpreter stack empty, also when it raised."""
    assert current_interpreters() == (), "a previous test leaked an interpreter"
    yield
    assert current_interpreters() == (), "this test left an interpreter on the stack"
