"""Learning: trainers, the models they build, buffers, reward signals, export and settings.

This package knows nothing of sockets or of the run that drives it (``runner``); it consumes the
environment's steps (``unityagents.base_env``) through one agent processor
(``runner.agent_processor``).
"""
