"""pytest set-up for the adapter's tests: the adapter's root on sys.path, as its entry scripts put it.

tests/unit/ runs without Megatron or torch (any python3 with pytest; ctest label unit);
tests/megatron/ runs in the Megatron venv (ctest label megatron), against the installed
megatron-core or, with --megatron-path, a Megatron-LM checkout.
"""

import os
import sys

ADAPTER = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ADAPTER not in sys.path:
    sys.path.insert(1, ADAPTER)


def pytest_addoption(parser):
    parser.addoption("--megatron-path", default=None, help="a Megatron-LM checkout (default: megatron-core installed)")


def pytest_configure(config):
    config.addinivalue_line("markers", "worlds: needs a Megatron with GTP (a checkout: --megatron-path) for gloo worlds")
    config.addinivalue_line("markers", "checkout: needs a Megatron-LM checkout with GDP and GTP (--megatron-path)")
