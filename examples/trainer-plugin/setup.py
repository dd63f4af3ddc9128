"""An example trainer plugin: A2C (on-policy) and DQN (off-policy) for unityagents' learn.py.

``pip install -e examples/trainer-plugin`` registers both trainers under the entry-point group
``unityagents.trainers``; a YAML block then selects one with ``trainer: a2c`` or ``trainer: dqn``.
See docs/plugins.md for a walk-through of this package.
"""
from setuptools import find_packages, setup

setup(
    name="unityagents-trainer-plugin",
    version="0.1.0",
    description="Example A2C and DQN trainers for unityagents, registered through entry points",
    python_requires=">=3.9",
    packages=find_packages(include=["unityagents_trainer_plugin", "unityagents_trainer_plugin.*"]),
    package_data={"unityagents_trainer_plugin": ["*/*.yaml"]},
    install_requires=["unityagents>=0.3"],
    entry_points={
        "unityagents.trainers": [
            "a2c = unityagents_trainer_plugin.a2c:A2CTrainer",
            "dqn = unityagents_trainer_plugin.dqn:DQNTrainer",
        ],
    },
)
