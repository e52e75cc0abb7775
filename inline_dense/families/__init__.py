"""The InLine backbone families, one folder each: ``<name>/spec.py`` (plain data: presets, published
weights, checkpoint key patterns, head facts, outputs; read by :mod:`inline_dense.registry`),
``<name>/model.py`` (the backbone class), its converter and its own softmax attention."""
