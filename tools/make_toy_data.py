"""Generate the bundled toy datasets (deterministic; the toy configs also do it on first use).

    python tools/make_toy_data.py                     # data/toy_coco, toy_ade, toy_coco_panoptic, toy_cityscapes
    python tools/make_toy_data.py coco --root /tmp/toy_coco --num-train 50 --num-val 10
    python tools/make_toy_data.py ade --force         # regenerate data/toy_ade
    python tools/make_toy_data.py cityscapes --image-size 256   # 256x512 street scenes
"""
import argparse
import os.path as osp
import time

DATASETS = ('coco', 'ade', 'coco-panoptic', 'cityscapes')


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description='Generate the toy COCO / ADE20K / COCO panoptic / Cityscapes '
                                                 'datasets')
    parser.add_argument('which', nargs='?', choices=[*DATASETS, 'all'], default='all')
    parser.add_argument('--root', help='output folder (default data/toy_<dataset>); only with a single dataset')
    parser.add_argument('--num-train', type=int, help='training images')
    parser.add_argument('--num-val', type=int, help='validation images')
    parser.add_argument('--image-size', type=int, help='side of the square images in pixels (128); cityscapes: '
                                                       'the height of its 2:1 images (128)')
    parser.add_argument('--seed', type=int, help='random seed (0)')
    parser.add_argument('--force', action='store_true', help='regenerate an existing toy folder')
    args = parser.parse_args(argv)
    if args.root and args.which == 'all':
        parser.error(f'--root needs a single dataset: one of {", ".join(DATASETS)}')
    for flag in ('num_train', 'num_val', 'image_size'):  # one line here, not a traceback from the generator
        value = getattr(args, flag)
        if value is not None and value < 1:
            parser.error(f'--{flag.replace("_", "-")} {value}: give 1 or more')

    from inline_dense import toy_data

    kwargs = {k: v for k, v in dict(num_train=args.num_train, num_val=args.num_val,
                                     image_size=args.image_size, seed=args.seed).items() if v is not None}
    jobs = {'coco': (toy_data.make_toy_coco, toy_data.coco_settings, toy_data.DEFAULT_COCO_ROOT),
            'ade': (toy_data.make_toy_ade, toy_data.ade_settings, toy_data.DEFAULT_ADE_ROOT),
            'coco-panoptic': (toy_data.make_toy_coco_panoptic, toy_data.coco_panoptic_settings,
                              toy_data.DEFAULT_COCO_PANOPTIC_ROOT),
            'cityscapes': (toy_data.make_toy_cityscapes, toy_data.cityscapes_settings,
                           toy_data.DEFAULT_CITYSCAPES_ROOT)}
    for name in (DATASETS if args.which == 'all' else [args.which]):
        make, settings, default_root = jobs[name]
        root = args.root or default_root
        before = toy_data.read_stamp(root) if osp.isdir(root) else None
        t0 = time.time()
        try:
            out = make(root, force=args.force, **kwargs)
        except ValueError as exc:  # settings the generator refuses (e.g. an image too small for its shapes)
            parser.error(str(exc))
        stamp = toy_data.read_stamp(out)
        kept = before == stamp and not args.force
        verb = 'kept existing' if kept else f'wrote in {time.time() - t0:.1f} s'
        print(f'toy {name}: {out} ({verb}; {stamp["num_train"]} train / {stamp["num_val"]} val images, '
              f'{stamp["image_size"][0]}x{stamp["image_size"][1]}, classes {", ".join(stamp["classes"])})')
        if stamp != settings(**kwargs):
            print('  note: it was generated with other settings than these; add --force to regenerate it')


if __name__ == '__main__':
    main()
