"""``python -m autodiff.compat.autograd program.py [args...]``: the program runs with
autograd's names resolved here (``__init__.py``'s ``main``).  A file of its own because
a module that ``-m`` runs is loaded twice, as ``__main__`` and then by its name for the
program's ``import autograd``; a package's ``__main__.py`` is all that loads twice."""

import sys

if __name__ == "__main__":  # (imported by name, as ``autograd.__main__``: nothing to run)
    from autodiff.compat.autograd import main

    main(sys.argv[1:])
