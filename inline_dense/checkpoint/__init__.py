from .loading import CheckpointError, load_pretrained, read_checkpoint, state_dict_of

__all__ = ['CheckpointError', 'load_pretrained', 'read_checkpoint', 'state_dict_of']
