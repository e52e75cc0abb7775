# What the toy configs' schedules share (a few CPU minutes of training from scratch, one
# evaluation at the end): iteration-based loops and AdamW at lr 1e-3 without decay on norms and
# biases. The toy runtimes (toy-runtime_mmdet.py, toy-runtime_mmseg.py) add the weight decay, the
# learning-rate schedule and the hooks of their codebase.
max_iters = 400
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999)),
    paramwise_cfg=dict(norm_decay_mult=0.0, bias_decay_mult=0.0))
