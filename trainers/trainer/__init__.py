"""What every trainer is: the interface the controller drives (``base``); the step-to-transition
functions (``trajectory``); the bases a trainer subclasses (``rl_trainer``, ``on_policy`` with
``reward_signal_fields``, ``off_policy``); and the registry that finds trainer types through entry
points (``registry``).
"""
