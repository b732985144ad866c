"""Every notebook in notebooks/ runs from top to bottom without an error, and
the committed copies carry their outputs (plots included) and stay small.

Each notebook is executed in a fresh kernel with nbclient; its run time is
printed (pytest -s shows it) but not asserted, since the machine is noisy.
"""

import json
import pathlib
import time

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebooks extra is not installed")
nbclient = pytest.importorskip("nbclient", reason="the notebooks extra is not installed")

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_at_least_six_notebooks():
    assert len(NOTEBOOKS) >= 6, [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_notebook_has_outputs_and_is_small(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c.get("outputs") is not None for c in code)
    assert any(c["outputs"] for c in code), f"{path.name} was committed without outputs"
    assert path.stat().st_size < 600_000, f"{path.name} is {path.stat().st_size} bytes"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # jupyter_client / zmq internals
def test_notebook_runs(path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    print(f"{path.name}: {time.perf_counter() - start:.1f} s")
