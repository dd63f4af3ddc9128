"""Installs the distribution ``unity-tf-trainer``: the packages (unityagents, runner, trainers, academy,
unityagents_tune), learn.py, learn_hub.py, learn_r22.py and their commands.

The distribution's name is not ``unityagents``: on the package index that name is Unity's own 2018 client, a
different package. The import packages and the commands keep their names. ``unityagents.distribution`` holds
the name for the messages that say what to install.

Python 3.10 to 3.13: the modern protocol's generated messages need protobuf >= 7.35, which has no release
for 3.9, and TensorFlow's releases in range publish no wheels beyond 3.13.

The built-in trainers and stats writers register under the same entry-point groups as plugins do
(``unityagents.trainers``, ``unityagents.stats_writers``), so a plugin package is discovered
exactly like them.
"""
import os
import shutil
import sys

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

PYTHON_REQUIRES = ">=3.10,<3.14"
if not (3, 10) <= sys.version_info[:2] <= (3, 13):
    # pip resolves the dependencies before it compares python_requires with a source install's Python, and
    # then names protobuf or tf2onnx instead of the reason; building from source says it first, in one line.
    sys.exit(f"unity-tf-trainer needs Python 3.10-3.13 (python_requires '{PYTHON_REQUIRES}'), not "
             f"{sys.version.split()[0]}: protobuf >= 7.35 and tf2onnx >= 1.17 have no release for 3.9, and "
             "TensorFlow < 2.22 none for 3.14. Create the environment with Python 3.10 to 3.13.")

#: runner.options.SHIPPED and SHIPPED_DIR: the clone's files beside learn.py that an installed package needs.
SHIPPED = ("trainer_configurations.yaml", "config", "curricula")
SHIPPED_DIR = "unityagents_shipped"


class BuildWithShippedFiles(build_py):
    """Builds the packages, then copies the shipped files into ``unityagents_shipped/`` beside ``learn.py``,
    where ``runner.options.shipped_file`` finds them when the project is installed rather than cloned."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads them from the clone
            return
        here = os.path.dirname(os.path.abspath(__file__))
        target = os.path.join(self.build_lib, SHIPPED_DIR)
        for name in SHIPPED:
            source = os.path.join(here, name)
            if os.path.isdir(source):
                shutil.copytree(source, os.path.join(target, name), dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                os.makedirs(target, exist_ok=True)
                shutil.copy2(source, os.path.join(target, name))

setup(
    cmdclass={"build_py": BuildWithShippedFiles},
    name="unity-tf-trainer",
    version="0.3.0",
    description="Multi-brain RL training for Unity-protocol (API-2) environments, with built-in scenes",
    python_requires=PYTHON_REQUIRES,
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
    ],
    packages=find_packages(include=["unityagents", "unityagents.*", "runner", "runner.*", "trainers", "trainers.*",
                                    "academy", "academy.*", "unityagents_tune", "unityagents_tune.*"]),
    py_modules=["learn", "learn_hub", "learn_r22"],
    # The model check's rules: one table per Unity engine version and per ML-Agents C# package.
    package_data={"trainers.export.model_check": ["engines/*.yaml", "packages/*.yaml", "hints.yaml"]},
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
        # Imported by TensorFlow and onnx at start-up: 0.7.0 takes 0.6-0.9 s to register its numpy loops, where
        # 0.5.4 and 0.6.0 take under 10 ms.
        "ml_dtypes>=0.5.4,<0.7",
    ],
    extras_require={
        # Environments as Ray actors on a cluster (learn.py --ray-address; docs/cluster.md).
        "ray": ["ray>=2.40"],
        # Hyperparameter sweeps and population-based training (unityagents-tune; docs/tuning.md): Ray Tune drives
        # the trials, Optuna's TPE sampler draws them for `scheduler: {name: tpe}`.
        "tune": ["ray[tune]>=2.40", "optuna>=3.0"],
        # Sharing trained runs on the Hugging Face Hub (unityagents-push-to-hf, unityagents-load-from-hf).
        "hub": ["huggingface_hub>=0.23"],
        # TensorFlow's GPU build with its CUDA libraries (Linux, NVIDIA driver), for --torch-device cuda /
        # torch_settings.device (runner/devices.py). It shares its package folder with tensorflow-cpu: after
        # installing it, `pip uninstall -y tensorflow-cpu` and reinstall tensorflow (--force-reinstall --no-deps).
        "gpu": ['tensorflow[and-cuda]>=2.15,<2.22; platform_system == "Linux"'],
    },
    entry_points={
        "console_scripts": [
            "learn = learn:cli",
            "unityagents-learn = learn_r22:cli",
            "unityagents-tune = unityagents_tune.cli:cli",
            "unityagents-push-to-hf = learn_hub:push_cli",
            "unityagents-load-from-hf = learn_hub:load_cli",
            "unityagents-check-model = trainers.export.model_check.cli:cli",
        ],
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
