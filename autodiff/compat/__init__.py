"""Programs written for other libraries, run on autodiff: ``autodiff.compat.autograd``
gives HIPS autograd's names (``python -m autodiff.compat.autograd program.py``)."""
