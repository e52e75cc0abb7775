"""InLine-pvt: its model (``model.py``) and its softmax attention."""
