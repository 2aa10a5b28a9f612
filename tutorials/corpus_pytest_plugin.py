"""The corpus pytest plugin now lives in the package (nki_lite/tools/corpus_plugin.py, used by
`nki-lite check`); this name keeps `-p corpus_pytest_plugin` working for existing command lines."""
from nki_lite.tools.corpus_plugin import *  # noqa: F401,F403
