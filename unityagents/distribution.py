"""The name this project installs by, for every message that says what to install.

The import packages (``unityagents``, ``runner``, ``trainers``, ``academy``, ``unityagents_tune``) and the
commands keep their names, but the distribution is ``unity-tf-trainer``: on the package index the name
``unityagents`` belongs to Unity's own 2018 client, so ``pip install unityagents`` installs a different
package. ``setup.py`` declares the same name (a test keeps the two equal).
"""
from __future__ import annotations

#: The distribution's name on the package index (``pip install unity-tf-trainer``).
DISTRIBUTION = "unity-tf-trainer"
#: The Pythons it installs and trains on (``python_requires`` in setup.py).
PYTHON_RANGE = "3.10-3.13"


def install_command(extra: str = "") -> str:
    """The command that installs the distribution, with one of its extras (``hub``, ``tune``, ``ray``, ``gpu``)."""
    return f"pip install '{DISTRIBUTION}[{extra}]'" if extra else f"pip install {DISTRIBUTION}"


def install_hint(extra: str) -> str:
    """What to run for an extra: by name, or from a clone."""
    return f"{install_command(extra)} (from a clone: pip install -e '.[{extra}]')"
