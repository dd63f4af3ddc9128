"""Proximal Policy Optimisation: the graph of one brain (``models``) and its trainer (``trainer``).

The ghost and the team self-play trainer reuse the same graph builder for their opponents.
"""
