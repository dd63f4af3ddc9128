"""What every trainer is: the interface the controller drives (``base``); how steps become
experience (``collector``, with the types and pairing functions of ``trajectory``); the bases a
trainer subclasses (``rl_trainer``, ``on_policy`` with ``reward_signal_fields``, ``off_policy``); and
the registry that finds trainer types through entry points (``registry``).
"""
