"""Example trainer plugin for unityagents: ``a2c`` (on-policy) and ``dqn`` (off-policy).

Both are registered in this package's ``setup.py`` under the entry-point group
``unityagents.trainers``; importing this package registers nothing by itself.
"""
