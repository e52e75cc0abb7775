placeholder = 1
def allow_mmengine_checkpoint_types():
    pass
