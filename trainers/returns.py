"""Discounted returns and generalised advantage estimates, shared by the trainers and the reward signals.

Pure numpy over one trajectory: nothing here knows TensorFlow, brains or buffers' layout beyond the
field names ``add_gae_fields`` writes.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from trainers.buffer import AgentBuffer


def discount_rewards(
    rewards: Sequence[float],
    gamma: float = 0.99,
    value_next: float = 0.0,
    dones: Optional[Sequence[bool]] = None,
) -> np.ndarray:
    """Discounted returns ``G_t = r_t + gamma * G_{t+1}``, with ``G_T = value_next``.

    :param dones: optional per-step flags; ``dones[t]`` means step ``t`` ended an episode, so
        nothing after it (neither later rewards nor ``value_next``) flows back into ``G_t``.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    returns = np.empty_like(rewards)
    running = float(value_next)
    for t in range(len(rewards) - 1, -1, -1):
        if dones is not None and dones[t]:
            running = 0.0
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


def get_gae(
    rewards: Sequence[float],
    value_estimates: Sequence[float],
    value_next: float = 0.0,
    gamma: float = 0.99,
    lambd: float = 0.95,
    dones: Optional[Sequence[bool]] = None,
) -> np.ndarray:
    """Generalised advantage estimates (Schulman et al. 2016).

    ``delta_t = r_t + gamma * V_{t+1} - V_t`` with ``V_T = value_next`` (0 after a terminal step)
    and ``A_t = sum_k (gamma * lambd)^k delta_{t+k}``, cut at episode ends given by ``dones``.
    ``A + V`` are the TD(lambda) returns the value function regresses to; ``lambd = 1`` makes
    them the n-step returns of A2C.
    """
    values = np.asarray(value_estimates, dtype=np.float64)
    next_values = np.append(values[1:], float(value_next))
    if dones is not None:
        next_values[np.asarray(dones, dtype=bool)] = 0.0
    deltas = np.asarray(rewards, dtype=np.float64) + gamma * next_values - values
    return discount_rewards(deltas, gamma * lambd, 0.0, dones)


def add_gae_fields(trajectory: AgentBuffer, value_next: float, gamma: float, lambd: float) -> None:
    """Write ``advantages``, ``discounted_returns`` and ``masks`` into an actor-critic trajectory.

    The trajectory must hold ``rewards`` (stored by ``OnPolicyTrainer``) and ``value_estimates``
    (stored by the subclass's ``act``). ``masks`` are ones here; when the trajectory is moved as
    sequences, the left padding the Buffer adds carries zeros, which is how a loss skips it.
    """
    values = np.asarray(trajectory["value_estimates"], dtype=np.float64)
    advantages = get_gae(trajectory["rewards"], values, value_next, gamma=gamma, lambd=lambd)
    trajectory["advantages"].set(advantages.astype(np.float32))
    trajectory["discounted_returns"].set((advantages + values).astype(np.float32))
    trajectory["masks"].set(np.ones(len(values), dtype=np.float32))
