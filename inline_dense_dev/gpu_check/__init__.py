"""The one-command GPU check (``tools/gpu_check.py``) and the wheel folder that takes what it needs
to a GPU machine without network.

:mod:`.wheels` makes and checks the folder (standard library and ``packaging`` only: it runs
before mmengine & co. are installed); :mod:`.plan` holds the sizes (GPU, and the CPU dry run);
:mod:`.runner` runs each step in a :mod:`.worker` process and records its rows in
:mod:`.results`; the steps are :mod:`.ops_step`, :mod:`.deform_attn_step`, :mod:`.attention_step`,
:mod:`.backbone_step`, :mod:`.detector_step`, :mod:`.query_heads_step` and :mod:`.toy_step`,
measuring with :mod:`.measure`.
"""
