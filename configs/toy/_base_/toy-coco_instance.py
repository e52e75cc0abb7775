# Toy COCO (inline_dense.toy_data): 128x128 images, 3 classes (circle, square, triangle),
# boxes and polygon masks in COCO's layout under data/toy_coco/, generated on first use.
_base_ = 'mmdet::_base_/datasets/coco_instance.py'

dataset_type = 'ToyCocoDataset'
data_root = 'data/toy_coco/'
# settings of the generator (inline_dense.toy_data.make_toy_coco), used when data_root is missing
toy_data = dict(num_train=400, num_val=50, image_size=128, seed=0)
backend_args = None
image_scale = (128, 128)  # the toy images' size: Resize only records scale_factor, which mmdet needs

train_pipeline = [
    dict(type='LoadImageFromFile', backend_args=backend_args),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='Resize', scale=image_scale, keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile', backend_args=backend_args),
    dict(type='Resize', scale=image_scale, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
# annotation files, image folders, filters and the batch sampler: the COCO base's
train_dataloader = dict(batch_size=4, num_workers=1, sampler=dict(type='InfiniteSampler'),
                        dataset=dict(type=dataset_type, data_root=data_root, toy_data=toy_data,
                                     pipeline=train_pipeline))
val_dataloader = dict(num_workers=1, dataset=dict(type=dataset_type, data_root=data_root, toy_data=toy_data,
                                                  pipeline=test_pipeline))
test_dataloader = val_dataloader

val_evaluator = dict(ann_file=data_root + 'annotations/instances_val2017.json', metric=['bbox', 'segm'],
                     classwise=True)
test_evaluator = val_evaluator
