"""The Megatron the tests under tests/megatron run against (--megatron-path, else the installed megatron-core),
imported once, and an op context over it whose worlds are closed at the end."""

import pytest


@pytest.fixture(scope="session")
def M(request):
    from megatron_adapter.megatron_import import load_megatron
    return load_megatron(request.config.getoption("--megatron-path"))


@pytest.fixture(scope="session")
def ctx(M):
    from megatron_adapter.ops.context import OpContext
    context = OpContext(M)
    yield context
    context.worlds.close_all()


@pytest.fixture
def gtp_ctx(ctx):
    if ctx.M.gtp is None:
        pytest.fail("this test needs a Megatron with GTP: run it with --megatron-path <checkout> "
                    f"({ctx.M.import_errors.get('gtp')})")
    return ctx


@pytest.fixture
def checkout(M):
    """A Megatron-LM checkout with GDP and GTP (what the checkout-marked tests need)."""
    if M.gdp is None or M.gtp is None:
        pytest.fail("this test needs a Megatron-LM checkout with GDP and GTP: run it with --megatron-path <checkout> "
                    f"({M.import_errors.get('gdp') or M.import_errors.get('gtp')})")
    return M
