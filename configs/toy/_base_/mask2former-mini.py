# Mask2Former's head at toy width, shared by the MMDetection (instance) and MMSegmentation
# (semantic) toy configs: mmdet's / mmseg's recipe (a multi-scale deformable pixel decoder over
# strides 8-32, masked-attention transformer decoder, Hungarian matching on class + mask + dice
# costs at sampled points) cut for 128x128 images: 64 channels, 2 encoder / 3 decoder layers,
# 1024 sampled points (the 1/4-scale mask logits have 32x32). The types carry the 'mmdet.' scope,
# which both codebases resolve. A config adds the queries, classes and the class loss's weights.
m2f_channels = 64
m2f_heads = 4
m2f_pixel_decoder = dict(
    type='mmdet.MSDeformAttnPixelDecoder',
    num_outs=3,
    norm_cfg=dict(type='GN', num_groups=16),
    act_cfg=dict(type='ReLU'),
    encoder=dict(
        num_layers=2,
        layer_cfg=dict(
            self_attn_cfg=dict(embed_dims=m2f_channels, num_heads=m2f_heads, num_levels=3, num_points=4,
                               dropout=0.0, batch_first=True),
            ffn_cfg=dict(embed_dims=m2f_channels, feedforward_channels=4 * m2f_channels, num_fcs=2, ffn_drop=0.0,
                         act_cfg=dict(type='ReLU', inplace=True)))),
    positional_encoding=dict(num_feats=m2f_channels // 2, normalize=True))
m2f_transformer_decoder = dict(
    return_intermediate=True,
    num_layers=3,
    layer_cfg=dict(
        self_attn_cfg=dict(embed_dims=m2f_channels, num_heads=m2f_heads, dropout=0.0, batch_first=True),
        cross_attn_cfg=dict(embed_dims=m2f_channels, num_heads=m2f_heads, dropout=0.0, batch_first=True),
        ffn_cfg=dict(embed_dims=m2f_channels, feedforward_channels=4 * m2f_channels, num_fcs=2, ffn_drop=0.0,
                     act_cfg=dict(type='ReLU', inplace=True))),
    init_cfg=None)
m2f_head = dict(
    type='Mask2FormerHead',
    strides=[4, 8, 16, 32],
    feat_channels=m2f_channels,
    out_channels=m2f_channels,
    num_transformer_feat_level=3,
    pixel_decoder=m2f_pixel_decoder,
    enforce_decoder_input_project=False,
    positional_encoding=dict(num_feats=m2f_channels // 2, normalize=True),
    transformer_decoder=m2f_transformer_decoder,
    loss_mask=dict(type='mmdet.CrossEntropyLoss', use_sigmoid=True, reduction='mean', loss_weight=5.0),
    loss_dice=dict(type='mmdet.DiceLoss', use_sigmoid=True, activate=True, reduction='mean', naive_dice=True,
                   eps=1.0, loss_weight=5.0))
m2f_train_cfg = dict(
    num_points=1024,
    oversample_ratio=3.0,
    importance_sample_ratio=0.75,
    assigner=dict(type='mmdet.HungarianAssigner', match_costs=[
        dict(type='mmdet.ClassificationCost', weight=2.0),
        dict(type='mmdet.CrossEntropyLossCost', weight=5.0, use_sigmoid=True),
        dict(type='mmdet.DiceCost', weight=5.0, pred_act=True, eps=1.0)]),
    sampler=dict(type='mmdet.MaskPseudoSampler'))
# the class loss: softmax over the classes and 'no object', which weighs 0.1
m2f_no_object_weight = 0.1
