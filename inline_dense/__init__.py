"""InLine attention backbones for MMDetection and MMSegmentation."""
