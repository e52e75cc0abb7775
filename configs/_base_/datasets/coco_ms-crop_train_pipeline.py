# The multi-scale + random-crop training pipeline of the "ms-crop-3x" recipes (the DETR
# augmentation of mmdet's Swin ms-crop-3x configs), as one variable that a 3x recipe puts
# into its train_dataloader. Its own name (not train_pipeline) so that it can sit next to a
# dataset base, which defines train_pipeline, in one _base_ list.
ms_crop_train_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='RandomFlip', prob=0.5),
    dict(
        type='RandomChoice',
        transforms=[
            [
                dict(
                    type='RandomChoiceResize',
                    scales=[(480, 1333), (512, 1333), (544, 1333), (576, 1333), (608, 1333), (640, 1333),
                            (672, 1333), (704, 1333), (736, 1333), (768, 1333), (800, 1333)],
                    keep_ratio=True),
            ],
            [
                dict(type='RandomChoiceResize', scales=[(400, 1333), (500, 1333), (600, 1333)], keep_ratio=True),
                dict(type='RandomCrop', crop_type='absolute_range', crop_size=(384, 600), allow_negative_crop=True),
                dict(
                    type='RandomChoiceResize',
                    scales=[(480, 1333), (512, 1333), (544, 1333), (576, 1333), (608, 1333), (640, 1333),
                            (672, 1333), (704, 1333), (736, 1333), (768, 1333), (800, 1333)],
                    keep_ratio=True),
            ],
        ]),
    dict(type='PackDetInputs'),
]
