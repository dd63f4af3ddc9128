"""What a trained run leaves for Unity: the ``.bytes`` frozen graph that 2018 Unity's Internal brain
loads (``frozen_graph``), one ``.onnx`` per brain for today's Unity (``onnx_model``), and the check of
an ``.onnx`` against each Unity inference engine that every export runs (``model_check``).
"""
