# The iteration-based loops of the toy configs (a few CPU minutes of training, one
# evaluation at the end). The toy runtimes (toy-runtime_mmdet.py, toy-runtime_mmseg.py)
# add the optimizer, schedule and hooks of their codebase.
max_iters = 400
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
