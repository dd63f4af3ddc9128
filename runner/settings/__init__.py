"""The run's settings tree, read through what each trainer and reward signal declares.

The seed's ``trainer_configurations.yaml`` (``trainer_config``), Release 22's run config
(``run_config``) and its ``environment_parameters`` (constants, samplers, curricula), and the
generated ``docs/configuration.md`` (``config_docs``). It sits above ``trainers``: it gathers the
declarations of every trainer (built in or plugin), of self-play, imitation and the reward signals.
"""
