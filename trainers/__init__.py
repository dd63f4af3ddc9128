"""Learning: trainers, the models they build, and the controller that runs them against an environment.

This package knows nothing of sockets; it consumes the environment's steps (``unityagents.base_env``)
through one agent processor (``trainers.trainer.agent_processor``).
"""
