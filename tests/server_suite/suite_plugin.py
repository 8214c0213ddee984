"""pytest plugin for llama.cpp's server test-suite run by run_suite.py: deselects the
tests that call the OpenAI Python client (not packaged in Debian), so they are counted
apart instead of failing, and writes their ids to RAMFORGE_SUITE_DESELECTED. It also
turns the suite's ServerPreset.load_all into nothing: it starts every preset once only
to download their models, and offline there is nothing to download (under serve, the
router preset would fail every test at that start)."""
import inspect
import os


def needs_openai_client(item):
    fn = getattr(item, "function", None)
    try:
        return fn is not None and "OpenAI(" in inspect.getsource(fn)
    except (OSError, TypeError):
        return False


def pytest_collection_modifyitems(config, items):
    import utils  # the suite's own, imported by its conftest.py
    utils.ServerPreset.load_all = staticmethod(lambda: None)
    try:
        import openai  # noqa: F401
        if not getattr(openai, "RAMFORGE_STUB", False):
            return
    except ImportError:
        pass
    dropped = [it for it in items if needs_openai_client(it)]
    if not dropped:
        return
    items[:] = [it for it in items if it not in dropped]
    config.hook.pytest_deselected(items=dropped)
    out = os.environ.get("RAMFORGE_SUITE_DESELECTED")
    if out:
        with open(out, "w") as f:
            f.writelines(it.nodeid + "\n" for it in dropped)
