"""Every kernel test runs once per engine."""

import pytest

import chokepoint


@pytest.fixture(autouse=True, params=chokepoint.BACKENDS)
def backend(request):
    with chokepoint.set_backend(request.param):
        yield request.param
