"""The run: what drives trainers against environments, between the front ends and ``trainers``.

The run's typed options (``options``) and its start and exit status (``run``), which both front
ends share; the settings tree read through the trainers' declarations (``settings``); the build of
trainers from it (``build``); the controller loop (``controller``), the agent processor
(``agent_processor``: steps to the trainers' batches) and the collector (``collector``: steps to
experience); the run's files (``run_paths``, ``saver``, ``checkpoints``); stopping on SIGINT or
SIGTERM at safe points (``stopping``); curriculum lessons (``lessons``), device placement
(``devices``), timers (``timers``) and updates on a background thread (``background``). The front
ends (``learn.py``, ``learn_r22.py``, the tuner) build a run through this package; ``trainers``
never imports it, and it never imports a front end.
"""
