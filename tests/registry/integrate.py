"""Registry records: scipy.integrate.odeint (``autodiff.scipy.integrate``).

The solver's error enters derivatives by finite differences (eps 1e-6), so the
samples ask for tolerances of 1e-13 and check gradients to 1e-5.  A float32
right-hand side cannot meet such tolerances (LSODA gives up), so float32 is
checked at looser ones in ``tests/test_scipy.py``.  SciPy's
odeint converts traced values (``numpy_name=None``); the ``reference`` field gives its
forward value on plain arrays (``tests/test_scipy.py``).  Empty without SciPy.
"""

from __future__ import annotations

import importlib.util

import numpy as np

import autodiff.numpy as anp
from tests.registry import OpInfo, Sample

_rng = np.random.default_rng(8642)  # local: these draws don't shift other families'


_TIGHT = {"rtol": 1e-13, "atol": 1e-13}
_COUPLING = _rng.standard_normal((2, 2)) * 0.5


def forced(y, t, k):
    """A damped, time-dependent linear system: depends on y, t and the rates k."""
    return -k * y + anp.sin(t) * (_COUPLING @ y)


def rotating(t, y):
    """A matrix state (tfirst=True spelling): dY/dt = W(t) Y."""
    w = anp.stack([anp.stack([-0.3, t]), anp.stack([-t, -0.2])])
    return w @ y


def _records() -> list[OpInfo]:
    import scipy.integrate as si

    from autodiff.scipy.integrate import odeint

    def with_rates(lib, y0, t, k, **kwargs):
        return odeint(forced, y0, t, args=(k,), **kwargs)

    def matrix_state(lib, y0, t, **kwargs):
        return odeint(rotating, y0, t, tfirst=True, **kwargs)

    ops = [
        OpInfo(
            "scipy.integrate.odeint",
            [
                Sample(
                    (_rng.standard_normal(2), np.array([0.0, 0.6, 1.3]), _rng.uniform(0.5, 1.5, 2)),
                    _TIGHT,
                    "y0,t,args",
                    rtol=1e-5,
                )
            ],
            numpy_name=None,
            call=with_rates,
            keeps_float32=False,
        ),
        OpInfo(
            "scipy.integrate.odeint",
            [
                Sample(
                    (_rng.standard_normal((2, 2)), np.array([0.2, 1.0])),
                    _TIGHT,
                    "tfirst,matrix y0",
                    rtol=1e-5,
                )
            ],
            numpy_name=None,
            call=matrix_state,
            keeps_float32=False,
        ),
    ]
    from autodiff.scipy.integrate import solve_ivp

    def forced_ivp(t, y, k):
        return forced(y, t, k)

    def ivp(lib, y0, t_eval, k, **kwargs):
        return solve_ivp(forced_ivp, (0.0, 2.0), y0, t_eval=t_eval, args=(k,), **kwargs).y

    ops.append(
        OpInfo(
            "scipy.integrate.solve_ivp",
            [
                Sample(
                    (_rng.standard_normal(2), np.array([0.3, 0.9, 1.5]), _rng.uniform(0.5, 1.5, 2)),
                    {"method": "DOP853", "rtol": 1e-12, "atol": 1e-12},
                    "y0,t_eval,args",
                    rtol=1e-5,
                )
            ],
            numpy_name=None,
            call=ivp,
            keeps_float32=False,
        )
    )
    ops[2].reference = lambda y0, t_eval, k, **kw: (
        si.solve_ivp(forced_ivp, (0.0, 2.0), y0, t_eval=t_eval, args=(k,), **kw).y
    )
    ops[0].reference = lambda y0, t, k, **kw: si.odeint(forced, y0, t, args=(k,), **kw)
    ops[1].reference = lambda y0, t, **kw: np.reshape(
        si.odeint(
            lambda y, tt: np.ravel(rotating(tt, np.reshape(y, (2, 2)))), np.ravel(y0), t, **kw
        ),
        (len(t), 2, 2),
    )
    return ops


OPS: list = _records() if importlib.util.find_spec("scipy") is not None else []
