# Toy ADE20K (inline_dense.toy_data): 128x128 scenes, 5 classes (sky, ground, circle, square,
# triangle), images + PNG label maps in ADE20K's layout under data/toy_ade/, generated on first use.
_base_ = 'mmseg::_base_/datasets/ade20k.py'

dataset_type = 'ToyADE20KDataset'
data_root = 'data/toy_ade'
# settings of the generator (inline_dense.toy_data.make_toy_ade), used when data_root is missing
toy_data = dict(num_train=200, num_val=40, image_size=128, seed=0)
crop_size = (128, 128)
num_classes = 5  # the generator's classes: the heads' num_classes

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=(128, 128), ratio_range=(0.75, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(128, 128), keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
# batch sizes, samplers and the evaluator (mIoU): the ADE20K base's
train_dataloader = dict(num_workers=1, dataset=dict(type=dataset_type, data_root=data_root, toy_data=toy_data,
                                                    pipeline=train_pipeline))
val_dataloader = dict(num_workers=1, dataset=dict(type=dataset_type, data_root=data_root, toy_data=toy_data,
                                                  pipeline=test_pipeline))
test_dataloader = val_dataloader
