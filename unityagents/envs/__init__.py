"""mlagents_envs' wrappers for other libraries, under its module names, over any ``BaseEnv``.

``mlagents_envs.envs.unity_gym_env`` -> ``unityagents.envs.unity_gym_env`` (gymnasium),
``mlagents_envs.envs.unity_parallel_env`` / ``...unity_aec_env`` / ``...unity_pettingzoo_base_env``
-> ``unityagents.envs.<same>`` (PettingZoo). Each module imports its library when imported, so
this package itself needs neither. ``unityagents.bridges`` adds conveniences over this package's
environments (``UnityVectorEnv``, ``make_unity_env``, ``brain_name=``).
"""
