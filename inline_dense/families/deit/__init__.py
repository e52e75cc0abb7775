"""InLine-DeiT: its facts (``spec.py``, plain data), its model (``model.py``) and its converter
(``convert.py``). A plain ViT: one stride-16 map, every block global InLine attention."""
