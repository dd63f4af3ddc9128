"""Proximal Policy Optimisation: the graph of one brain (``models``), acting with it (``policy``), its
update (``optimizer``) and the trainer that joins them (``trainer``).

The ghost and the team self-play trainer reuse the graph builder and the policy for their opponents.
"""
