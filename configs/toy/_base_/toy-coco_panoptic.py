# Toy COCO panoptic (inline_dense.toy_data): the toy ADE20K scenes (128x128) in COCO's panoptic layout under
# data/toy_coco_panoptic/, generated on first use: panoptic PNGs (RGB-encoded segment ids) with their
# segments_info, 3 things (circle, square, triangle) and 2 stuff classes (sky, ground); the things also
# as COCO instances (annotations/instances_*.json), which mmdet's panoptic recipe evaluates too.
_base_ = 'mmdet::_base_/datasets/coco_panoptic.py'

dataset_type = 'ToyCocoPanopticDataset'
data_root = 'data/toy_coco_panoptic/'
# settings of the generator (inline_dense.toy_data.make_toy_coco_panoptic), used when data_root is missing
toy_data = dict(num_train=400, num_val=50, image_size=128, seed=0)
backend_args = None
image_scale = (128, 128)  # the toy images' size: Resize only records scale_factor, which mmdet needs
num_things_classes = 3  # the generator's classes: the heads' class counts
num_stuff_classes = 2

train_pipeline = [
    dict(type='LoadImageFromFile', backend_args=backend_args),
    dict(type='LoadPanopticAnnotations', with_bbox=True, with_mask=True, with_seg=True, backend_args=backend_args),
    dict(type='Resize', scale=image_scale, keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile', backend_args=backend_args),
    dict(type='Resize', scale=image_scale, keep_ratio=True),
    dict(type='LoadPanopticAnnotations', backend_args=backend_args),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
# annotation files, image and PNG folders, filters and the batch sampler: the COCO panoptic base's
train_dataloader = dict(batch_size=4, num_workers=1, sampler=dict(type='InfiniteSampler'),
                        dataset=dict(type=dataset_type, data_root=data_root, toy_data=toy_data,
                                     pipeline=train_pipeline))
val_dataloader = dict(num_workers=1, dataset=dict(type=dataset_type, data_root=data_root, toy_data=toy_data,
                                                  pipeline=test_pipeline))
test_dataloader = val_dataloader

# as mmdet's Mask2Former panoptic recipe: PQ / SQ / RQ (all, things, stuff; per class), and box / mask AP
val_evaluator = [
    dict(type='CocoPanopticMetric', ann_file=data_root + 'annotations/panoptic_val2017.json',
         seg_prefix=data_root + 'annotations/panoptic_val2017/', classwise=True, backend_args=backend_args),
    dict(type='CocoMetric', ann_file=data_root + 'annotations/instances_val2017.json', metric=['bbox', 'segm'],
         backend_args=backend_args),
]
test_evaluator = val_evaluator
