"""InLine-Swin: its facts (``spec.py``, plain data), its model (``model.py``), its converter
(``convert.py``) and its own softmax attention."""
