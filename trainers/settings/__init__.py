"""A run's settings: the seed's ``trainer_configurations.yaml`` (``trainer_config``), Release 22's run
config (``run_config``) and its ``environment_parameters`` (constants, samplers, curricula).
"""
