"""InLine-swin: its model (``model.py``) and its softmax attention."""
