"""The seed's module name for the PPO graph: ``from trainers.ppo_models import create_agent_model``.

The graph itself lives in ``trainers.ppo.models``; this module only gives it the import path that
the seed's scripts and tests use. ``create_agent_model(brain, lr, h_size, epsilon, beta, max_step,
normalize, use_recurrent, num_layers, m_size)`` returns a ``PPOModel`` with the seed's tensors
(``state_in``, ``observation_in``, ``batch_size``, ``sequence_length``, ``epsilon``, ``output``,
``probs``, ``value``, ``entropy``, ``learning_rate``, and ``memory_in``/``memory_out`` when
recurrent), so the seed's feeds run on it.
"""
from trainers.ppo.models import PPOModel, create_agent_model

__all__ = ["PPOModel", "create_agent_model"]
