"""Self-play: the seed's ghost trainer (``trainer``: an opponent brain driven by past snapshots) and
Release 22's team self-play (``team_trainer``, with its settings, schedule and ELO in ``self_play``).
"""
