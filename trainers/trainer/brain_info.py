"""``BrainInfo``: the trainers' batch of one brain at one step.

It is the environment's own (``unityagents.brain_info``, which ``UnityEnvironment.reset``/``step``
return too): ``agent_processor`` builds it from the step types, and the trainers read its fields
by name.
"""
from unityagents.brain_info import BrainInfo

__all__ = ["BrainInfo"]
