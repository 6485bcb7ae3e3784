"""Process set-up: float64 everywhere, and import order with ArviZ does not break NumPyro."""

import subprocess
import sys


def test_float64_enabled():
    import jax.numpy as jnp

    import bayescale  # noqa: F401

    assert jnp.zeros(1).dtype == jnp.float64


def test_arviz_imported_first_still_works():
    code = ("import arviz, bayescale, numpyro, numpyro.distributions as d; "
            "assert hasattr(d, 'distribution'); numpyro.factor  # noqa\n"
            "from numpyro.handlers import seed, trace\n"
            "def m(): numpyro.factor('f', 1.0)\n"
            "print(len(trace(seed(m, 0)).get_trace()))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "1"
