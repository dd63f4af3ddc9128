"""unityagents-tune: hyperparameter sweeps and population-based training over a Release 22 run config.

A sweep file names dotted key paths of the run config and a distribution for each; Ray Tune draws
the trials (random or TPE search, with ASHA or median early stopping, or population-based
training), and every trial is an ordinary ``unityagents-learn`` run in its own results folder.

* ``sweep``: reading and checking the sweep file against the run config (no Ray, no TensorFlow);
* ``trial``: one trial, a ``unityagents-learn`` subprocess whose TensorBoard events it reads;
* ``outputs``: ``trials.csv``, ``best.yaml``, the best ONNX, ``members.csv``, the console table;
* ``cli``: the command line (``unityagents-tune``).
"""
