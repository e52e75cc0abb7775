"""InLine-cswin: its model (``model.py``) and its softmax attention."""
