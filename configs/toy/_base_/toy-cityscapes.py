# Toy Cityscapes (inline_dense.toy_data): 128x256 street scenes (2:1, as Cityscapes' 1024x2048) in
# Cityscapes' layout under data/toy_cityscapes/ (leftImg8bit/, gtFine/ *_gtFine_labelTrainIds.png, 255
# ignored), generated on first use. mmseg's CityscapesDataset reads it with its 19 classes; six occur
# (road, building, traffic sign, vegetation, sky, car), and IoUMetric's mIoU averages the classes that
# occur in the labels or the predictions (an absent class's IoU is 0 / 0, left out by nanmean).
_base_ = 'mmseg::_base_/datasets/cityscapes.py'

dataset_type = 'ToyCityscapesDataset'
data_root = 'data/toy_cityscapes/'
# settings of the generator (inline_dense.toy_data.make_toy_cityscapes), used when data_root is missing
toy_data = dict(num_train=100, num_val=20, image_size=128, seed=0)
# mmseg's Cityscapes pipeline at 1/8 of the size: images 2048x1024 -> 256x128 (w, h), crops 512x1024 -> 64x128
image_scale = (256, 128)
crop_size = (64, 128)
num_classes = 19

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='RandomResize', scale=image_scale, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=image_scale, keep_ratio=True),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
# folders (leftImg8bit/{train,val}, gtFine/{train,val}) and file suffixes (the Cityscapes base's and the
# dataset's), samplers and the evaluator (mIoU): the Cityscapes base's
train_dataloader = dict(batch_size=4, num_workers=1, dataset=dict(type=dataset_type, data_root=data_root,
                                                                  toy_data=toy_data, pipeline=train_pipeline))
val_dataloader = dict(num_workers=1, dataset=dict(type=dataset_type, data_root=data_root, toy_data=toy_data,
                                                  pipeline=test_pipeline))
test_dataloader = val_dataloader
