"""What a trained run leaves for Unity: the ``.bytes`` frozen graph that 2018 Unity's Internal brain
loads (``frozen_graph``), and one ``.onnx`` per brain for today's Unity (``onnx_model``).
"""
