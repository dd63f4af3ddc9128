"""Installs the three packages (unityagents, trainers, academy), learn.py and the `learn` command.

The built-in trainers and stats writers register under the same entry-point groups as plugins do
(``unityagents.trainers``, ``unityagents.stats_writers``), so a plugin package is discovered
exactly like them.
"""
from setuptools import find_packages, setup

setup(
    name="unityagents",
    version="0.3.0",
    description="Multi-brain RL training for Unity-protocol (API-2) environments, with built-in scenes",
    python_requires=">=3.9",
    packages=find_packages(include=["unityagents", "unityagents.*", "trainers", "trainers.*",
                                    "academy", "academy.*"]),
    py_modules=["learn"],
    install_requires=[
        "numpy>=1.24",
        "pyyaml>=6.0",
        "docopt-ng>=0.9",
        "Pillow>=10.0",
        "orjson>=3.9",
        "grpcio>=1.60",
        # The ONNX export beside the .bytes (trainers/export/onnx_model.py) and the academy's ONNX brain.
        "tf2onnx>=1.17",
        "onnx>=1.16",
        "onnxruntime>=1.18",
        "protobuf>=7.35.1",
        'tensorflow-cpu>=2.15,<2.22; platform_machine == "x86_64" or platform_machine == "AMD64"',
        'tensorflow>=2.15,<2.22; platform_machine != "x86_64" and platform_machine != "AMD64"',
    ],
    extras_require={
        # Environments as Ray actors on a cluster (learn.py --ray-address; docs/cluster.md).
        "ray": ["ray>=2.40"],
        # TensorFlow's GPU build with its CUDA libraries (Linux, NVIDIA driver), for --torch-device cuda /
        # torch_settings.device (trainers/devices.py). It shares its package folder with tensorflow-cpu: after
        # installing it, `pip uninstall -y tensorflow-cpu` and reinstall tensorflow (--force-reinstall --no-deps).
        "gpu": ['tensorflow[and-cuda]>=2.15,<2.22; platform_system == "Linux"'],
    },
    entry_points={
        "console_scripts": ["learn = learn:cli", "unityagents-learn = trainers.learn_r22:cli"],
        "unityagents.trainers": [
            "ppo = trainers.ppo.trainer:PPOTrainer",
            "ghost = trainers.ghost.trainer:GhostTrainer",
            "imitation = trainers.imitation.trainer:ImitationTrainer",
            "sac = trainers.sac.trainer:SACTrainer",
            "poca = trainers.poca.trainer:POCATrainer",
        ],
        "unityagents.stats_writers": [
            "console = trainers.stats:console_writer",
            "tensorboard = trainers.stats:tensorboard_writer",
        ],
    },
)
