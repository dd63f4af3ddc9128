"""``python -m trainers.export.model_check file.onnx``: the same as ``unityagents-check-model``."""
from trainers.export.model_check.cli import cli

cli()
