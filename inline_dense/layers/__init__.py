"""The shared bricks of the InLine backbones (plain torch): InLine attention, the transformer block,
padding, position embeddings, initialisation, tracing marks, tensor helpers, the settings checks and
the backbone base class. Each family (``inline_dense.families.<name>``) builds from these."""
