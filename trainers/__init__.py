"""Learning: trainers, the models they build, and the controller that runs them against an environment.

This package knows nothing of sockets; it consumes ``unityagents.BrainInfo`` objects.
"""
